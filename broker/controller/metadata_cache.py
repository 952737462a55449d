"""MetadataCache: this broker's view of the cluster, the latest committed metadata image it
has published (Kafka's KRaftMetadataCache), and what each new image changes for the
partitions it holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from purgatory.broker.config.group_config import group_config_values
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.security.scram_credential import ScramCredential
from purgatory.protocol.errors import ErrorCode, KafkaError
from purgatory.protocol.inter_broker_messages import PartitionState, TopicState


class LeaderAndIsr(NamedTuple):
    """A partition's leadership and ISR as the controller holds them (Kafka's LeaderAndIsr);
    ``broker_epochs``: the broker epoch of each ISR member the leader knows (KIP-903)."""

    leader_id: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int  # grows with every change of the ISR (fences stale updates)
    broker_epochs: list[int] = []


class AlterPartitionRefused(KafkaError):
    """The controller refused an ISR change (fenced epoch, stale ISR, ineligible replica)."""


@dataclass(frozen=True)
class PartitionChange:
    """What a metadata update means for one partition on this broker."""

    topic: str
    partition: int
    state: PartitionState | None  # None: the partition is gone
    topic_id: str
    configs: dict[str, str]


class MetadataCache:
    """Invariant: ``image`` is the last image published (committed metadata, in log
    order); ``controller_id`` is the quorum leader as this broker last heard (-1: none).
    ``partition_changes`` says what a new image means for this broker's replicas."""

    def __init__(
        self,
        members: dict[int, tuple[str, int]],
        members_listener: str,
        broker_values: Mapping[str, Any] | None = None,
    ) -> None:
        self.members = members  # every node's address (cluster.members)
        self.members_listener = members_listener  # the listener those addresses are of
        self.image = MetadataImage()
        self.controller_id = -1
        # The broker's configs (BrokerConfig.values, kept current): groups' defaults.
        self.broker_values: Mapping[str, Any] = broker_values if broker_values is not None else {}
        self._endpoints: dict[str, dict[int, tuple[str, int]]] = {}
        self._endpoints_of: MetadataImage | None = None

    def endpoints(self, listener: str) -> dict[int, tuple[str, int]]:
        """Each broker's address on ``listener`` (the one a request came in on), as it
        registered it; a member not registered yet by its member address when that is
        the listener members' addresses are of. A broker without that listener is left
        out, as Kafka does. Made once per image and listener."""
        if self._endpoints_of is not self.image:
            self._endpoints, self._endpoints_of = {}, self.image
        known = self._endpoints.get(listener)
        if known is None:
            known = {}
            registered = self.image.brokers
            for broker_id in sorted(set(registered) | set(self.members)):
                registration = registered.get(broker_id)
                if registration is not None:
                    address = registration.endpoint(listener)
                elif listener == self.members_listener:
                    address = self.members[broker_id]
                else:
                    address = None
                if address is not None:
                    known[broker_id] = address
            self._endpoints[listener] = known
        return known

    @property
    def topics(self) -> dict[str, TopicState]:
        return self.image.topics

    @property
    def topic_names(self) -> dict[str, str]:
        """Topic id (hex) -> name."""
        return self.image.topic_names

    @property
    def live_brokers(self) -> frozenset[int]:
        """Registered brokers that are not fenced: those clients are sent to."""
        return self.image.unfenced_brokers()

    @property
    def known_brokers(self) -> frozenset[int]:
        """Brokers registered (fenced or not) or named among the quorum's members: the
        cluster as this broker knows it, even while some of it is starting or away."""
        return frozenset(self.image.brokers) | frozenset(self.members)

    @property
    def epoch(self) -> int:
        """The offset of the last metadata record applied (-1: none yet)."""
        return self.image.offset

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.image.partition(topic, partition)

    def group_config(self, group_id: str) -> Mapping[str, str]:
        """Every group config's value for ``group_id`` (Kafka's GroupConfigManager): its
        own, set through IncrementalAlterConfigs, over the broker's group.consumer.* and
        group.share.* defaults; as of the last image published."""
        return group_config_values(self.image.group_configs.get(group_id, {}), self.broker_values)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """``user``'s credential for ``mechanism`` (SCRAM-SHA-256, SCRAM-SHA-512) as the
        metadata log holds it (what the SASL/SCRAM authenticator checks a client's proof
        against); None when it has none (Kafka's CredentialCache lookup)."""
        return self.image.scram.credential(mechanism, user)

    def coordinator_of(
        self, topic: str, partition: int, create: Callable[[], None]
    ) -> tuple[int, int]:
        """(error, broker id) of a coordinator: the live leader of its partition of an
        internal topic, which ``create`` makes on the first ask (COORDINATOR_NOT_AVAILABLE
        until it exists, and while the partition has no live leader)."""
        state = self.partition(topic, partition)
        if state is None:
            create()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        if state.leader_id < 0 or state.leader_id not in self.live_brokers:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        return ErrorCode.NONE, state.leader_id


def partition_changes(
    before: MetadataImage, after: MetadataImage, topics: set[str] | None = None
) -> list[PartitionChange]:
    """What going from ``before`` to ``after`` changes for partitions, among ``topics``
    (every topic when None). Removals come first, so a topic deleted and made again starts
    from empty logs."""
    old, new = before.topics, after.topics
    names = set(old) | set(new) if topics is None else topics
    changes: list[PartitionChange] = []
    for name in sorted(names):
        previous_topic, topic = old.get(name), new.get(name)
        same = (
            previous_topic is not None
            and topic is not None
            and previous_topic.topic_id == topic.topic_id
        )
        if previous_topic is not None and not same:
            changes.extend(
                PartitionChange(
                    name, p.partition_index, None, previous_topic.topic_id, previous_topic.configs
                )
                for p in previous_topic.partitions
            )
        if topic is None:
            continue
        previous = previous_topic.partitions if previous_topic is not None and same else []
        for part in topic.partitions:
            index = part.partition_index
            if index >= len(previous) or previous[index] != part:
                changes.append(PartitionChange(name, index, part, topic.topic_id, topic.configs))
    changes.sort(key=lambda c: c.state is not None)
    return changes


def deleted_topics(
    before: MetadataImage, after: MetadataImage, topics: set[str] | None = None
) -> set[str]:
    """The topics of ``before`` that ``after`` no longer has, or has again as a new
    incarnation (another topic id), among ``topics`` (every topic when None)."""
    old, new = before.topics, after.topics
    names = set(old) if topics is None else topics & set(old)
    return {
        name
        for name in names
        if (topic := new.get(name)) is None or topic.topic_id != old[name].topic_id
    }
