"""The pytest plugin (entry point ``pytest11``, loaded wherever Purgatory is installed).

Fixtures:
- ``purgatory_cluster``: the session's cluster (``purgatory_brokers``, ``purgatory_mode``
  and ``purgatory_config`` ini options), started the first time a test asks for it; a
  test marked ``@pytest.mark.purgatory(brokers=..., config=..., mode=...)`` gets a cluster
  of its own instead. Faults a test added are cleared after it.
- ``purgatory_topic``: a fresh, uniquely named topic per test (``purgatory_topic_partitions``
  partitions), deleted after it.

A failing test that used a cluster gets a "purgatory cluster" section in its report: each
live broker's leaders, ISRs and high watermarks, the faults in force, and its latest log
events.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from purgatory.testing.cluster import Cluster, ClusterError


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("purgatory_brokers", "brokers of the session's purgatory_cluster", default="3")
    parser.addini("purgatory_mode", "thread (in-process) or process", default="thread")
    parser.addini(
        "purgatory_config",
        "broker configs of the session's cluster, one NAME=VALUE per line",
        type="linelist",
        default=[],
    )
    parser.addini("purgatory_topic_partitions", "partitions of purgatory_topic", default="1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "purgatory(brokers=3, config={...}, mode='thread'): this test gets a Purgatory "
        "cluster of its own",
    )


def _ini_config(pytestconfig: pytest.Config) -> dict[str, str]:
    settings: dict[str, str] = {}
    for line in pytestconfig.getini("purgatory_config"):
        name, sep, value = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"purgatory_config expects NAME=VALUE lines, got {line!r}")
        settings[name.strip()] = value.strip()
    return settings


@pytest.fixture(scope="session")
def purgatory_session_cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    with Cluster(
        brokers=int(pytestconfig.getini("purgatory_brokers")),
        config=_ini_config(pytestconfig),
        mode=pytestconfig.getini("purgatory_mode"),
    ) as cluster:
        yield cluster


@pytest.fixture
def purgatory_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    marker = request.node.get_closest_marker("purgatory")
    if marker is not None:
        with Cluster(**marker.kwargs) as own:
            yield own
        return
    shared: Cluster = request.getfixturevalue("purgatory_session_cluster")
    yield shared
    with contextlib.suppress(ClusterError):
        shared.clear_faults()


@pytest.fixture
def purgatory_topic(request: pytest.FixtureRequest, purgatory_cluster: Cluster) -> Iterator[str]:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:180]
    name = f"{base}-{uuid.uuid4().hex[:8]}"
    partitions = int(request.config.getini("purgatory_topic_partitions"))
    purgatory_cluster.create_topic(name, partitions)
    yield name
    with contextlib.suppress(Exception):  # a killed broker, a deleted topic: not the test's fault
        purgatory_cluster.delete_topic(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    cluster = getattr(item, "funcargs", {}).get("purgatory_cluster")
    if report.failed and isinstance(cluster, Cluster):
        report.sections.append(("purgatory cluster", describe(cluster)))
    return report


REPORTED_LOG_EVENTS = 15


def describe(cluster: Cluster) -> str:
    """What a failing test's reader wants first: who leads what with which ISR, the faults
    in force, and each broker's latest log events."""
    lines = [f"{cluster.size} broker(s), {cluster.mode} mode, {cluster.bootstrap_servers}"]
    for broker in range(cluster.size):
        if not cluster.alive(broker):
            lines.append(f"broker {broker}: not running")
            continue
        if cluster.paused(broker):
            lines.append(f"broker {broker}: paused")
            continue
        try:
            state = cluster.state(broker)
            events = cluster.logs(broker, REPORTED_LOG_EVENTS)
        except ClusterError as exc:
            lines.append(f"broker {broker}: {exc}")
            continue
        role = " (controller)" if state.is_controller else ""
        lines.append(f"broker {broker}{role}: live brokers {state.live_brokers}")
        for p in state.partitions:
            if p.role == "leader":
                lines.append(
                    f"  {p.topic}-{p.partition}: leader {p.leader}, isr {p.isr}, "
                    f"high watermark {p.high_watermark}, log end {p.log_end_offset}"
                )
        for fault in state.faults:
            lines.append(f"  fault {fault}")
        if events:
            lines.append(f"  latest log events ({len(events)}):")
            lines.extend(f"    {format_event(e)}" for e in events)
    return "\n".join(lines)


def format_event(event: dict[str, Any]) -> str:
    """'12:00:01.123 warning clean_leader_election topic=t partition=0 ...'"""
    fields = dict(event)
    at = str(fields.pop("timestamp", ""))[11:23]
    head = f"{at} {fields.pop('level', '')} {fields.pop('event', '')}"
    return " ".join([head, *(f"{k}={v}" for k, v in fields.items())])
