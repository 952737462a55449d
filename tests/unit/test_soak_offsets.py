"""The soak's ledger of offsets (a bitmap per partition) is an exact set."""

from __future__ import annotations

import random

from purgatory.testing.soak_bench import Offsets


def test_offsets_behave_as_a_set_of_partition_offset_pairs() -> None:
    rng = random.Random(3)
    pairs = [(rng.randrange(4), rng.randrange(5000)) for _ in range(3000)]
    offsets, expected = Offsets(), set()
    for partition, offset in pairs:
        assert offsets.add(partition, offset) == ((partition, offset) not in expected)
        expected.add((partition, offset))
    assert offsets.count == len(expected)


def test_missing_from_counts_what_the_other_side_lacks() -> None:
    acknowledged, consumed = Offsets(), Offsets()
    for offset in range(1000):
        acknowledged.add(0, offset)
        acknowledged.add(1, offset)
        if offset not in (7, 999):
            consumed.add(0, offset)
    consumed.add(2, 5)  # consumed more than acknowledged: not missing
    assert acknowledged.missing_from(consumed) == 2 + 1000  # two of 0, all of partition 1
    for offset in range(1000):
        consumed.add(1, offset)
    consumed.add(0, 7)
    consumed.add(0, 999)
    assert acknowledged.missing_from(consumed) == 0
    assert consumed.missing_from(acknowledged) == 1
