"""Kafka's topic-name collisions at the controller: a new topic whose name differs from an
existing one only in '.' against '_' is refused (their per-topic metrics would share one
name), with Kafka's error and message."""

from __future__ import annotations

import random

import pytest

from purgatory.broker.config.broker_config import load_config
from purgatory.broker.controller.replication_control import ReplicationControlManager
from purgatory.broker.controller.topics import collision_index, collision_problem
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode


def image_with(*topics: str) -> MetadataImage:
    """Three unfenced brokers and ``topics``, one partition each."""
    records: list[MetadataRecord] = []
    for broker in range(3):
        records.append(RegisterBrokerRecord(broker, f"run-{broker}", broker, "h", 9092 + broker))
        records.append(BrokerRegistrationChangeRecord(broker, broker, fenced=False))
    for i, name in enumerate(topics):
        records.append(TopicRecord(name, f"id-{i}"))
        records.append(PartitionRecord(f"id-{i}", 0, [0], [0], 0))
    delta = MetadataDelta(MetadataImage())
    for offset, record in enumerate(records):
        delta.replay(record, offset)
    return delta.apply()


def create(
    image: MetadataImage, *names: str, validate_only: bool = False
) -> m.CreateTopicsResponse:
    controller = ReplicationControlManager(load_config(environ={}), random.Random(0))
    request = m.CreateTopicsRequest(
        [m.CreatableTopic(name, 1, 1) for name in names], validate_only=validate_only
    )
    response, _ = controller.create_topics(image, request)
    return response


@pytest.mark.parametrize(("existing", "new"), [("a_b", "a.b"), ("a.b", "a_b"), ("x.y_z", "x_y.z")])
def test_a_name_differing_only_in_dot_against_underscore_is_refused_as_kafka_does(
    existing: str, new: str
) -> None:
    for validate_only in (False, True):
        [result] = create(image_with(existing), new, validate_only=validate_only).topics
        assert (result.error_code, result.error_message) == (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{new}' collides with existing topic: {existing}",
        )


def test_the_refused_topic_writes_no_record_and_the_others_are_created() -> None:
    controller = ReplicationControlManager(load_config(environ={}), random.Random(0))
    request = m.CreateTopicsRequest([m.CreatableTopic("a.b", 1, 1), m.CreatableTopic("c.d", 1, 1)])
    response, records = controller.create_topics(image_with("a_b"), request)
    assert [r.error_code for r in response.topics] == [
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.NONE,
    ]
    assert [r.name for r in records if isinstance(r, TopicRecord)] == ["c.d"]


def test_the_same_name_again_is_topic_already_exists_not_a_collision() -> None:
    [result] = create(image_with("a.b"), "a.b").topics
    assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert result.error_message == "Topic 'a.b' already exists."  # Kafka's words


def test_names_that_differ_otherwise_do_not_collide() -> None:
    image = image_with("a_b", "ab", "a-b")
    results = create(image, "a__b", "a.c", "ab.", "A.b", "a.b.c").topics
    assert [r.error_code for r in results] == [ErrorCode.NONE] * 5


def test_as_in_kafka_two_colliding_names_of_one_request_are_both_created() -> None:
    # Kafka checks against the topics that exist when the request is handled: its
    # records are replayed (and the collision index updated) after the whole request.
    results = create(image_with(), "a.b", "a_b").topics
    assert [r.error_code for r in results] == [ErrorCode.NONE, ErrorCode.NONE]


def test_of_several_existing_names_sharing_one_the_message_names_the_least() -> None:
    # Colliding names can exist only from before this check (Kafka keeps them too).
    index = collision_index(["a_b_c", "a.b.c", "ab"])
    assert index == {"a_b_c": "a.b.c"}
    assert collision_problem("a.b_c", index) == (
        "Topic 'a.b_c' collides with existing topic: a.b.c"
    )
