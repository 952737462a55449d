"""Client quotas without a broker: Kafka's sampled Rate and QuotaUtils' throttle time on
times given by hand, which quota applies to a (user, client id) and which clients share
its rate, the controller's checks (Kafka's ClientQuotaControlManager messages), and
DescribeClientQuotas' filters on an image."""

from __future__ import annotations

from typing import Any

from purgatory.broker.controller.client_quota_control import ClientQuotaControlManager
from purgatory.broker.metadata.client_quota_image import ClientQuotasImage, entity_of
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import ClientQuotaRecord, decode_record, encode_record
from purgatory.broker.quota.client_quota_manager import ClientQuotaManager
from purgatory.broker.quota.rate import Rate, throttle_time_ms
from purgatory.protocol import quota_messages as qm
from purgatory.protocol.errors import ErrorCode

# -- the rate and the throttle time ----------------------------------------------------------


def test_a_new_rate_is_measured_over_samples_minus_one_windows() -> None:
    rate = Rate(11, 1000)
    rate.record(5000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 500.0
    assert rate.window_size_ms(2500) == 10_500  # 2 full windows: 8 more added
    assert rate.measure(2500) == 5000 / 10.5


def test_the_window_grows_past_the_minimum_once_full_windows_elapsed() -> None:
    rate = Rate(3, 1000)
    for t in range(0, 3000, 100):
        rate.record(10, t)
    # Samples began at 0, 1000 and 2000; at 2900: 2 full windows, the minimum (3 - 1).
    assert rate.window_size_ms(2900) == 2900
    assert rate.total(2900) == 300


def test_samples_without_events_for_the_whole_window_expire() -> None:
    rate = Rate(11, 1000)
    rate.record(5000, 0)
    assert rate.total(10_999) == 5000
    assert rate.total(11_000) == 0
    assert rate.measure(11_000) == 0


def test_throttle_time_is_quota_utils_over_the_precise_window() -> None:
    # (rate - bound) / bound x window, rounded as Java's Math.round.
    assert throttle_time_ms(200.0, 100.0, 10_000) == 10_000
    assert throttle_time_ms(100.05, 100.0, 10_000) == 5
    assert throttle_time_ms(100.0025, 100.0, 10_000) == 0  # 0.25 ms
    assert throttle_time_ms(100.0, 80.0, 2) == 1  # 0.5 rounds up


def manager(*quotas: tuple[tuple[tuple[str, str | None], ...], float]) -> ClientQuotaManager:
    m = ClientQuotaManager("Produce", "producer_byte_rate", 11, 1000)
    m.update(ClientQuotasImage({entity_of(e): {"producer_byte_rate": v} for e, v in quotas}))
    return m


def test_a_client_over_its_quota_is_throttled_until_the_rate_is_back_to_it() -> None:
    m = manager(((("user", "alice"),), 100.0))
    assert m.record_and_get_throttle_time_ms("alice", "c1", 1000, 0) == 0  # 100/s: at it
    # 2000 bytes over the 10 s window: 200/s, twice the quota: 10 s to be back at 100/s.
    assert m.record_and_get_throttle_time_ms("alice", "c1", 1000, 0) == 10_000
    # Another client of alice shares the user's rate.
    assert m.record_and_get_throttle_time_ms("alice", "c2", 0, 0) == 10_000
    # Nobody else is limited, nor recorded against alice.
    assert m.record_and_get_throttle_time_ms("bob", "c1", 10**9, 0) == 0
    assert m.sensors[("alice", "")].rate.total(0) == 2000


def test_a_throttled_fetch_takes_back_what_it_recorded() -> None:
    m = manager(((("client-id", "c1"),), 100.0))
    assert m.record_and_get_throttle_time_ms("u", "c1", 3000, 0) == 20_000
    m.unrecord("u", "c1", 3000, 0)
    assert m.record_and_get_throttle_time_ms("u", "c1", 1000, 0) == 0
    assert m.max_value_in_quota_window("u", "c1") == 1000.0
    assert m.max_value_in_quota_window("u", "other") is None


def test_nothing_is_enabled_without_the_quota_types_key() -> None:
    m = ClientQuotaManager("Produce", "producer_byte_rate", 11, 1000)
    m.update(ClientQuotasImage({entity_of([("user", "a")]): {"consumer_byte_rate": 1.0}}))
    assert not m.enabled
    m.update(ClientQuotasImage({entity_of([("user", "a")]): {"producer_byte_rate": 1.0}}))
    assert m.enabled


# -- which quota applies --------------------------------------------------------------------

ALL = (
    ((("user", "alice"), ("client-id", "c1")), 1.0),
    ((("user", "alice"), ("client-id", None)), 2.0),
    ((("user", "alice"),), 3.0),
    ((("user", None), ("client-id", "c1")), 4.0),
    ((("user", None), ("client-id", None)), 5.0),
    ((("user", None),), 6.0),
    ((("client-id", "c1"),), 7.0),
    ((("client-id", None),), 8.0),
)


def test_quotas_apply_in_kafkas_order_of_precedence() -> None:
    expected = [
        (("alice", "c1"), 1.0),
        (("alice", "c1"), 2.0),
        (("alice", ""), 3.0),
        (("alice", "c1"), 4.0),
        (("alice", "c1"), 5.0),
        (("alice", ""), 6.0),
        (("", "c1"), 7.0),
        (("", "c1"), 8.0),
    ]
    for i, (tags, bound) in enumerate(expected):
        m = manager(*ALL[i:])
        assert m.metric_tags("alice", "c1") == tags, ALL[i]
        assert m.quota_limit(*tags) == bound, ALL[i]
    m = manager()
    assert m.metric_tags("alice", "c1") == ("", "c1")
    assert m.quota_limit("", "c1") is None


def test_a_user_default_applies_to_each_user_apart() -> None:
    m = manager(((("user", None),), 100.0), ((("user", "bob"),), 1000.0))
    assert m.metric_tags("alice", "x") == ("alice", "")
    assert m.quota_limit("alice", "") == 100.0
    assert m.quota_limit("bob", "") == 1000.0
    assert m.client_sensors("alice", "x") is not m.client_sensors("carol", "x")


def test_changing_a_quota_keeps_the_rate_measured() -> None:
    m = manager(((("user", "alice"),), 100.0))
    m.record_and_get_throttle_time_ms("alice", "c", 1000, 0)
    m.update(ClientQuotasImage({entity_of([("user", "alice")]): {"producer_byte_rate": 50.0}}))
    assert m.record_and_get_throttle_time_ms("alice", "c", 0, 0) == 10_000


# -- the controller's checks ----------------------------------------------------------------


def alter(
    image: MetadataImage,
    *entries: tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]],
    validate_only: bool = False,
) -> tuple[list[tuple[int, str | None]], list[ClientQuotaRecord]]:
    request = qm.AlterClientQuotasRequest(
        [
            qm.AlterEntryData(
                [qm.EntityData(t, n) for t, n in components],
                [qm.OpData(k, v or 0.0, v is None) for k, v in ops],
            )
            for components, ops in entries
        ],
        validate_only,
    )
    response, records = ClientQuotaControlManager().alter_client_quotas(image, request)
    return [(e.error_code, e.error_message) for e in response.entries], records


def replayed(image: MetadataImage, records: list[ClientQuotaRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records, image.offset + 1):
        delta.replay(decode_record(encode_record(record)), offset)
    return delta.apply()


def test_the_controller_refuses_as_kafka_with_its_messages() -> None:
    invalid = ErrorCode.INVALID_REQUEST
    results, records = alter(
        MetadataImage(),
        ([], [("producer_byte_rate", 1.0)]),
        ([("group", "g")], [("producer_byte_rate", 1.0)]),
        ([("user", "")], [("producer_byte_rate", 1.0)]),
        ([("ip", "not-an-ip")], [("connection_creation_rate", 1.0)]),
        ([("user", "a")], [("producer_byte_rate", 0.0)]),
        ([("user", "b")], [("producer_byte_rate", 1.5)]),
        ([("user", "c")], [("producer_byte_rate", 1e19)]),
        ([("user", "d")], [("connection_creation_rate", 1.0)]),
        ([("ip", "10.0.0.1")], [("producer_byte_rate", 1.0)]),
        ([("client-id", "e")], [("request_percentage", 12.5), ("request_percentage", 1.0)]),
    )
    assert results == [
        (invalid, "Invalid empty client quota entity"),
        (invalid, "Unhandled client quota entity type: group"),
        (invalid, "Empty user not supported"),
        (invalid, "not-an-ip is not a valid IP or resolvable host."),
        (invalid, "Quota producer_byte_rate must be greater than 0"),
        (invalid, "producer_byte_rate cannot be a fractional value."),
        (invalid, "Proposed value for producer_byte_rate is too large for a LONG."),
        (invalid, "Invalid configuration key connection_creation_rate"),
        (invalid, "Invalid configuration key producer_byte_rate"),
        (invalid, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=e})"),
    ]
    assert records == []


def test_an_entity_naming_a_type_twice_is_its_last_name_as_kafkas_map_reads_it() -> None:
    request = qm.AlterClientQuotasRequest(
        [
            qm.AlterEntryData(
                [qm.EntityData("user", "f"), qm.EntityData("user", "g")],
                [qm.OpData("producer_byte_rate", 1.0, False)],
            )
        ],
        False,
    )
    response, records = ClientQuotaControlManager().alter_client_quotas(MetadataImage(), request)
    assert response.entries == [
        qm.AlterEntryResult(ErrorCode.NONE, None, [qm.EntityData("user", "g")])
    ]
    assert replayed(MetadataImage(), records).client_quotas.entities == {
        (("user", "g"),): {"producer_byte_rate": 1.0}
    }


def test_changes_write_records_only_for_what_changes() -> None:
    alice = [("user", "alice")]
    results, records = alter(
        MetadataImage(),
        (alice, [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)]),
        ([("ip", None)], [("connection_creation_rate", 10.0)]),
    )
    assert results == [(0, None), (0, None)]
    image = replayed(MetadataImage(), records)
    assert image.client_quotas.entities == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("ip", None),): {"connection_creation_rate": 10.0},
    }
    # Unchanged values and removals of unset keys write nothing; validate_only nothing.
    assert (
        alter(image, (alice, [("producer_byte_rate", 1024.0), ("consumer_byte_rate", None)]))[1]
        == []
    )
    assert alter(image, (alice, [("producer_byte_rate", 1.0)]), validate_only=True)[1] == []
    _, records = alter(image, (alice, [("producer_byte_rate", None), ("request_percentage", None)]))
    image = replayed(image, records)
    assert list(image.client_quotas.entities) == [(("ip", None),)]


def test_a_snapshot_rebuilds_the_quotas() -> None:
    _, records = alter(MetadataImage(), ([("client-id", None)], [("consumer_byte_rate", 10.0)]))
    image = replayed(MetadataImage(), records)
    rebuilt = replayed(
        MetadataImage(), [r for r in image.records() if isinstance(r, ClientQuotaRecord)]
    )
    assert rebuilt.client_quotas.entities == image.client_quotas.entities
    assert not image.empty


# -- DescribeClientQuotas' filters ----------------------------------------------------------

IMAGE = ClientQuotasImage(
    {entity_of(e): {"producer_byte_rate": v} for e, v in ALL}
    | {entity_of([("ip", "1.2.3.4")]): {"connection_creation_rate": 1.0}}
)


def describe(*components: tuple[str, int, str | None], strict: bool = False) -> Any:
    return IMAGE.describe(
        qm.DescribeClientQuotasRequest([qm.ComponentData(*c) for c in components], strict)
    )


def values(response: qm.DescribeClientQuotasResponse) -> list[float]:
    assert response.entries is not None, response.error_message
    return sorted(v.value for e in response.entries for v in e.values)


def test_describe_filters_as_kafka() -> None:
    exact, default, specified = qm.MATCH_TYPE_EXACT, qm.MATCH_TYPE_DEFAULT, qm.MATCH_TYPE_SPECIFIED
    assert values(describe(("user", exact, "alice"))) == [1.0, 2.0, 3.0]
    assert values(describe(("user", exact, "alice"), strict=True)) == [3.0]
    assert values(describe(("user", default, None))) == [4.0, 5.0, 6.0]
    assert values(describe(("client-id", specified, None))) == [1.0, 2.0, 4.0, 5.0, 7.0, 8.0]
    assert values(describe(("client-id", specified, None), strict=True)) == [7.0, 8.0]
    assert values(describe(("user", default, None), ("client-id", exact, "c1"))) == [4.0]
    assert values(describe()) == [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]


def test_describe_refuses_bad_filters_with_kafkas_messages() -> None:
    cases = [
        ((("", 0, "x"),), ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        (
            (("user", 2, None), ("user", 0, "a")),
            ErrorCode.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ((("group", 0, "g"),), ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            (("user", 1, "a"),),
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        ((("user", 7, None),), ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
        (
            (("ip", 2, None), ("client-id", 2, None)),
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not "
            "be used with user or clientId filter component.",
        ),
    ]
    for components, code, message in cases:
        response = describe(*components)
        assert (response.error_code, response.error_message, response.entries) == (
            code,
            message,
            None,
        )


def sent_flat_out(samples: int, quota: float, request_bytes: int, ms: int) -> list[int]:
    """When a producer sending ``request_bytes`` whenever it is not throttled (2 ms
    apart) sends, over ``ms``: the bytes sent in each second."""
    m = ClientQuotaManager("Produce", "producer_byte_rate", samples, 1000)
    m.update(ClientQuotasImage({entity_of([("client-id", "p")]): {"producer_byte_rate": quota}}))
    per_second = [0] * (ms // 1000)
    t = 0
    while t < ms:
        per_second[t // 1000] += request_bytes
        t += max(m.record_and_get_throttle_time_ms("u", "p", request_bytes, t), 2)
    return per_second


def test_a_producer_over_its_quota_averages_it_in_the_long_run() -> None:
    # Kafka's windows let a client burst as old samples expire, so its rate over a few
    # seconds swings around the quota; over minutes it is the quota.
    for samples in (2, 3, 11):
        per_second = sent_flat_out(samples, 100_000, 16_000, 200_000)
        long_run = sum(per_second[20:]) / 180
        assert abs(long_run - 100_000) <= 0.03 * 100_000, (samples, long_run)
    swings = sent_flat_out(3, 100_000, 16_000, 30_000)
    five_seconds = [sum(swings[i : i + 5]) / 5 for i in range(3, 25)]
    assert max(five_seconds) > 1.05 * 100_000 or min(five_seconds) < 0.95 * 100_000


def test_a_request_quota_throttles_at_most_one_window() -> None:
    m = ClientQuotaManager("Request", "request_percentage", 11, 1000, max_throttle_ms=1000)
    m.update(ClientQuotasImage({entity_of([("user", "u")]): {"request_percentage": 1.0}}))
    # 5 s of handling over a 10 s window: 50% of a thread, 50 times the quota.
    assert m.record_and_get_throttle_time_ms("u", "c", 500.0, 0) == 1000
