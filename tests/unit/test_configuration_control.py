"""Config changes on the controller (ConfigurationControlManager): a request becomes
ConfigRecords, one per value that changes, checked with Kafka's rules; the records replay
into the metadata image (and its snapshot); a broker takes its dynamic configs from the
image, its own over the cluster-wide default over its static ones."""

from __future__ import annotations

from purgatory.broker.controller.configuration_control import ConfigurationControlManager
from purgatory.broker.metadata.metadata_image import MetadataImage
from purgatory.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode
from tests.support import broker_config
from tests.unit.test_metadata_image import replay


def request(
    resource_type: int, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False
) -> m.IncrementalAlterConfigsRequest:
    configs = [m.AlterableConfig(k, op, v) for k, op, v in ops]
    return m.IncrementalAlterConfigsRequest(
        [m.AlterConfigsResource(resource_type, name, configs)], validate_only
    )


def image_with_topic() -> MetadataImage:
    return replay(
        MetadataImage(),
        TopicRecord("t", "id-t"),
        ConfigRecord(TOPIC_RESOURCE, "t", "cleanup.policy", "delete"),
        ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", "1000"),
    )


def test_incremental_ops_become_one_record_per_changed_value() -> None:
    control = ConfigurationControlManager(broker_config())
    asked = request(
        TOPIC_RESOURCE,
        "t",
        ("retention.ms", m.CONFIG_DELETE, None),
        ("cleanup.policy", m.CONFIG_APPEND, "compact"),
        ("max.message.bytes", m.CONFIG_SET, "2048"),
        ("segment.ms", m.CONFIG_DELETE, None),  # not set: nothing to remove
    )
    response, records = control.alter(image_with_topic(), asked, incremental=True)
    assert [r.error_code for r in response.responses] == [ErrorCode.NONE]
    assert sorted(records, key=lambda r: r.name) == [
        ConfigRecord(TOPIC_RESOURCE, "t", "cleanup.policy", "delete,compact"),
        ConfigRecord(TOPIC_RESOURCE, "t", "max.message.bytes", "2048"),
        ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", None),
    ]
    after = replay(image_with_topic(), *records)
    assert after.topics["t"].configs == {
        "cleanup.policy": "delete,compact",
        "max.message.bytes": "2048",
    }


def test_alter_configs_replaces_the_whole_set_and_validate_only_writes_nothing() -> None:
    control = ConfigurationControlManager(broker_config())
    asked = request(TOPIC_RESOURCE, "t", ("segment.ms", m.CONFIG_SET, "5000"))
    _, records = control.alter(image_with_topic(), asked, incremental=False)
    assert sorted(records, key=lambda r: r.name) == [
        ConfigRecord(TOPIC_RESOURCE, "t", "cleanup.policy", None),
        ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", None),
        ConfigRecord(TOPIC_RESOURCE, "t", "segment.ms", "5000"),
    ]
    asked.validate_only = True
    response, records = control.alter(image_with_topic(), asked, incremental=False)
    assert records == [] and response.responses[0].error_code == ErrorCode.NONE


def test_each_refusal_is_kafkas_error_and_message_for_the_whole_resource() -> None:
    control = ConfigurationControlManager(broker_config())
    image = image_with_topic()
    cases = [
        (
            request(
                TOPIC_RESOURCE, "t", ("retention.ms", m.CONFIG_SET, "x"), ("segment.ms", 0, "1")
            ),
            ErrorCode.INVALID_CONFIG,
            "Invalid value x for configuration retention.ms: Not a number of type LONG",
        ),
        (
            request(TOPIC_RESOURCE, "t", ("retention.ms", m.CONFIG_SUBTRACT, "1")),
            ErrorCode.INVALID_CONFIG,
            "Can't SUBTRACT to key retention.ms because its type is not LIST.",
        ),
        (
            request(TOPIC_RESOURCE, "t", ("retention.mss", m.CONFIG_SET, "1")),
            ErrorCode.INVALID_CONFIG,
            "Unknown topic config name: retention.mss",
        ),
        (
            request(TOPIC_RESOURCE, "gone", ("retention.ms", m.CONFIG_SET, "1")),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'gone' does not exist.",
        ),
        (
            request(
                TOPIC_RESOURCE,
                "t",
                ("min.compaction.lag.ms", m.CONFIG_SET, "10"),
                ("max.compaction.lag.ms", m.CONFIG_SET, "5"),
            ),
            ErrorCode.INVALID_CONFIG,
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
        (
            request(BROKER_RESOURCE, "0", ("broker.id", m.CONFIG_SET, "3")),
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(broker.id)",
        ),
        (
            request(TOPIC_RESOURCE, "t", ("retention.ms", 0, "1"), ("retention.ms", 1, None)),
            ErrorCode.INVALID_REQUEST,
            "Error due to duplicate config keys",
        ),
    ]
    for asked, code, message in cases:
        response, records = control.alter(image, asked, incremental=True)
        [result] = response.responses
        assert (result.error_code, result.error_message, records) == (code, message, []), message


def test_broker_configs_replay_into_the_image_and_its_snapshot() -> None:
    control = ConfigurationControlManager(broker_config())
    asked = m.IncrementalAlterConfigsRequest(
        [
            m.AlterConfigsResource(
                BROKER_RESOURCE, "", [m.AlterableConfig("log.retention.ms", 0, "60000")]
            ),
            m.AlterConfigsResource(
                BROKER_RESOURCE, "1", [m.AlterableConfig("log.retention.ms", 0, "90000")]
            ),
        ]
    )
    _, records = control.alter(MetadataImage(), asked, incremental=True)
    image = replay(MetadataImage(), *records)
    assert image.broker_configs == {
        "": {"log.retention.ms": "60000"},
        "1": {"log.retention.ms": "90000"},
    }
    rebuilt = replay(MetadataImage(), *(decode_record(encode_record(r)) for r in image.records()))  # type: ignore[misc]
    assert rebuilt.broker_configs == image.broker_configs
    removed = replay(image, ConfigRecord(BROKER_RESOURCE, "1", "log.retention.ms", None))
    assert removed.broker_configs == {"": {"log.retention.ms": "60000"}}


def test_a_broker_takes_its_own_value_over_the_default_over_its_static_one() -> None:
    config = broker_config(1, **{"log.retention.ms": 5000})
    assert config.apply_dynamic({"log.retention.ms": "60000"}, {}, at="t1") == [
        ("log.retention.ms", 5000, 60000)
    ]
    assert config.sources["log.retention.ms"] == "dynamic_default"
    config.apply_dynamic({"log.retention.ms": "60000"}, {"log.retention.ms": "90000"}, at="t2")
    assert (config["log.retention.ms"], config.sources["log.retention.ms"]) == (90000, "dynamic")
    config.apply_dynamic({}, {}, at="t3")
    assert config["log.retention.ms"] == 5000
    assert config.sources["log.retention.ms"] not in ("dynamic", "dynamic_default")
    assert config.topic_defaults()["retention.ms"] == 5000


def test_a_dynamic_value_that_fights_the_static_configs_is_not_taken_and_said_why() -> None:
    config = broker_config(0, **{"replica.lag.time.max.ms": 10_000})
    refused: list[tuple[str, str]] = []
    changed = config.apply_dynamic(
        {}, {"replica.fetch.wait.max.ms": "60000"}, at="t", refused=refused
    )
    assert changed == [] and config["replica.fetch.wait.max.ms"] != 60000
    [(name, why)] = refused
    assert name == "replica.fetch.wait.max.ms" and "replica.lag.time.max.ms" in why
