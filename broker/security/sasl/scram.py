"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, 7677; Kafka's ScramSaslServer): the
client's first message names the user, the server answers with the user's salt and
iterations, the client proves it knows the password, the server proves it knows the
stored key. The exchange is ``scramp``'s; the credentials are the metadata log's
(UserScramCredentialRecord, looked up by mechanism and user)."""

from __future__ import annotations

from collections.abc import Callable

import scramp

from purgatory.broker.security.sasl import SaslAuthenticationError
from purgatory.broker.security.scram_credential import ScramCredential

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


CredentialLookup = Callable[[str, str], ScramCredential | None]  # (mechanism, user)


def _username(saslname: str) -> str:
    """RFC 5802's saslname: ``=2C`` is a comma and ``=3D`` an equals sign."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    def __init__(self, mechanism: str, credentials: CredentialLookup) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        # Kafka tells the client no more than this, whatever failed.
        self.failure = (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}"
        )
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._user: str | None = None
        self._step = 0
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._user is None:
            raise RuntimeError("authentication has not completed")
        return self._user

    @property
    def expires_at_ms(self) -> int | None:
        return None

    def _auth_info(self, saslname: str) -> tuple[bytes, bytes, bytes, int]:
        self._user = _username(saslname)
        credential = self.credentials(self.mechanism, self._user)
        if credential is None:
            raise SaslAuthenticationError(self.failure)  # Kafka's: no such user
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            message = response.decode("utf-8")
            if self._step == 0:
                # scramp refuses what Kafka's clients never send: an authorization id
                # (Kafka allows one equal to the user) and extensions (Kafka's
                # delegation tokens, tokenauth=true, are not served).
                self._server.set_client_first(message)
                self._step = 1
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._server.set_client_final(message)
                self._step = 2
                self._complete = True
                return str(self._server.get_server_final()).encode()
        except SaslAuthenticationError:
            raise
        except Exception:  # scramp's ScramException, or anything hostile input provokes
            raise SaslAuthenticationError(self.failure) from None
        raise SaslAuthenticationError(f"Authentication failed: {self.mechanism} has ended")
