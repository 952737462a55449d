"""ScramImage and ScramDelta (Kafka's): every SCRAM user's credentials as of one image of
the metadata log, by mechanism then user, and the changes a run of records makes to them.
Every broker holds every credential, so any of them can authenticate any user and answer
DescribeUserScramCredentials (``describe``, with Kafka's errors)."""

from __future__ import annotations

from purgatory.broker.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from purgatory.broker.security.scram_credential import ScramCredential
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.scram import MECHANISMS_BY_NAME, MECHANISMS_BY_TYPE


class ScramImage:
    """Invariant: ``mechanisms`` maps a mechanism's name (SCRAM-SHA-256) to a non-empty
    dict of user -> credential; never changed once made (a delta makes the next one)."""

    __slots__ = ("mechanisms",)

    def __init__(self, mechanisms: dict[str, dict[str, ScramCredential]] | None = None) -> None:
        self.mechanisms = mechanisms if mechanisms is not None else {}

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.mechanisms.get(mechanism, {}).get(user)

    def users(self) -> list[str]:
        """Every user with a credential, sorted."""
        return sorted({u for users in self.mechanisms.values() for u in users})

    def records(self) -> list[UserScramCredentialRecord]:
        """Records that rebuild this image from nothing (for a snapshot)."""
        return [
            UserScramCredentialRecord(
                user,
                MECHANISMS_BY_NAME[name].type,
                c.salt,
                c.stored_key,
                c.server_key,
                c.iterations,
            )
            for name, users in sorted(self.mechanisms.items())
            for user, c in users.items()
        ]

    def describe(self, users: list[str] | None) -> sm.DescribeUserScramCredentialsResponse:
        """DescribeUserScramCredentials (Kafka's ScramImage.describe): every user with a
        credential when none is named; a user named twice is DUPLICATE_RESOURCE, one
        without a credential RESOURCE_NOT_FOUND, each answered once."""
        results: list[sm.DescribeUserScramCredentialsResult] = []
        if not users:
            users = self.users()
        counts: dict[str, int] = {}
        for user in users:
            counts[user] = counts.get(user, 0) + 1
        for user, count in counts.items():
            if count > 1:
                results.append(
                    sm.DescribeUserScramCredentialsResult(
                        user,
                        ErrorCode.DUPLICATE_RESOURCE,
                        "Cannot describe SCRAM credentials for the same user twice in a "
                        f"single request: {user}",
                        [],
                    )
                )
                continue
            infos = [
                sm.CredentialInfo(MECHANISMS_BY_NAME[name].type, credentials[user].iterations)
                for name, credentials in sorted(self.mechanisms.items())
                if user in credentials
            ]
            if infos:
                results.append(sm.DescribeUserScramCredentialsResult(user, 0, None, infos))
            else:
                results.append(
                    sm.DescribeUserScramCredentialsResult(
                        user,
                        ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {user}",
                        [],
                    )
                )
        return sm.DescribeUserScramCredentialsResponse(ErrorCode.NONE, None, results)


class ScramDelta:
    """Credential records replayed on top of ``image``; ``apply`` makes the next image,
    sharing every mechanism no record touched."""

    def __init__(self, image: ScramImage) -> None:
        self.image = image
        self._mechanisms = dict(image.mechanisms)
        self._copied: set[str] = set()  # mechanisms whose user dict is this delta's own

    def _users(self, mechanism: str) -> dict[str, ScramCredential]:
        if mechanism not in self._copied:
            self._mechanisms[mechanism] = dict(self._mechanisms.get(mechanism, {}))
            self._copied.add(mechanism)
        return self._mechanisms[mechanism]

    def replay(self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
        mechanism = MECHANISMS_BY_TYPE.get(record.mechanism)
        if mechanism is None:
            return  # the controller writes none of another mechanism
        users = self._users(mechanism.name)
        if isinstance(record, UserScramCredentialRecord):
            users[record.name] = ScramCredential(
                record.salt, record.stored_key, record.server_key, record.iterations
            )
        else:
            users.pop(record.name, None)

    def apply(self) -> ScramImage:
        return ScramImage({name: users for name, users in self._mechanisms.items() if users})
