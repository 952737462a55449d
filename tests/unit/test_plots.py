"""The experiment figures read well: panels in order, one scale, titles, labelled bars."""

from __future__ import annotations

from typing import Any

from experiments.plot import backfill_figure, lag_figure


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
