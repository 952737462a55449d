"""The Kafka listener's ElectLeaders (43): preferred and unclean leader elections on demand
(Kafka's AdminClient.electLeaders, kafka-leader-election).

The active controller decides, as Kafka's ``ReplicationControlManager.electLeaders`` does
(``election.elect_on_request``), and writes each new leader to the metadata log as a
PartitionChangeRecord; a broker that is not the controller forwards the request to it
(``ForwardingManager.elect_leaders``). The answer comes once the quorum has committed the
records and every live broker holds them, at most ``timeout_ms`` after the request (Kafka's
controller answers right after its commit, so this one answers no sooner); not committed
by then, REQUEST_TIMED_OUT at the top and in every partition named, as Kafka answers.

v0 has no election type: it is a preferred election. An election type other than 0 or 1
is INVALID_REQUEST for every partition named ("Unknown election type N", as Kafka).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.request_limits import check_partition_count
from purgatory.broker.api.results import Result
from purgatory.broker.security.authorizer.acl import AclOperation
from purgatory.protocol import messages as m
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.kafka_schemas import build, millis, response_module

if TYPE_CHECKING:
    from purgatory.broker.server import Broker

# (topic, [(partition, error code, message)]) in the order answered.
TopicResults = list[tuple[str, list[tuple[int, int, str | None]]]]


class LeaderElectionApis:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, Any]:
        return {ApiKey.ELECT_LEADERS: self.handle_elect_leaders}

    def handle_elect_leaders(self, request: Any, version: int) -> Result:
        election_type = request.election_type if version >= 1 else m.PREFERRED_ELECTION
        if election_type not in (m.PREFERRED_ELECTION, m.UNCLEAN_ELECTION):
            return error_response(
                version,
                request,
                ErrorCode.INVALID_REQUEST,
                f"Unknown election type {election_type}",
            )
        named = request.topic_partitions
        if named is not None:
            check_partition_count(list(named), lambda t: list(t.partitions))
        if authz.cluster_refused(self.broker.auth, AclOperation.ALTER):
            return error_response(version, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        asked = m.ElectLeadersRequest(
            election_type,
            None
            if named is None
            else [m.TopicPartitions(t.topic, list(t.partitions)) for t in named],
            millis(request.timeout),
        )
        return self._elect(asked, version)

    async def _elect(self, asked: m.ElectLeadersRequest, version: int) -> Any:
        done = await self.broker.forwarding.elect_leaders(asked)
        answered: TopicResults = [
            (r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
            for r in done.replica_election_results
        ]
        if done.error_code and not answered:
            # The controller could not be reached: every partition named fails the same way
            # (a client retries NOT_CONTROLLER after refreshing its metadata).
            reason = f"controller unavailable ({ErrorCode(done.error_code).name}); retry"
            answered = [
                (t.topic, [(p, done.error_code, reason) for p in t.partitions])
                for t in asked.topic_partitions or ()
            ]
        return _response(version, done.error_code, answered)


def _response(version: int, code: int, topics: TopicResults) -> Any:
    schema = response_module(ApiKey.ELECT_LEADERS, version)
    return build(
        schema.ElectLeadersResponse,
        throttle_time=0,
        error_code=code,
        replica_election_results=[
            build(
                schema.ReplicaElectionResult,
                topic=topic,
                partition_result=[
                    build(schema.PartitionResult, partition_id=p, error_code=c, error_message=msg)
                    for p, c, msg in partitions
                ],
            )
            for topic, partitions in topics
        ],
    )


def error_response(version: int, body: Any, code: int, message: str | None = None) -> Any:
    """Kafka's ``ElectLeadersRequest.getErrorResponse``: the error at the top (v1+) and in
    every partition named, with its message."""
    return _response(
        version,
        code,
        [
            (t.topic, [(p, code, message) for p in t.partitions])
            for t in body.topic_partitions or ()
        ],
    )
