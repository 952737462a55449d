from __future__ import annotations

import pytest

from purgatory.common.sample_ring import SampleRing


def test_samples_come_back_oldest_first_until_the_ring_is_full() -> None:
    ring = SampleRing(4, 3)
    assert len(ring) == 0 and list(ring) == []
    ring.append(1.0, 0.5, 0.25)
    ring.append(2.0, 1.5, 0.0)
    assert len(ring) == 2
    assert list(ring) == [(1.0, 0.5, 0.25), (2.0, 1.5, 0.0)]


def test_a_full_ring_drops_its_oldest_sample_for_each_new_one() -> None:
    ring = SampleRing(3, 1)
    for value in range(10):
        ring.append(float(value))
        assert list(ring) == [(float(v),) for v in range(max(0, value - 2), value + 1)]
    assert len(ring) == 3


def test_its_memory_is_taken_once_however_many_samples_pass_through() -> None:
    ring = SampleRing(1000, 3)
    buffer = ring._buffer
    size = len(buffer)
    for i in range(5000):
        ring.append(i, i / 2, i / 4)
    assert ring._buffer is buffer and len(buffer) == size == 1000 * 3 * 8
    assert next(iter(ring)) == (4000.0, 2000.0, 1000.0)


def test_a_sample_of_the_wrong_width_or_a_ring_of_no_size_is_refused() -> None:
    ring = SampleRing(2, 3)
    with pytest.raises(ValueError, match="a sample has 3 fields, got 2"):
        ring.append(1.0, 2.0)
    with pytest.raises(ValueError, match="a sample has 3 fields, got 4"):
        ring.append(1.0, 2.0, 3.0, 4.0)
    assert len(ring) == 0
    with pytest.raises(ValueError, match="capacity >= 1"):
        SampleRing(0, 3)
