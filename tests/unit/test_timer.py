"""The hierarchical timing wheel, driven by a manual clock."""

from __future__ import annotations

import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from purgatory.broker.purgatory import LoopScheduler, ManualScheduler, SystemTimer, TimerTask
from purgatory.broker.purgatory.clock import whole_ms


class Recorder(TimerTask):
    __slots__ = ("fired", "scheduler")

    def __init__(self, delay_ms: int, scheduler: ManualScheduler) -> None:
        super().__init__(delay_ms)
        self.scheduler = scheduler
        self.fired: list[int] = []

    def run(self) -> None:
        self.fired.append(self.scheduler.now_ms())


def setup(start: int = 0) -> tuple[ManualScheduler, SystemTimer]:
    clock = ManualScheduler(start)
    return clock, SystemTimer(clock, tick_ms=1, wheel_size=20)


@pytest.mark.parametrize(
    "delay", [1, 2, 19, 20, 21, 399, 400, 401, 7999, 8000, 8001, 160_000, 3_200_001]
)
def test_a_task_fires_exactly_at_its_deadline_at_every_wheel_level(delay: int) -> None:
    clock, timer = setup(start=12_345)
    task = Recorder(delay, clock)
    timer.add(task)
    clock.advance(delay - 1)
    assert task.fired == []
    clock.advance(1)
    assert task.fired == [12_345 + delay]
    assert len(timer) == 0


def test_overflow_wheels_are_created_on_demand_with_coarser_ticks() -> None:
    clock, timer = setup()
    timer.add(Recorder(5, clock))
    assert timer.wheel.levels == 1
    timer.add(Recorder(500, clock))
    assert timer.wheel.levels == 3
    overflow = timer.wheel.overflow
    assert overflow is not None and overflow.tick_ms == 20 and overflow.interval_ms == 400
    assert overflow.overflow is not None and overflow.overflow.tick_ms == 400


def test_a_far_task_cascades_down_to_finer_wheels_before_it_runs() -> None:
    clock, timer = setup()
    task = Recorder(450, clock)
    timer.add(task)
    # Level 2 (400 ms ticks) holds it first; after its bucket expires at 400 it is re-inserted
    # into level 1 (20 ms ticks) at 440, then level 0 at 450.
    clock.advance(400)
    assert task.scheduled and task.fired == []
    assert task._bucket is not None and task._bucket.expiration_ms == 440
    clock.advance(40)
    assert task._bucket is not None and task._bucket.expiration_ms == 450
    clock.advance(10)
    assert task.fired == [450]


def test_cancelled_tasks_never_run_before_or_after_a_cascade() -> None:
    clock, timer = setup()
    before, after = Recorder(450, clock), Recorder(450, clock)
    timer.add(before)
    timer.add(after)
    before.cancel()
    assert len(timer) == 1
    clock.advance(445)  # ``after`` has cascaded to a finer wheel by now
    after.cancel()
    assert len(timer) == 0 and not after.scheduled
    clock.advance(1000)
    assert before.fired == [] and after.fired == []


def test_a_bucket_is_reused_for_a_later_round() -> None:
    clock, timer = setup()
    first, mover = Recorder(4, clock), Recorder(10, clock)
    timer.add(first)
    timer.add(mover)
    bucket = first._bucket
    clock.advance(10)  # the wheel's clock moves when a bucket expires: now at 10
    second = Recorder(14, clock)  # expiration 24: the same slot (24 % 20 == 4), next round
    timer.add(second)
    assert second._bucket is bucket and bucket is not None and bucket.expiration_ms == 24
    clock.advance(14)
    assert (first.fired, mover.fired, second.fired) == ([4], [10], [24])


def test_only_buckets_are_queued_and_a_single_wakeup_is_armed() -> None:
    clock, timer = setup()
    tasks = [Recorder(100, clock) for _ in range(1000)]
    for task in tasks:
        timer.add(task)
    assert len(timer) == 1000
    assert timer.buckets_queued == 1
    assert clock.pending_timers == 1


def test_buckets_emptied_by_cancellation_do_not_keep_waking_the_loop() -> None:
    clock, timer = setup()
    early, late = Recorder(3, clock), Recorder(50, clock)
    timer.add(early)
    timer.add(late)
    early.cancel()
    clock.advance(3)  # wakes for the (now empty) early bucket and arms for the late one
    assert clock.pending_timers == 1
    clock.advance(47)
    assert late.fired == [50]


def test_a_task_that_is_already_due_runs_soon_not_inside_add() -> None:
    clock, timer = setup()
    task = Recorder(0, clock)
    timer.add(task)
    assert task.fired == []
    clock.run_ready()
    assert task.fired == [0]


def test_an_earlier_bucket_is_not_missed_when_a_flush_arms_a_later_one() -> None:
    clock, timer = setup()
    cascading, near = Recorder(401, clock), Recorder(30, clock)
    timer.add(cascading)
    clock.advance(1)
    timer.add(near)  # queued: bucket 20..40 (level 1), and level 2 bucket at 400
    clock.advance(30)
    assert near.fired == [31]
    clock.advance(400)
    assert cascading.fired == [401]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 20_000), st.none() | st.integers(0, 20_000)),
        min_size=1,
        max_size=60,
    )
)
def test_every_task_fires_once_not_before_its_deadline_and_within_a_tick(plan) -> None:  # type: ignore[no-untyped-def]
    """Against a reference: each task's deadline and cancel time, replayed in time order."""
    clock, timer = setup(start=1_000)
    events: list[tuple[int, int, int]] = []  # (time, 0 = add / 1 = cancel, task index)
    deadlines: list[int] = []
    cancels: list[int | None] = []
    added_at = 1_000
    for index, (gap, delay, cancel_after) in enumerate(plan):
        added_at += gap
        deadlines.append(added_at + delay)
        cancels.append(None if cancel_after is None else added_at + cancel_after)
        events.append((added_at, 0, index))
        if cancel_after is not None:
            events.append((added_at + cancel_after, 1, index))
    tasks: dict[int, Recorder] = {}
    for when, kind, index in sorted(events):
        clock.advance(when - clock.now_ms())
        if kind == 0:
            tasks[index] = Recorder(plan[index][1], clock)
            timer.add(tasks[index])
        else:
            tasks[index].cancel()
    clock.advance(25_000)
    for index, task in tasks.items():
        cancel_at = cancels[index]
        if cancel_at is not None and cancel_at < deadlines[index]:
            assert task.fired == []
        else:
            assert len(task.fired) == 1
            assert deadlines[index] <= task.fired[0] <= deadlines[index] + 1
    assert len(timer) == 0


def test_an_alarm_only_moves_earlier_and_reports_its_deadline() -> None:
    from purgatory.broker.purgatory.clock import Alarm

    clock = ManualScheduler()
    fired: list[int] = []
    alarm = Alarm(clock, fired.append)
    alarm.no_later_than(50)
    alarm.no_later_than(80)  # later: ignored
    assert alarm.when_ms == 50 and clock.pending_timers == 1
    alarm.no_later_than(20)  # earlier: moves, still one wake-up
    assert alarm.when_ms == 20 and clock.pending_timers == 1
    clock.advance(100)
    assert fired == [20] and alarm.when_ms is None
    alarm.no_later_than(150)
    alarm.cancel()
    clock.advance(100)
    assert fired == [20]


def test_a_loop_clock_reading_of_whole_milliseconds_keeps_its_millisecond() -> None:
    """uvloop's clock counts whole milliseconds, handed over as float seconds; truncating
    ``seconds * 1000`` lost one for about a quarter of them (a deadline a millisecond early)."""
    for ms in [*range(16_741_000, 16_761_000), *range(10**11, 10**11 + 2_000)]:
        assert whole_ms(ms / 1000) == ms
    assert whole_ms(1.0009) == 1000  # a finer clock (asyncio's own) is rounded down


def test_the_broker_scheduler_reads_uvloops_clock_to_the_millisecond() -> None:
    loop = uvloop.new_event_loop()
    try:
        scheduler = LoopScheduler(loop)
        assert abs(scheduler.now_ms() - loop.time() * 1000) <= 2
        for _ in range(20_000):
            reading = loop.time()  # libuv's millisecond count over 1000
            assert abs(reading * 1000 - round(reading * 1000)) < 1e-6
            assert whole_ms(reading) == round(reading * 1000)
    finally:
        loop.close()
