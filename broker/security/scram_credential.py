"""ScramCredential (Kafka's): what a broker keeps of a SCRAM user's password per
mechanism, the salt and iterations it was salted with and the keys RFC 5802 derives from
the salted password, which prove a client knows the password without holding it.

``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` checks the client's proof;
``ServerKey = HMAC(SaltedPassword, "Server Key")`` signs the server's answer. The
controller derives them from an AlterUserScramCredentials upsertion (which carries the
salted password, never the password), the bootstrap credentials from a password.
"""

from __future__ import annotations

import hashlib
import hmac

import msgspec

from purgatory.protocol.scram import (
    DEFAULT_ITERATIONS,
    ScramMechanism,
    new_salt,
    salted_password,
)


class ScramCredential(msgspec.Struct, frozen=True, gc=False):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys in a log line
        return f"ScramCredential(iterations={self.iterations})"


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Client Key", mechanism.hash_name)


def stored_key(mechanism: ScramMechanism, client: bytes) -> bytes:
    """``H(ClientKey)``."""
    return hashlib.new(mechanism.hash_name, client).digest()


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Server Key", mechanism.hash_name)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The credential of a password salted with ``salt`` over ``iterations``
    (Kafka's ScramControlManager.finishUpsertion)."""
    return ScramCredential(
        salt,
        stored_key(mechanism, client_key(mechanism, salted)),
        server_key(mechanism, salted),
        iterations,
    )


def new_credential(
    mechanism: ScramMechanism,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for ``password`` with a random salt unless ``salt`` is given (Kafka's
    ScramFormatter.generateCredential)."""
    salt = new_salt() if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)
