"""Request and response bodies of the SCRAM credential APIs on our protocol,
DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), in Kafka's shapes
(``protocol.messages`` describes how Structs travel). A mechanism is Kafka's int8
(``protocol.scram``); an upsertion carries the salt and the salted password, never the
password."""

from __future__ import annotations

from purgatory.protocol.messages import Message

# -- DescribeUserScramCredentials (50) -------------------------------------------------------


class DescribeUserScramCredentialsRequest(Message):
    users: list[str] | None = None  # None or empty: every user with a credential


class CredentialInfo(Message):
    mechanism: int
    iterations: int


class DescribeUserScramCredentialsResult(Message):
    user: str
    error_code: int
    error_message: str | None
    credential_infos: list[CredentialInfo]


class DescribeUserScramCredentialsResponse(Message):
    error_code: int
    error_message: str | None
    results: list[DescribeUserScramCredentialsResult]


# -- AlterUserScramCredentials (51) ----------------------------------------------------------


class ScramCredentialDeletion(Message):
    name: str
    mechanism: int


class ScramCredentialUpsertion(Message):
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class AlterUserScramCredentialsRequest(Message):
    deletions: list[ScramCredentialDeletion]
    upsertions: list[ScramCredentialUpsertion]


class AlterUserScramCredentialsResult(Message):
    user: str
    error_code: int
    error_message: str | None


class AlterUserScramCredentialsResponse(Message):
    results: list[AlterUserScramCredentialsResult]
