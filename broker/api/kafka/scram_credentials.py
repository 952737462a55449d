"""The Kafka listener's SCRAM credential APIs: DescribeUserScramCredentials (50), answered
by any broker from its metadata image (``ScramImage.describe``), and
AlterUserScramCredentials (51), which the active controller serves (forwarded there,
``ScramControlManager``). Both v0, as Kafka 4 serves them.

Errors as Kafka's: RESOURCE_NOT_FOUND for a user described without a credential or a
credential deleted that does not exist, DUPLICATE_RESOURCE for a user named twice,
UNSUPPORTED_SASL_MECHANISM and UNACCEPTABLE_CREDENTIAL for a bad upsertion,
NOT_CONTROLLER for every user when the controller cannot be reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.request_limits import MAX_PARTITIONS_PER_REQUEST
from purgatory.broker.api.results import Result
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.api import ApiKey, RequestError
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

SCRAM_APIS = frozenset(
    {ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS}
)


class ScramCredentialApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials,
        }

    def handle_describe_user_scram_credentials(self, request: Any, version: int) -> Result:
        users = None if request.users is None else [u.name for u in request.users]
        _check_count(len(users or ()))
        if authz.cluster_refused(self.broker.auth, AclOperation.DESCRIBE):
            return _refused(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version, request)
        described = self.broker.metadata.image.scram.describe(users)
        return describe_response(version, described)

    def handle_alter_user_scram_credentials(self, request: Any, version: int) -> Result:
        _check_count(len(request.deletions) + len(request.upsertions))
        if authz.cluster_refused(self.broker.auth, AclOperation.ALTER):
            return _refused(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version, request)
        return self._alter(request, version)

    async def _alter(self, request: Any, version: int) -> Any:
        asked = sm.AlterUserScramCredentialsRequest(
            [sm.ScramCredentialDeletion(d.name, d.mechanism) for d in request.deletions],
            [
                sm.ScramCredentialUpsertion(
                    u.name, u.mechanism, u.iterations, u.salt, u.salted_password
                )
                for u in request.upsertions
            ],
        )
        done = await self.broker.forwarding.alter_user_scram_credentials(asked)
        return alter_response(version, done)


def _refused(key: ApiKey, version: int, request: Any) -> Any:
    """Kafka's answer without DESCRIBE (ALTER) on the cluster: CLUSTER_AUTHORIZATION_FAILED."""
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:  # Kafka's: no message, no names
        return error_response(key, version, request, code, None)
    return error_response(key, version, request, code, authz.CLUSTER_REFUSED)


def _check_count(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"at most {MAX_PARTITIONS_PER_REQUEST} users per request"
        )


def describe_response(version: int, described: sm.DescribeUserScramCredentialsResponse) -> Any:
    schema = response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    return build(
        schema.DescribeUserScramCredentialsResponse,
        throttle_time=0,
        error_code=described.error_code,
        error_message=described.error_message,
        results=[
            build(
                schema.DescribeUserScramCredentialsResult,
                user=r.user,
                error_code=r.error_code,
                error_message=r.error_message,
                credential_infos=[
                    build(schema.CredentialInfo, mechanism=c.mechanism, iterations=c.iterations)
                    for c in r.credential_infos
                ],
            )
            for r in described.results
        ],
    )


def alter_response(version: int, done: sm.AlterUserScramCredentialsResponse) -> Any:
    schema = response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
    return build(
        schema.AlterUserScramCredentialsResponse,
        throttle_time=0,
        results=[
            build(
                schema.AlterUserScramCredentialsResult,
                user=r.user,
                error_code=r.error_code,
                error_message=r.error_message,
            )
            for r in done.results
        ],
    )


def error_response(key: int, version: int, body: Any, code: int, message: str | None) -> Any:
    """The API's answer refusing the whole request with ``code``, as Kafka's
    ``getErrorResponse``: a describe's at the top and once for every user asked (its name
    left empty, as Kafka's), an alter's in every user named (sorted)."""
    if key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        users = [] if body.users is None else [u.name for u in body.users]
        return describe_response(
            version,
            sm.DescribeUserScramCredentialsResponse(
                code,
                message,
                [sm.DescribeUserScramCredentialsResult("", code, message, []) for _ in users],
            ),
        )
    names = {d.name for d in body.deletions} | {u.name for u in body.upsertions}
    return alter_response(
        version,
        sm.AlterUserScramCredentialsResponse(
            [sm.AlterUserScramCredentialsResult(u, code, message) for u in sorted(names)]
        ),
    )
