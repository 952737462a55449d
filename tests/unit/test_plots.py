"""The experiment figures read well: panels in order, one scale, titles, labelled bars."""

from __future__ import annotations

from typing import Any

from purgatory.experiments.plot import backfill_figure, failover_figure, lag_figure


def lag_rows(chunks: int, size: int, lag: int) -> list[dict[str, Any]]:
    return [
        {
            "phase": f"{chunks}x{size}",
            "ts": 100.0 + i,
            "queued_max_message_chunks": chunks,
            "fetch_message_max_bytes": size,
            "checker_lag": lag,
            "max_lag": lag // (i + 1),
        }
        for i in range(5)
    ]


def test_consumer_lag_panels_go_from_the_smallest_queue_to_the_largest_on_one_scale() -> None:
    # Phase names sort as text in another order (1000x.. < 100x.. < 1x..).
    rows = lag_rows(1000, 65536, 30) + lag_rows(1, 1024, 300) + lag_rows(100, 1024, 3000)
    fig = lag_figure(rows)
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split(",")[0] for t in titles] == [
        "queued.max.message.chunks=1",
        "queued.max.message.chunks=100",
        "queued.max.message.chunks=1000",
    ]
    assert len({ax.get_ylim() for ax in fig.axes}) == 1  # a shared y axis
    assert fig.get_suptitle()


def test_backfill_bars_carry_their_values() -> None:
    fig = backfill_figure(
        [
            {"remote_fetch_max_wait_ms": 50, "expirations": 16, "seconds": 0.85},
            {"remote_fetch_max_wait_ms": 2000, "expirations": 0, "seconds": 0.23},
        ]
    )
    labels = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert {"16", "0", "0.85 s", "0.23 s"} <= set(labels)
    assert fig.get_suptitle()


def test_the_failover_figure_marks_the_kill_each_election_and_the_restart() -> None:
    history = [
        {
            "ts": 100.0 + i / 10 + 0.002,
            "sent_ts": 100.0 + i / 10,
            "topic": "failover",
            "partition": i % 2,
            "error": None,
        }
        for i in range(100)
    ]
    events = [
        {"ts": 103.0, "event": "kill", "broker": 0},
        # Before the kill, a leader event is the topic's first picture, not an election.
        {"ts": 100.5, "event": "leader", "topic": "failover", "partition": 0, "leader": 0},
        {"ts": 105.0, "event": "leader", "topic": "failover", "partition": 0, "leader": 1},
        {"ts": 105.1, "event": "leader", "topic": "failover", "partition": 1, "leader": 2},
        {"ts": 106.0, "event": "restart", "broker": 0},
    ]
    fig = failover_figure(history, events)
    latency_ax, rate_ax = fig.axes
    lines = sorted(round(line.get_xdata()[0], 3) for line in latency_ax.get_lines())
    assert lines == [0.0, 2.0, 2.1, 3.0]  # seconds from the kill
    assert [t.get_text() for t in latency_ax.get_legend().get_texts()] == [
        "leader killed",
        "election",
        "restarted",
    ]
    assert "per second" in rate_ax.get_title() and fig.get_suptitle()
