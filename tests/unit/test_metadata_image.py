"""The metadata image: what each record does when replayed, images that never change,
and what a new image means for a broker's partitions."""

from __future__ import annotations

from purgatory.broker.controller.metadata_cache import partition_changes
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import (
    TOPIC_RESOURCE,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_record,
    encode_record,
)


def replay(image: MetadataImage, *records: MetadataRecord) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, start=image.offset + 1):
        delta.replay(record, offset)
    return delta.apply()


def topic(name: str, topic_id: str, partitions: int = 2) -> list[MetadataRecord]:
    return [
        TopicRecord(name, topic_id),
        ConfigRecord(TOPIC_RESOURCE, name, "retention.ms", "1000"),
        *(PartitionRecord(topic_id, p, [0, 1], [0, 1], 0) for p in range(partitions)),
    ]


def test_records_build_a_new_image_and_leave_the_old_one_as_it_was() -> None:
    empty = MetadataImage()
    image = replay(empty, RegisterBrokerRecord(0, "run-a", 0, "h", 1), *topic("t", "id-t"))
    assert empty.topics == {} and empty.brokers == {}
    t = image.topics["t"]
    assert (t.topic_id, t.configs, len(t.partitions)) == ("id-t", {"retention.ms": "1000"}, 2)
    assert image.topic_names == {"id-t": "t"}
    assert image.brokers[0].fenced  # a broker starts fenced
    assert image.offset == 4


def test_a_partition_change_replaces_one_partition_and_shares_untouched_topics() -> None:
    image = replay(MetadataImage(), *topic("t", "id-t"), *topic("u", "id-u"))
    changed = replay(image, PartitionChangeRecord("id-t", 1, 1, 1, 1, [1]))
    assert changed.topics["u"] is image.topics["u"]
    p = changed.topics["t"].partitions[1]
    assert (p.leader_id, p.leader_epoch, p.partition_epoch, p.isr, p.replicas) == (
        1,
        1,
        1,
        [1],
        [0, 1],
    )
    assert image.topics["t"].partitions[1].leader_id == 0


def test_a_change_about_a_replaced_registration_is_ignored() -> None:
    image = replay(MetadataImage(), RegisterBrokerRecord(0, "run-a", 0, "h", 1))
    image = replay(image, RegisterBrokerRecord(0, "run-b", 1, "h", 1))
    stale = replay(image, BrokerRegistrationChangeRecord(0, 0, fenced=False))
    assert stale.brokers[0].fenced and stale.brokers[0].incarnation_id == "run-b"
    current = replay(image, BrokerRegistrationChangeRecord(0, 1, fenced=False))
    assert not current.brokers[0].fenced


def test_a_topic_deleted_and_made_again_is_removed_before_it_is_added() -> None:
    before = replay(MetadataImage(), *topic("t", "old"))
    after = replay(before, RemoveTopicRecord("old"), *topic("t", "new"))
    changes = partition_changes(before, after, {"t"})
    assert [(c.partition, c.state is None, c.topic_id) for c in changes] == [
        (0, True, "old"),
        (1, True, "old"),
        (0, False, "new"),
        (1, False, "new"),
    ]


def test_an_image_rebuilds_from_its_own_records_as_a_snapshot_does() -> None:
    image = replay(
        MetadataImage(),
        RegisterBrokerRecord(0, "run-a", 0, "h", 1),
        BrokerRegistrationChangeRecord(0, 0, fenced=False, in_controlled_shutdown=True),
        *topic("t", "id-t"),
        PartitionChangeRecord("id-t", 0, 1, 3, 7, [1]),
    )
    rebuilt = replay(MetadataImage(), *(decode_record(encode_record(r)) for r in image.records()))  # type: ignore[misc]
    assert rebuilt.brokers == image.brokers
    assert rebuilt.topics == image.topics
