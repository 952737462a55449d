"""DelayedOperationPurgatory and DelayedOperation, on a manual clock."""

from __future__ import annotations

import pytest

from purgatory.broker.purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    ManualScheduler,
    SystemTimer,
)


class Op(DelayedOperation):
    """Completes when ``ready`` is set; records what happened, in order."""

    __slots__ = ("events", "ready")

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False
        self.events: list[str] = []

    def try_complete(self) -> bool:
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.events.append("expired")


def make(
    removal: str = "eager", purge_interval: int = 1000
) -> tuple[ManualScheduler, DelayedOperationPurgatory[Op]]:
    clock = ManualScheduler()
    return clock, DelayedOperationPurgatory(
        "Test", SystemTimer(clock), purge_interval=purge_interval, watcher_removal=removal
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("removal", ["eager", "purge"])
def test_an_operation_that_can_complete_at_once_is_never_watched(removal: str) -> None:
    _, purgatory = make(removal)
    op = Op(100)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert op.events == ["complete"]
    assert (purgatory.watched, purgatory.delayed, purgatory.watched_keys) == (0, 0, 0)


@pytest.mark.parametrize("removal", ["eager", "purge"])
def test_a_watched_operation_completes_on_a_key_event_and_leaves_the_timer(removal: str) -> None:
    clock, purgatory = make(removal)
    op = Op(100)
    assert purgatory.try_complete_else_watch(op, ["a", "b", "c"]) is False
    assert (purgatory.watched, purgatory.delayed) == (3, 1)
    assert purgatory.check_and_complete("a") == 0  # not ready yet
    op.ready = True
    assert purgatory.check_and_complete("b") == 1
    assert op.events == ["complete"] and purgatory.delayed == 0
    clock.advance(1000)
    assert op.events == ["complete"]  # its timer was cancelled


def test_eager_removal_drops_a_completed_operation_from_every_key_at_once() -> None:
    _, purgatory = make("eager")
    op = Op(100)
    purgatory.try_complete_else_watch(op, ["a", "b", "c"])
    op.ready = True
    purgatory.check_and_complete("a")
    assert (purgatory.watched, purgatory.watched_keys) == (0, 0)


def test_kafkas_purge_leaves_completed_operations_on_other_keys_until_purged() -> None:
    _, purgatory = make("purge")
    op = Op(100)
    purgatory.try_complete_else_watch(op, ["a", "b", "c"])
    op.ready = True
    purgatory.check_and_complete("a")
    assert (purgatory.watched, purgatory.watched_keys) == (2, 2)  # still on b and c
    assert purgatory.check_and_complete("b") == 0  # scanning drops it from b
    assert purgatory.watched == 1
    assert purgatory.purge_completed() == 1
    assert (purgatory.watched, purgatory.watched_keys) == (0, 0)


@pytest.mark.parametrize("removal", ["eager", "purge"])
def test_on_timeout_on_complete_runs_then_on_expiration(removal: str) -> None:
    clock, purgatory = make(removal)
    op = Op(50)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(49)
    assert op.events == []
    clock.advance(1)
    assert op.events == ["complete", "expired"]
    assert purgatory.expirations == 1
    if removal == "eager":
        assert purgatory.watched == 0


def test_completion_is_idempotent_when_satisfied_and_expired_together() -> None:
    clock, purgatory = make()
    op = Op(10)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(9)
    op.ready = True
    assert op.force_complete() is True
    assert op.force_complete() is False
    op.run()  # a timer that fired in the same iteration
    clock.advance(10)
    assert op.events == ["complete"]
    assert purgatory.expirations == 0 and purgatory.completions == 1


def test_the_purge_is_triggered_by_the_estimate_exceeding_the_interval() -> None:
    _, purgatory = make("purge", purge_interval=10)
    ops = []
    for i in range(11):
        op = Op(10_000)
        purgatory.try_complete_else_watch(op, [f"k{i}", "shared"])
        ops.append(op)
    for op in ops:
        op.force_complete()
    # estimated 11, delayed 0: 11 - 0 > 10 only checked on the next watch
    assert purgatory.purges == 0 and purgatory.watched == 22
    purgatory.try_complete_else_watch(Op(10_000), ["new"])
    assert purgatory.purges == 1
    assert purgatory.estimated_total == 1  # reset to the pending count
    assert purgatory.watched == 1


def test_the_purge_is_not_triggered_while_operations_are_pending() -> None:
    _, purgatory = make("purge", purge_interval=10)
    for i in range(50):
        purgatory.try_complete_else_watch(Op(10_000), [f"k{i}"])
    assert purgatory.purges == 0  # estimated 50, delayed 50


@pytest.mark.parametrize("removal", ["eager", "purge"])
def test_memory_returns_to_baseline_after_many_completions(removal: str) -> None:
    clock, purgatory = make(removal, purge_interval=100)
    for round_ in range(200):
        ops = [Op(1000) for _ in range(50)]
        for i, op in enumerate(ops):
            purgatory.try_complete_else_watch(op, [i % 7, (i * 3) % 11, "hot"])
        for op in ops[:25]:
            op.ready = True
        purgatory.check_and_complete("hot")
        clock.advance(1000 if round_ % 2 else 0)
    clock.advance(2000)
    if removal == "purge":
        purgatory.purge_completed()
    assert (purgatory.watched, purgatory.watched_keys, purgatory.delayed) == (0, 0, 0)
    assert purgatory.timer.buckets_queued <= 1


def test_an_unknown_removal_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="eager"):
        DelayedOperationPurgatory("x", SystemTimer(ManualScheduler()), watcher_removal="lazy")  # type: ignore[arg-type]


def test_a_key_named_twice_is_watched_once() -> None:
    _, purgatory = make()
    purgatory.try_complete_else_watch(Op(100), ["a", "a", "b"])
    assert purgatory.watched == 2
