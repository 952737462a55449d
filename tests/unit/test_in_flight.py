"""The ordering rules of one connection (protocol/in_flight.py), on both of its ends."""

from __future__ import annotations

import pytest

from purgatory.protocol.in_flight import MAX_CORRELATION_ID, CorrelationMismatch, InFlightRequests


def test_a_client_matches_each_response_to_its_oldest_request() -> None:
    in_flight: InFlightRequests[str] = InFlightRequests()
    first, second = in_flight.next_correlation_id(), in_flight.next_correlation_id()
    assert (first, second) == (1, 2)
    in_flight.add(first, "metadata")
    in_flight.add(second, "fetch")
    assert in_flight.complete(first) == "metadata"
    assert len(in_flight) == 1
    assert in_flight.complete(second) == "fetch"
    assert len(in_flight) == 0


def test_a_response_out_of_order_or_unasked_is_a_mismatch() -> None:
    in_flight: InFlightRequests[str] = InFlightRequests()
    in_flight.add(1, "a")
    in_flight.add(2, "b")
    with pytest.raises(CorrelationMismatch, match=r"correlation id 2, but the oldest .* has 1"):
        in_flight.complete(2)
    assert in_flight.complete(1) == "a"  # the mismatch took nothing away
    in_flight.complete(2)
    with pytest.raises(CorrelationMismatch, match="no request in flight"):
        in_flight.complete(3)


def test_correlation_ids_wrap_after_the_largest_int32() -> None:
    in_flight: InFlightRequests[None] = InFlightRequests()
    in_flight._last_id = MAX_CORRELATION_ID - 1
    ids = [in_flight.next_correlation_id() for _ in range(3)]
    assert ids == [MAX_CORRELATION_ID, 0, 1]


def test_a_server_writes_an_answer_only_after_every_earlier_one() -> None:
    in_flight: InFlightRequests[str] = InFlightRequests()
    waiting = in_flight.add(7, "acks=-1 produce")
    behind = in_flight.add(8, "metadata")
    behind.answer = bytearray(b"metadata answer")
    out = bytearray()
    in_flight.write_ready_answers(out)
    assert out == b""  # the produce still waits in its purgatory
    waiting.answer = bytearray(b"produce answer;")
    in_flight.write_ready_answers(out)
    assert out == b"produce answer;metadata answer"
    assert len(in_flight) == 0


def test_a_server_stops_at_the_first_request_still_waiting() -> None:
    in_flight: InFlightRequests[None] = InFlightRequests()
    done = in_flight.add(1, None)
    done.answer = bytearray(b"1")
    in_flight.add(2, None)  # waits
    later = in_flight.add(3, None)
    later.answer = bytearray(b"3")
    out = bytearray()
    in_flight.write_ready_answers(out)
    assert out == b"1"
    assert len(in_flight) == 2


def test_clear_hands_back_what_was_in_flight_oldest_first() -> None:
    in_flight: InFlightRequests[str] = InFlightRequests()
    for i, name in enumerate(["a", "b", "c"]):
        in_flight.add(i, name)
    assert in_flight.abandon() == ["a", "b", "c"]
    assert len(in_flight) == 0
