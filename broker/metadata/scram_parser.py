"""The bootstrap SCRAM credentials (Kafka's ScramParser, which ``kafka-storage format
--add-scram`` uses): ``SCRAM-SHA-512=[name=alice,password=alice-secret]``, with optional
``iterations`` (default 4096), and ``salt`` (base64) with ``saltedpassword`` (base64)
instead of ``password``. ``bootstrap.scram.credentials`` holds several, separated by
whitespace; the first active controller of an empty metadata log writes them."""

from __future__ import annotations

import base64
import binascii
import re
from typing import NamedTuple

from purgatory.broker.security.scram_credential import (
    ScramCredential,
    credential_from_salted_password,
    new_credential,
)
from purgatory.protocol.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISMS_BY_NAME,
    MIN_ITERATIONS,
    ScramMechanism,
)

_BETWEEN_ARGUMENTS = re.compile(r"(?<=\])\s+")


class ScramArgument(NamedTuple):
    """One parsed argument: whose credential, for which mechanism, from what."""

    mechanism: ScramMechanism
    name: str
    iterations: int
    password: str | None
    salt: bytes | None
    salted_password: bytes | None

    def credential(self) -> ScramCredential:
        """The credential it stands for (a random salt unless one was given)."""
        if self.salted_password is not None:
            assert self.salt is not None
            return credential_from_salted_password(
                self.mechanism, self.salt, self.salted_password, self.iterations
            )
        assert self.password is not None
        return new_credential(self.mechanism, self.password, self.iterations, self.salt)


def split_scram_arguments(value: str) -> list[str]:
    """``A=[...] B=[...]`` -> its arguments (whitespace after a ``]`` separates them)."""
    return [a for a in _BETWEEN_ARGUMENTS.split(value.strip()) if a]


def parse_scram_arguments(value: str) -> list[ScramArgument]:
    """Every argument of ``value``; ValueError saying what is wrong with the first bad one."""
    return [parse_scram_argument(a) for a in split_scram_arguments(value)]


def parse_scram_argument(text: str) -> ScramArgument:
    """``MECHANISM=[key=value,...]``; ValueError in Kafka's words."""
    text = text.strip()
    mechanism_name, sep, config = text.partition("=")
    if not sep:
        raise ValueError(f"Failed to find equals sign in SCRAM argument '{text}'")
    mechanism = MECHANISMS_BY_NAME.get(mechanism_name)
    if mechanism is None:
        raise ValueError(
            f"The add-scram mechanism {mechanism_name} is not supported "
            f"(supported: {', '.join(MECHANISMS_BY_NAME)})"
        )
    if not config.startswith("["):
        raise ValueError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ValueError("Expected configuration string to end with ]")
    components: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, sep, value = component.partition("=")
        if not sep:
            raise ValueError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    name = components.pop("name", None)
    if name is None:
        raise ValueError("You must supply 'name' to add-scram")
    salt = _base64(components.pop("salt", None), "salt")
    iterations_text = components.pop("iterations", None)
    try:
        iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    except ValueError:
        raise ValueError(f"Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    salted = _base64(components.pop("saltedpassword", None), "saltedPassword")
    if password is None:
        if salted is None:
            raise ValueError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise ValueError("You must supply 'salt' with 'saltedpassword' to add-scram")
    else:
        salted = None
    if components:
        raise ValueError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < MIN_ITERATIONS:
        raise ValueError(
            f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using "
            f"{mechanism.name}"
        )
    if iterations > MAX_ITERATIONS:
        raise ValueError(
            f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using "
            f"{mechanism.name}"
        )
    return ScramArgument(mechanism, name, iterations, password, salt, salted)


def _base64(text: str | None, what: str) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"Failed to decode given {what}: {text}") from None
