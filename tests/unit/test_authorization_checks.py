"""broker/api/authorization.py: without an authorizer nothing is checked (no principal
looked at, nothing refused, the request passed on as it came); with one, Kafka's rules
for what is refused and with which error."""

from __future__ import annotations

from typing import Any

from purgatory.broker.api import authorization as authz
from purgatory.broker.api.fetch_request import fetch_refusals, with_fetch_refusals
from purgatory.broker.replication.fetch_params import FetchParams, FetchResult, PartitionFetchInfo
from purgatory.broker.security.authorizer.acl import AclOperation, ResourceType
from purgatory.broker.security.authorizer.auth_helper import AuthHelper
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode


class Untouchable:
    """A request context that fails the test if anything asks who sent the request."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the request context was asked for {name}")


def test_without_an_authorizer_nothing_is_checked_or_refused() -> None:
    auth = AuthHelper(Untouchable, lambda: None)
    assert not auth.enabled
    entries = [(("t", 0), b"")]
    assert authz.write_refusals(auth, entries) == {}
    offsets = {("t", 0): 5}
    assert authz.delete_records_refusals(auth, offsets) == {} and offsets == {("t", 0): 5}
    assert authz.unauthorized_topics(auth, AclOperation.READ, ["t"]) == frozenset()
    assert authz.create_topics_refusals(auth, ["t"]) == {}
    assert authz.delete_topics_refusals(auth, ["t"], lambda name: True) == {}
    assert authz.create_partitions_refusals(auth, ["t"]) == frozenset()
    assert authz.alter_configs_refusals(auth, [m.AlterConfigsResource(2, "t", [])]) == {}
    assert authz.config_refusal(auth, AclOperation.DESCRIBE_CONFIGS, 4, "0") is None
    assert authz.init_producer_id_refusal(auth, "tx") == ErrorCode.NONE
    assert authz.init_producer_id_refusal(auth, None) == ErrorCode.NONE
    assert not authz.cluster_refused(auth, AclOperation.ALTER)
    params = FetchParams(-1, 0, 0, 100, ((("t", 0), PartitionFetchInfo(0, 100)),))
    kept, refused = fetch_refusals(auth, params)
    assert kept is params and refused == []

    def respond(result: FetchResult) -> int:
        return len(result.partitions)

    assert with_fetch_refusals(respond, refused) is respond  # the same answer, unwrapped


class Principal:
    current_principal = "User:alice"
    current_peer = "127.0.0.1:1234"
    current_broker = None


class Allowing:
    """An authorizer allowing exactly ``allowed`` (operation, resource type, name)."""

    def __init__(self, *allowed: tuple[AclOperation, ResourceType, str]) -> None:
        self.allowed = set(allowed)

    def authorize(self, principal: Any, host: str, op: Any, kind: Any, name: str) -> bool:
        return (op, kind, name) in self.allowed

    def authorize_by_resource_type(self, principal: Any, host: str, op: Any, kind: Any) -> bool:
        return any(o == op and k == kind for o, k, _ in self.allowed)


def helper(*allowed: tuple[AclOperation, ResourceType, str]) -> AuthHelper:
    authorizer = Allowing(*allowed)
    return AuthHelper(Principal, lambda: authorizer)  # type: ignore[arg-type, return-value]


def test_delete_topics_tells_unknown_topics_only_to_who_may_describe_them() -> None:
    topic = ResourceType.TOPIC
    auth = helper((AclOperation.DESCRIBE, topic, "ghost"), (AclOperation.DELETE, topic, "mine"))
    known = {"mine", "theirs"}.__contains__
    refused = authz.delete_topics_refusals(auth, ["mine", "theirs", "ghost", "hidden"], known)
    # ghost: describable and unknown, left to the controller (UNKNOWN_TOPIC_OR_PARTITION).
    assert refused == {
        "theirs": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "hidden": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic() -> None:
    assert authz.init_producer_id_refusal(helper(), None) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    some_topic = helper((AclOperation.WRITE, ResourceType.TOPIC, "t"))
    assert authz.init_producer_id_refusal(some_topic, None) == ErrorCode.NONE
    assert (
        authz.init_producer_id_refusal(some_topic, "tx")
        == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def test_a_fetch_keeps_the_partitions_it_may_read_and_answers_the_rest_after_them() -> None:
    auth = helper((AclOperation.READ, ResourceType.TOPIC, "ok"))
    info = PartitionFetchInfo(0, 100)
    params = FetchParams(-1, 0, 0, 100, ((("no", 0), info), (("ok", 0), info)))
    kept, refused = fetch_refusals(auth, params)
    assert [key for key, _ in kept.partitions] == [("ok", 0)]
    assert [(key, data.error) for key, data in refused] == [
        (("no", 0), ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
