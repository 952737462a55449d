"""SCRAM's mechanisms as Kafka numbers them (``ScramMechanism``: SCRAM-SHA-256 is 1,
SCRAM-SHA-512 is 2) and the salted password (RFC 5802's ``Hi``, PBKDF2 with the
mechanism's HMAC), which an admin client sends in AlterUserScramCredentials instead of
the password. Pure functions: the broker, the clients and the tests share them."""

from __future__ import annotations

import hashlib
import secrets
from typing import NamedTuple

# Kafka's bounds on a credential's iterations (ScramMechanism.minIterations and
# ScramControlManager.MAX_ITERATIONS), the same for both mechanisms.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096  # kafka-configs' and kafka-storage's when none is given


class ScramMechanism(NamedTuple):
    name: str  # as SASL names it: SCRAM-SHA-256
    type: int  # Kafka's int8 on the wire (0: UNKNOWN)
    hash_name: str  # hashlib's name of its hash


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")

MECHANISMS_BY_NAME = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def mechanism_named(name: str) -> ScramMechanism:
    """The mechanism called ``name``; ValueError naming the ones there are."""
    mechanism = MECHANISMS_BY_NAME.get(name)
    if mechanism is None:
        raise ValueError(f"{name!r} is not a SCRAM mechanism: {' or '.join(MECHANISMS_BY_NAME)}")
    return mechanism


def new_salt() -> bytes:
    """A random salt for a new credential."""
    return secrets.token_bytes(32)


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """``Hi(password, salt, iterations)``: the password as UTF-8 (Kafka's ScramFormatter
    applies no SASLprep), PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
