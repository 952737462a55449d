"""KafkaPrincipal: who a connection acts as, ``type:name`` (Kafka's ``User:alice``). A
PLAINTEXT connection, and an SSL one without a client certificate, is
``User:ANONYMOUS``; SASL gives ``User:<authorization id>``; a client certificate its
distinguished name through ``ssl.principal.mapping.rules``."""

from __future__ import annotations

from typing import NamedTuple

USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)
