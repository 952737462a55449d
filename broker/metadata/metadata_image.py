"""MetadataImage and MetadataDelta (Kafka's names): the cluster's metadata as of one offset
of the metadata log, and the changes a run of records makes to it.

An image is never changed: a delta replays records on top of one and ``apply`` makes the
next image, sharing every topic it did not touch. The same replay serves the active
controller (on its working copy, at append time), the other members (committed records
only) and a snapshot load, so what a record means is written once.

Topics and partitions are kept as the ``TopicState``/``PartitionState`` structs the
brokers' caches and the API layer read.
"""

from __future__ import annotations

import msgspec

from purgatory.broker.metadata.acl_image import AclsDelta, AclsImage
from purgatory.broker.metadata.client_quota_image import ClientQuotasDelta, ClientQuotasImage
from purgatory.broker.metadata.records import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from purgatory.broker.metadata.scram_image import ScramDelta, ScramImage
from purgatory.protocol.inter_broker_messages import PartitionState, TopicState


class BrokerRegistration(msgspec.Struct, frozen=True, gc=False):
    """A registered broker as the metadata knows it (Kafka's BrokerRegistration)."""

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    host: str
    port: int
    fenced: bool
    in_controlled_shutdown: bool = False
    listeners: tuple[tuple[str, str, int], ...] = ()  # (name, host, port), advertised

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Its advertised address on ``listener``; None when it has no such listener (a
        registration that named none, from before named listeners, has the one
        address)."""
        if not self.listeners:
            return self.host, self.port
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return None

    @property
    def eligible(self) -> bool:
        """May lead partitions and be in an ISR."""
        return not self.fenced and not self.in_controlled_shutdown


class MetadataImage:
    """Invariants: ``topic_names`` maps the id of every topic in ``topics`` to its name;
    a topic's partitions are numbered 0..n-1 in order. ``broker_configs``: the dynamic
    broker configs by resource name (a broker id, or "" for the cluster-wide default),
    each a non-empty dict of name -> value as set (Kafka's ConfigurationsImage);
    ``group_configs``: the same of groups' configs, by group id (GroupConfig's).
    ``scram``: every SCRAM user's credentials (Kafka's ScramImage); ``acls``: every ACL
    (Kafka's AclsImage); ``client_quotas``: every client quota (Kafka's ClientQuotasImage)."""

    __slots__ = (
        "acls",
        "broker_configs",
        "brokers",
        "client_quotas",
        "group_configs",
        "offset",
        "scram",
        "topic_names",
        "topics",
    )

    def __init__(
        self,
        offset: int = -1,
        brokers: dict[int, BrokerRegistration] | None = None,
        topics: dict[str, TopicState] | None = None,
        topic_names: dict[str, str] | None = None,
        broker_configs: dict[str, dict[str, str]] | None = None,
        scram: ScramImage | None = None,
        acls: AclsImage | None = None,
        client_quotas: ClientQuotasImage | None = None,
        group_configs: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.offset = offset  # the last record replayed into it; -1: none
        self.brokers = brokers if brokers is not None else {}
        self.topics = topics if topics is not None else {}
        self.topic_names = topic_names if topic_names is not None else {}
        self.broker_configs = broker_configs if broker_configs is not None else {}
        self.scram = scram if scram is not None else ScramImage()
        self.acls = acls if acls is not None else AclsImage()
        self.client_quotas = client_quotas if client_quotas is not None else ClientQuotasImage()
        self.group_configs = group_configs if group_configs is not None else {}

    def partition(self, topic: str, index: int) -> PartitionState | None:
        state = self.topics.get(topic)
        if state is None or not 0 <= index < len(state.partitions):
            return None
        return state.partitions[index]

    def eligible_brokers(self) -> frozenset[int]:
        return frozenset(b for b, r in self.brokers.items() if r.eligible)

    def unfenced_brokers(self) -> frozenset[int]:
        return frozenset(b for b, r in self.brokers.items() if not r.fenced)

    @property
    def empty(self) -> bool:
        """Holds nothing a record made: a new metadata log (where the first active
        controller writes its bootstrap records)."""
        return not (
            self.brokers
            or self.topics
            or self.broker_configs
            or self.group_configs
            or self.scram.mechanisms
            or self.acls.acls
            or self.client_quotas.entities
        )

    def records(self) -> list[MetadataRecord]:
        """Records that rebuild this image from nothing (a snapshot's content)."""
        out: list[MetadataRecord] = [
            ConfigRecord(BROKER_RESOURCE, resource, k, v)
            for resource, configs in self.broker_configs.items()
            for k, v in configs.items()
        ]
        out.extend(
            ConfigRecord(GROUP_RESOURCE, group, k, v)
            for group, configs in self.group_configs.items()
            for k, v in configs.items()
        )
        for broker in self.brokers.values():
            out.append(
                RegisterBrokerRecord(
                    broker.broker_id,
                    broker.incarnation_id,
                    broker.broker_epoch,
                    broker.host,
                    broker.port,
                    broker.fenced,
                    broker.listeners,
                )
            )
            if broker.in_controlled_shutdown:
                out.append(
                    BrokerRegistrationChangeRecord(
                        broker.broker_id, broker.broker_epoch, in_controlled_shutdown=True
                    )
                )
        for topic in self.topics.values():
            out.append(TopicRecord(topic.name, topic.topic_id))
            out.extend(
                ConfigRecord(TOPIC_RESOURCE, topic.name, k, v) for k, v in topic.configs.items()
            )
            out.extend(
                PartitionRecord(
                    topic.topic_id,
                    p.partition_index,
                    list(p.replicas),
                    list(p.isr),
                    p.leader_id,
                    p.leader_epoch,
                    p.partition_epoch,
                )
                for p in topic.partitions
            )
        out.extend(self.scram.records())
        out.extend(self.acls.records())
        out.extend(self.client_quotas.records())
        return out


class MetadataDelta:
    """Records replayed on top of ``image``; ``apply`` makes the image they lead to.
    ``changed_topics`` names every topic created, changed or removed (a name that is
    removed and made again is in it once); ``broker_configs_changed``: a dynamic broker
    config was set or removed; ``group_configs``: every group's configs when one changed;
    ``scram``, ``acls``, ``client_quotas``: the SCRAM
    credentials', the ACLs' and the client quotas' changes, if any."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.offset = image.offset
        self.brokers: dict[int, BrokerRegistration] | None = None  # copied on first change
        self.topics: dict[str, TopicState] | None = None
        self.topic_names: dict[str, str] | None = None
        self.broker_configs: dict[str, dict[str, str]] | None = None
        self.broker_configs_changed = False
        self.group_configs: dict[str, dict[str, str]] | None = None  # copied on first change
        self.scram: ScramDelta | None = None
        self.acls: AclsDelta | None = None
        self.client_quotas: ClientQuotasDelta | None = None
        # Topics being changed: name -> (topic, its partitions as a list being filled).
        self._work: dict[str, tuple[TopicState, list[PartitionState]]] = {}
        self.changed_topics: set[str] = set()
        self.changed_brokers: set[int] = set()

    def replay(self, record: MetadataRecord, offset: int) -> None:
        self.offset = offset
        if isinstance(record, PartitionChangeRecord):
            self._partition_change(record)
        elif isinstance(record, PartitionRecord):
            self._partition(record)
        elif isinstance(record, RegisterBrokerRecord):
            self._brokers()[record.broker_id] = BrokerRegistration(
                record.broker_id,
                record.incarnation_id,
                record.broker_epoch,
                record.host,
                record.port,
                record.fenced,
                listeners=record.listeners,
            )
            self.changed_brokers.add(record.broker_id)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            self._broker_change(record)
        elif isinstance(record, TopicRecord):
            self._flush(record.name)
            self._topics()[record.name] = TopicState(record.name, record.topic_id, {}, [])
            self._topic_names()[record.topic_id] = record.name
            self.changed_topics.add(record.name)
        elif isinstance(record, RemoveTopicRecord):
            name = self._topic_names().pop(record.topic_id, None)
            if name is not None:
                self._work.pop(name, None)
                self._topics().pop(name, None)
                self.changed_topics.add(name)
        elif isinstance(record, ConfigRecord) and record.resource_type == TOPIC_RESOURCE:
            self._config(record)
        elif isinstance(record, ConfigRecord) and record.resource_type == BROKER_RESOURCE:
            self._broker_config(record)
        elif isinstance(record, ConfigRecord) and record.resource_type == GROUP_RESOURCE:
            self._group_config(record)
        elif isinstance(record, UserScramCredentialRecord | RemoveUserScramCredentialRecord):
            if self.scram is None:
                self.scram = ScramDelta(self.image.scram)
            self.scram.replay(record)
        elif isinstance(record, AccessControlEntryRecord | RemoveAccessControlEntryRecord):
            if self.acls is None:
                self.acls = AclsDelta(self.image.acls)
            self.acls.replay(record)
        elif isinstance(record, ClientQuotaRecord):
            if self.client_quotas is None:
                self.client_quotas = ClientQuotasDelta(self.image.client_quotas)
            self.client_quotas.replay(record)

    # -- what each record does --------------------------------------------------------------

    def _broker_change(self, record: BrokerRegistrationChangeRecord) -> None:
        brokers = self._brokers()
        current = brokers.get(record.broker_id)
        if current is None or current.broker_epoch != record.broker_epoch:
            return  # about a registration that has been replaced
        changes: dict[str, bool] = {}
        if record.fenced is not None:
            changes["fenced"] = record.fenced
        if record.in_controlled_shutdown is not None:
            changes["in_controlled_shutdown"] = record.in_controlled_shutdown
        brokers[record.broker_id] = msgspec.structs.replace(current, **changes)
        self.changed_brokers.add(record.broker_id)

    def _partition(self, record: PartitionRecord) -> None:
        work = self._working(record.topic_id)
        if work is None:
            return
        partitions = work[1]
        state = PartitionState(
            record.partition_id,
            record.leader,
            record.leader_epoch,
            list(record.replicas),
            list(record.isr),
            record.partition_epoch,
        )
        if record.partition_id == len(partitions):
            partitions.append(state)
        elif record.partition_id < len(partitions):
            partitions[record.partition_id] = state

    def _partition_change(self, record: PartitionChangeRecord) -> None:
        work = self._working(record.topic_id)
        if work is None or not 0 <= record.partition_id < len(work[1]):
            return
        partitions = work[1]
        before = partitions[record.partition_id]
        partitions[record.partition_id] = PartitionState(
            record.partition_id,
            record.leader,
            record.leader_epoch,
            list(record.replicas) if record.replicas is not None else before.replicas,
            list(record.isr),
            record.partition_epoch,
        )

    def _config(self, record: ConfigRecord) -> None:
        name = record.resource_name
        self._flush(name)
        topic = self._current_topic(name)
        if topic is None:
            return
        configs = dict(topic.configs)
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        self._topics()[name] = msgspec.structs.replace(topic, configs=configs)
        self.changed_topics.add(name)

    def _broker_config(self, record: ConfigRecord) -> None:
        if self.broker_configs is None:
            self.broker_configs = dict(self.image.broker_configs)
        configs = dict(self.broker_configs.get(record.resource_name, {}))
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if configs:
            self.broker_configs[record.resource_name] = configs
        else:
            self.broker_configs.pop(record.resource_name, None)
        self.broker_configs_changed = True

    def _group_config(self, record: ConfigRecord) -> None:
        if self.group_configs is None:
            self.group_configs = dict(self.image.group_configs)
        configs = dict(self.group_configs.get(record.resource_name, {}))
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if configs:
            self.group_configs[record.resource_name] = configs
        else:
            self.group_configs.pop(record.resource_name, None)

    # -- copy on write ----------------------------------------------------------------------

    def _brokers(self) -> dict[int, BrokerRegistration]:
        if self.brokers is None:
            self.brokers = dict(self.image.brokers)
        return self.brokers

    def _topics(self) -> dict[str, TopicState]:
        if self.topics is None:
            self.topics = dict(self.image.topics)
        return self.topics

    def _topic_names(self) -> dict[str, str]:
        if self.topic_names is None:
            self.topic_names = dict(self.image.topic_names)
        return self.topic_names

    def _current_topic(self, name: str) -> TopicState | None:
        topics = self.topics if self.topics is not None else self.image.topics
        return topics.get(name)

    def _working(self, topic_id: str) -> tuple[TopicState, list[PartitionState]] | None:
        names = self.topic_names if self.topic_names is not None else self.image.topic_names
        name = names.get(topic_id)
        if name is None:
            return None
        work = self._work.get(name)
        if work is None:
            topic = self._current_topic(name)
            if topic is None:
                return None
            work = self._work[name] = (topic, list(topic.partitions))
            self.changed_topics.add(name)
        return work

    def _flush(self, name: str) -> None:
        """Write a topic's partitions being changed back into its TopicState."""
        work = self._work.pop(name, None)
        if work is not None:
            topic, partitions = work
            self._topics()[name] = msgspec.structs.replace(topic, partitions=partitions)

    def apply(self) -> MetadataImage:
        for name in list(self._work):
            self._flush(name)
        image = self.image
        return MetadataImage(
            self.offset,
            self.brokers if self.brokers is not None else image.brokers,
            self.topics if self.topics is not None else image.topics,
            self.topic_names if self.topic_names is not None else image.topic_names,
            self.broker_configs if self.broker_configs is not None else image.broker_configs,
            self.scram.apply() if self.scram is not None else image.scram,
            self.acls.apply() if self.acls is not None else image.acls,
            self.client_quotas.apply() if self.client_quotas is not None else image.client_quotas,
            self.group_configs if self.group_configs is not None else image.group_configs,
        )
