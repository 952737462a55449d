"""ScramControlManager: AlterUserScramCredentials (51) on the controller (Kafka's
ScramControlManager). A request is checked against the controller's image and turned
into UserScramCredentialRecords and RemoveUserScramCredentialRecords; every broker holds
the credentials once it replays them (``ScramImage``).

Results are per user, as Kafka's are, and a user fails or succeeds whole:

- a user altered twice in one request (two mechanisms, or a deletion and an upsertion
  too) is DUPLICATE_RESOURCE;
- an empty user name is UNACCEPTABLE_CREDENTIAL, a mechanism other than SCRAM-SHA-256
  (1) and SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM;
- an upsertion's iterations must be between 4096 and 16384 (UNACCEPTABLE_CREDENTIAL);
- a deletion of a credential the user does not have is RESOURCE_NOT_FOUND.

An upsertion carries the salt and the salted password (the client salts the password);
the record holds the stored key and the server key derived from them, never either.
"""

from __future__ import annotations

from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from purgatory.broker.security.scram_credential import credential_from_salted_password
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.scram import MAX_ITERATIONS, MECHANISMS_BY_TYPE, MIN_ITERATIONS

ScramRecord = UserScramCredentialRecord | RemoveUserScramCredentialRecord

_TWICE = "A user credential cannot be altered twice in the same request"


class ScramControlManager:
    def alter_credentials(
        self, image: MetadataImage, request: sm.AlterUserScramCredentialsRequest
    ) -> tuple[sm.AlterUserScramCredentialsResponse, list[ScramRecord]]:
        """The answer to an AlterUserScramCredentials request and the records that make
        its changes: deletions first, then upsertions, then the users refused."""
        deletions: dict[str, sm.ScramCredentialDeletion] = {}
        upsertions: dict[str, sm.ScramCredentialUpsertion] = {}
        errors: dict[str, tuple[int, str]] = {}
        for deletion in request.deletions:
            user = deletion.name
            if user in errors:
                continue
            if deletions.pop(user, None) is not None:
                errors[user] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            elif (error := self._deletion_error(image, deletion)) is not None:
                errors[user] = error
            else:
                deletions[user] = deletion
        for upsertion in request.upsertions:
            user = upsertion.name
            if user in errors:
                continue
            if deletions.pop(user, None) is not None or upsertions.pop(user, None) is not None:
                errors[user] = (ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            elif (error := _upsertion_error(upsertion)) is not None:
                errors[user] = error
            else:
                upsertions[user] = upsertion
        results = [sm.AlterUserScramCredentialsResult(user, 0, None) for user in deletions]
        records: list[ScramRecord] = [
            RemoveUserScramCredentialRecord(d.name, d.mechanism) for d in deletions.values()
        ]
        for user, upsertion in upsertions.items():
            mechanism = MECHANISMS_BY_TYPE[upsertion.mechanism]
            credential = credential_from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
            records.append(
                UserScramCredentialRecord(
                    user,
                    mechanism.type,
                    credential.salt,
                    credential.stored_key,
                    credential.server_key,
                    credential.iterations,
                )
            )
            results.append(sm.AlterUserScramCredentialsResult(user, 0, None))
        results.extend(
            sm.AlterUserScramCredentialsResult(user, code, message)
            for user, (code, message) in errors.items()
        )
        return sm.AlterUserScramCredentialsResponse(results), records

    @staticmethod
    def _deletion_error(
        image: MetadataImage, deletion: sm.ScramCredentialDeletion
    ) -> tuple[int, str] | None:
        error = _name_and_mechanism_error(deletion.name, deletion.mechanism)
        if error is not None:
            return error
        mechanism = MECHANISMS_BY_TYPE[deletion.mechanism]
        if image.scram.credential(mechanism.name, deletion.name) is None:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return None


def _upsertion_error(upsertion: sm.ScramCredentialUpsertion) -> tuple[int, str] | None:
    error = _name_and_mechanism_error(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _name_and_mechanism_error(user: str, mechanism: int) -> tuple[int, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS_BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None
