"""AdminClient: create, delete, grow and describe topics; leader elections; config changes;
SCRAM users' credentials; committed offsets and log ends; deleting records."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Unpack

from purgatory.clients.cluster import ClientCluster, by_topic
from purgatory.clients.connection import Connection, ConnectionClosed
from purgatory.clients.coordinator_client import CoordinatorClient
from purgatory.clients.security import ClientSecurity, SecurityKeywords
from purgatory.protocol import acl_messages as am
from purgatory.protocol import group_messages as g
from purgatory.protocol import messages as m
from purgatory.protocol import quota_messages as qm
from purgatory.protocol import raft_messages as rm
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.scram import DEFAULT_ITERATIONS, mechanism_named, new_salt, salted_password


def scram_upsertion(
    user: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS
) -> sm.ScramCredentialUpsertion:
    """A credential to set, salted here as Kafka's admin client salts it (a random salt,
    ``Hi(password, salt, iterations)``): the password never leaves this process.
    ValueError for a mechanism other than SCRAM-SHA-256 and SCRAM-SHA-512."""
    scram = mechanism_named(mechanism)
    salt = new_salt()
    return sm.ScramCredentialUpsertion(
        user, scram.type, iterations, salt, salted_password(scram, password, salt, iterations)
    )


class AdminClient:
    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "purgatory-admin",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        **security: Unpack[SecurityKeywords],
    ) -> None:
        """``security``: Kafka's client security configs (``security_protocol``,
        ``sasl_mechanism``, ...; clients/security.py)."""
        self.retry_backoff_ms = retry_backoff_ms
        self.cluster = ClientCluster(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            security=ClientSecurity.from_keywords(security),
        )

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _on_controller(
        self,
        names: list[str],
        ask: Callable[[list[str]], Awaitable[Iterable[Any]]],
        timeout_ms: int,
    ) -> dict[str, Any]:
        """Results by topic name of ``ask(names)`` sent to the controller. Topics the
        controller could not take yet (NOT_CONTROLLER: it is being replaced or unreachable)
        are asked again, with fresh metadata, until ``timeout_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        results: dict[str, Any] = {}
        pending = list(dict.fromkeys(names))
        while True:
            results.update((r.name, r) for r in await ask(pending))
            pending = [n for n in pending if results[n].error_code == ErrorCode.NOT_CONTROLLER]
            if not pending or loop.time() + self.retry_backoff_ms / 1000 > deadline:
                return results
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            await self.cluster.refresh([])

    async def create_topics(
        self,
        topics: list[m.CreatableTopic],
        *,
        timeout_ms: int = 30000,
        validate_only: bool = False,
    ) -> list[m.CreatableTopicResult]:
        """Create topics; returns one result per topic (check ``error_code``)."""

        async def ask(names: list[str]) -> list[m.CreatableTopicResult]:
            asked = [
                t for t in topics if t.name in names
            ]  # duplicates too: the broker refuses them
            response: m.CreateTopicsResponse = await self.cluster.send_to_controller(
                ApiKey.CREATE_TOPICS,
                m.CreateTopicsRequest(asked, timeout_ms, validate_only),
                timeout_ms=timeout_ms + 5000,
            )
            return response.topics

        results = await self._on_controller([t.name for t in topics], ask, timeout_ms)
        return [results[t.name] for t in topics]

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
    ) -> m.CreatableTopicResult:
        """Create one topic or raise KafkaError with the broker's reason."""
        [result] = await self.create_topics(
            [m.CreatableTopic(name, partitions, replication_factor, configs or {})]
        )
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(result.error_code, result.error_message)
        return result

    async def delete_topics(
        self, names: list[str], *, timeout_ms: int = 30000
    ) -> list[m.DeletableTopicResult]:
        """Delete topics; one result per topic (check ``error_code``)."""

        async def ask(pending: list[str]) -> list[m.DeletableTopicResult]:
            response: m.DeleteTopicsResponse = await self.cluster.send_to_controller(
                ApiKey.DELETE_TOPICS,
                m.DeleteTopicsRequest(pending, timeout_ms),
                timeout_ms=timeout_ms + 5000,
            )
            return response.responses

        results = await self._on_controller(names, ask, timeout_ms)
        return [results[n] for n in dict.fromkeys(names)]

    async def delete_topic(self, name: str) -> None:
        """Delete one topic or raise KafkaError with the broker's reason."""
        [result] = await self.delete_topics([name])
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(result.error_code, result.error_message)

    async def create_partitions(
        self,
        counts: dict[str, int],
        *,
        assignments: dict[str, list[list[int]]] | None = None,
        timeout_ms: int = 30000,
        validate_only: bool = False,
    ) -> list[m.CreatePartitionsTopicResult]:
        """Grow topics to ``counts`` partitions (the new total); one result per topic
        (check ``error_code``). ``assignments``: the replicas of each new partition of a
        topic; default: placed by the controller."""
        given = assignments or {}

        async def ask(pending: list[str]) -> list[m.CreatePartitionsTopicResult]:
            response: m.CreatePartitionsResponse = await self.cluster.send_to_controller(
                ApiKey.CREATE_PARTITIONS,
                m.CreatePartitionsRequest(
                    [m.CreatePartitionsTopic(n, counts[n], given.get(n)) for n in pending],
                    timeout_ms,
                    validate_only,
                ),
                timeout_ms=timeout_ms + 5000,
            )
            return response.results

        results = await self._on_controller(list(counts), ask, timeout_ms)
        return [results[n] for n in counts]

    async def elect_leaders(
        self,
        election_type: int = m.PREFERRED_ELECTION,
        partitions: list[tuple[str, int]] | None = None,
        *,
        timeout_ms: int = 30000,
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """A preferred (``m.PREFERRED_ELECTION``) or unclean (``m.UNCLEAN_ELECTION``) leader
        election for ``partitions`` (None: every partition); (error code, message) by
        partition. ELECTION_NOT_NEEDED means the partition already has the leader asked for."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        asked = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in partitions:
                by_topic.setdefault(topic, []).append(index)
            asked = [m.TopicPartitions(t, ps) for t, ps in by_topic.items()]
        while True:
            response: m.ElectLeadersResponse = await self.cluster.send_to_controller(
                ApiKey.ELECT_LEADERS,
                m.ElectLeadersRequest(election_type, asked, timeout_ms),
                timeout_ms=timeout_ms + 5000,
            )
            if response.error_code != ErrorCode.NOT_CONTROLLER or loop.time() > deadline:
                break
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            await self.cluster.refresh([])
        if response.error_code:
            raise KafkaError(response.error_code, "leader election refused")
        return {
            (t.topic, p.partition_id): (p.error_code, p.error_message)
            for t in response.replica_election_results
            for p in t.partition_result
        }

    async def alter_configs(
        self,
        resources: list[m.AlterConfigsResource],
        *,
        incremental: bool = True,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> list[m.AlterConfigsResourceResponse]:
        """IncrementalAlterConfigs (or, ``incremental`` False, AlterConfigs, which replaces
        each resource's whole set) of topics and brokers (resource name "": the
        cluster-wide default); the result of each resource, in order."""
        key = ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            response: m.IncrementalAlterConfigsResponse = await self.cluster.send_to_controller(
                key,
                m.IncrementalAlterConfigsRequest(resources, validate_only),
                timeout_ms=timeout_ms,
            )
            retry = any(r.error_code == ErrorCode.NOT_CONTROLLER for r in response.responses)
            if not retry or loop.time() > deadline:
                return response.responses
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            await self.cluster.refresh([])

    async def alter_user_scram_credentials(
        self,
        deletions: list[sm.ScramCredentialDeletion],
        upsertions: list[sm.ScramCredentialUpsertion],
        *,
        timeout_ms: int = 30000,
    ) -> list[sm.AlterUserScramCredentialsResult]:
        """AlterUserScramCredentials (upsertions from ``scram_upsertion``): one result per
        user; asked again while the controller answers NOT_CONTROLLER, until
        ``timeout_ms``."""
        response: sm.AlterUserScramCredentialsResponse = await self._until_controller_answers(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            sm.AlterUserScramCredentialsRequest(deletions, upsertions),
            lambda r: [u.error_code for u in r.results],
            timeout_ms,
        )
        return response.results

    async def describe_user_scram_credentials(
        self, users: list[str] | None = None
    ) -> list[sm.DescribeUserScramCredentialsResult]:
        """The mechanisms and iterations of ``users``' credentials (None: every user's),
        one result per user; raises KafkaError for an error of the whole request."""
        conn = await self.cluster.any_connection()
        response: sm.DescribeUserScramCredentialsResponse = await conn.send(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, sm.DescribeUserScramCredentialsRequest(users)
        )
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        return response.results

    # -- client quotas (Kafka's Admin alterClientQuotas, describeClientQuotas) -------------

    async def alter_client_quotas(
        self,
        entries: list[qm.AlterEntryData],
        *,
        validate_only: bool = False,
        timeout_ms: int = 30000,
    ) -> list[qm.AlterEntryResult]:
        """AlterClientQuotas: one result per entity (``quota_alteration`` makes an
        entry); asked again while the controller answers NOT_CONTROLLER, until
        ``timeout_ms``."""
        response: qm.AlterClientQuotasResponse = await self._until_controller_answers(
            ApiKey.ALTER_CLIENT_QUOTAS,
            qm.AlterClientQuotasRequest(entries, validate_only),
            lambda r: [e.error_code for e in r.entries],
            timeout_ms,
        )
        return response.entries

    async def describe_client_quotas(
        self, components: list[qm.ComponentData], *, strict: bool = False
    ) -> list[qm.DescribeEntryData]:
        """The quota entities matching the filter (no component: every entity) with their
        quotas; raises KafkaError for a filter the broker refuses."""
        conn = await self.cluster.any_connection()
        response: qm.DescribeClientQuotasResponse = await conn.send(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, qm.DescribeClientQuotasRequest(components, strict)
        )
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        return response.entries or []

    # -- ACLs (broker/security/authorizer; Kafka's Admin createAcls, describeAcls, ...) ----

    async def create_acls(
        self, acls: list[am.Acl], *, timeout_ms: int = 30000
    ) -> list[am.AclCreationResult]:
        """CreateAcls: one result per ACL, in order; asked again while the controller
        answers NOT_CONTROLLER, until ``timeout_ms``."""
        response: am.CreateAclsResponse = await self._until_controller_answers(
            ApiKey.CREATE_ACLS,
            am.CreateAclsRequest(acls),
            lambda r: [c.error_code for c in r.results],
            timeout_ms,
        )
        return response.results

    async def delete_acls(
        self, filters: list[am.Acl], *, timeout_ms: int = 30000
    ) -> list[am.DeleteAclsFilterResult]:
        """DeleteAcls: per filter, the ACLs it removed."""
        response: am.DeleteAclsResponse = await self._until_controller_answers(
            ApiKey.DELETE_ACLS,
            am.DeleteAclsRequest(filters),
            lambda r: [f.error_code for f in r.filter_results],
            timeout_ms,
        )
        return response.filter_results

    async def describe_acls(self, acl_filter: am.Acl) -> list[am.Acl]:
        """The ACLs matching ``acl_filter``; raises KafkaError (SECURITY_DISABLED without an
        authorizer, CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster)."""
        conn = await self.cluster.any_connection()
        response: am.DescribeAclsResponse = await conn.send(
            ApiKey.DESCRIBE_ACLS, am.DescribeAclsRequest(acl_filter)
        )
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        return response.acls

    async def _until_controller_answers(
        self,
        key: ApiKey,
        request: Any,
        codes: Callable[[Any], list[int]],
        timeout_ms: int,
    ) -> Any:
        """A controller request, sent again while any of its results is NOT_CONTROLLER (a
        new controller being elected), until ``timeout_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            response = await self.cluster.send_to_controller(key, request, timeout_ms=timeout_ms)
            if ErrorCode.NOT_CONTROLLER not in codes(response) or loop.time() > deadline:
                return response
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            await self.cluster.refresh([])

    def _group(self, group: str) -> CoordinatorClient:
        return CoordinatorClient(
            self.cluster, group, retry_backoff_ms=self.retry_backoff_ms, timeout_ms=30000
        )

    async def find_coordinator(self, group: str) -> int:
        """The id of the broker that coordinates ``group`` now (retrying while the
        coordinator is unavailable or loading)."""
        return await self._group(group).coordinator()

    async def group_offsets(
        self, group: str, tps: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], tuple[int, str | None]]:
        """Committed (offset, metadata) of ``group`` for the partitions that have one
        (``tps`` None: every partition it committed), from the group's coordinator."""
        return await self._group(group).committed(tps)

    async def alter_group_offsets(
        self, group: str, offsets: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """Commit ``offsets`` for an empty group (as a group that only stores offsets);
        the error of each partition (UNKNOWN_MEMBER_ID while the group has members)."""
        return await self._group(group).commit({tp: (o, None) for tp, o in offsets.items()})

    async def describe_groups(self, groups: list[str]) -> list[g.DescribedGroup]:
        """Each group as its coordinator sees it (state, members, assignments)."""
        out = []
        for group in groups:
            response: g.DescribeGroupsResponse = await self._group(group).send(
                ApiKey.DESCRIBE_GROUPS,
                g.DescribeGroupsRequest([group]),
                lambda r: r.groups[0].error_code if r.groups else 0,
            )
            out.extend(response.groups)
        return out

    async def list_groups(self, states: list[str] | None = None) -> list[g.ListedGroup]:
        """Every group of the cluster: each broker lists those it coordinates."""
        await self.cluster.refresh([])
        listed: dict[str, g.ListedGroup] = {}
        for node in sorted(self.cluster.brokers):
            conn = await self.cluster.connection(node)
            response: g.ListGroupsResponse = await conn.send(
                ApiKey.LIST_GROUPS, g.ListGroupsRequest(states or [])
            )
            if (
                response.error_code
                and response.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            ):
                raise KafkaError(response.error_code, f"ListGroups at broker {node}")
            for group in response.groups:
                listed[group.group_id] = group
        return [listed[k] for k in sorted(listed)]

    async def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """Delete empty groups and their offsets: the error of each group."""
        out: dict[str, int] = {}
        for group in groups:
            response: g.DeleteGroupsResponse = await self._group(group).send(
                ApiKey.DELETE_GROUPS,
                g.DeleteGroupsRequest([group]),
                lambda r: r.results[0].error_code if r.results else 0,
            )
            out.update({r.group_id: r.error_code for r in response.results})
        return out

    async def log_end_offsets(
        self,
        tps: list[tuple[str, int]],
        errors: dict[tuple[str, int], KafkaError] | None = None,
    ) -> dict[tuple[str, int], int]:
        """The offset consumers can read up to (the high watermark) of each partition. With
        ``errors``, partitions whose leader cannot answer are listed there, not raised."""
        await self.cluster.ensure_topics(sorted({t for t, _ in tps}), auto_create=False)
        return await self.cluster.list_offsets(tps, m.LATEST_TIMESTAMP, errors)

    async def offsets_at(
        self, tps: list[tuple[str, int]], where: str
    ) -> dict[tuple[str, int], int]:
        """Each partition's ``earliest`` (log start) or ``latest`` (high watermark) offset."""
        timestamp = m.EARLIEST_TIMESTAMP if where == "earliest" else m.LATEST_TIMESTAMP
        return await self.cluster.list_offsets(tps, timestamp)

    async def delete_records(
        self, offsets: dict[tuple[str, int], int], timeout_ms: int = 30000
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """DeleteRecords at each partition's leader: every record below its offset (-1: the
        high watermark) goes. (error code, low watermark) per partition; the low watermark
        is the smallest log start of its live replicas once they all start there, -1 with
        an error. Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION, unreachable leaders
        their connection's error."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        with contextlib.suppress(ConnectionClosed, KafkaError):
            await self.cluster.refresh(sorted({t for t, _ in offsets}))
        asked = []
        for topic, index in offsets:
            parts = self.cluster.partitions_for(topic)
            if parts is None or not 0 <= index < len(parts):
                out[(topic, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
            else:
                asked.append((topic, index))

        async def ask(conn: Connection, group: list[tuple[str, int]]) -> None:
            request = m.DeleteRecordsRequest(
                [
                    m.DeleteRecordsTopic(
                        t, [m.DeleteRecordsPartition(p, offsets[(t, p)]) for p in ps]
                    )
                    for t, ps in by_topic(group).items()
                ],
                timeout_ms,
            )
            response: m.DeleteRecordsResponse = await conn.send(
                ApiKey.DELETE_RECORDS, request, timeout_ms=timeout_ms + 5000
            )
            for topic in response.topics:
                for part in topic.partitions:
                    out[(topic.name, part.partition_index)] = (part.error_code, part.low_watermark)

        errors: dict[tuple[str, int], KafkaError] = {}
        await self.cluster.per_leader(asked, errors, ask)
        for tp, error in errors.items():
            out.setdefault(tp, (error.code, -1))
        return out

    async def list_topics(self) -> list[str]:
        response = await self.cluster.refresh(None)
        return sorted(t.name for t in response.topics if t.error_code == 0)

    async def describe_topics(self, topics: list[str] | None = None) -> m.MetadataResponse:
        return await self.cluster.refresh(topics)

    async def describe_cluster(self) -> dict[str, Any]:
        response = await self.cluster.refresh([])
        return {
            "cluster_id": response.cluster_id,
            "controller_id": response.controller_id,
            "brokers": [
                {"id": b.node_id, "host": b.host, "port": b.port} for b in response.brokers
            ],
        }

    async def describe_quorum(self) -> rm.DescribeQuorumResponse:
        """The metadata quorum as its leader sees it (Kafka's describeMetadataQuorum): any
        broker asks the leader. Raises KafkaError when no leader answers."""
        conn = await self.cluster.any_connection()
        response: rm.DescribeQuorumResponse = await conn.send(
            ApiKey.DESCRIBE_QUORUM, rm.DescribeQuorumRequest()
        )
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        return response

    async def close(self) -> None:
        await self.cluster.close()


def quota_alteration(
    entity: dict[str, str | None], quotas: dict[str, float | None]
) -> qm.AlterEntryData:
    """An AlterClientQuotas entry: ``entity`` by type (``user``, ``client-id``, ``ip``; a
    name of None: the type's default), ``quotas`` by key (a value of None removes it)."""
    return qm.AlterEntryData(
        [qm.EntityData(kind, name) for kind, name in entity.items()],
        [qm.OpData(key, value or 0.0, value is None) for key, value in quotas.items()],
    )
