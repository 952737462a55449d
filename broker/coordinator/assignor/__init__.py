"""The consumer group's server-side assignors (KIP-848): ``uniform`` and ``range``,
chosen by ``group.consumer.assignors`` and a member's ``server_assignor``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from purgatory.broker.coordinator.assignor.partition_assignor import PartitionAssignor
from purgatory.broker.coordinator.assignor.range_assignor import RangeAssignor
from purgatory.broker.coordinator.assignor.uniform_assignor import UniformAssignor

# Every assignor a broker can be configured with, by the name a member asks for.
ASSIGNORS: dict[str, Callable[[], PartitionAssignor]] = {
    UniformAssignor.name: UniformAssignor,
    RangeAssignor.name: RangeAssignor,
}

# ``group.consumer.assignors`` when unset; the first is a group's default.
DEFAULT_ASSIGNORS = (UniformAssignor.name, RangeAssignor.name)


def assignors(names: Iterable[str]) -> dict[str, PartitionAssignor]:
    """The assignors ``group.consumer.assignors`` names, in its order (the first is the
    default for members that name none). Raises ValueError on an empty list or an unknown
    name."""
    chosen: dict[str, PartitionAssignor] = {}
    for name in names:
        if name not in ASSIGNORS:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor {name!r}; "
                f"the known ones are {', '.join(sorted(ASSIGNORS))}"
            )
        chosen.setdefault(name, ASSIGNORS[name]())
    if not chosen:
        raise ValueError(
            "group.consumer.assignors is empty; name at least one of "
            f"{', '.join(sorted(ASSIGNORS))} (the first is the default)"
        )
    return chosen


__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNORS",
    "PartitionAssignor",
    "RangeAssignor",
    "UniformAssignor",
    "assignors",
]
