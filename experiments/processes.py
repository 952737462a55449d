"""Brokers for an experiment: started as real processes on free local ports (or existing
ones named with --bootstrap/--admin), and stopped with the experiment."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from purgatory.broker.local_cluster import broker_commands, cluster_environment
from purgatory.broker.ops.supervisor import Supervisor, SupervisorError
from purgatory.common.admin_request import auth_headers


@dataclass
class Brokers:
    bootstrap: str
    admins: dict[int, str]  # broker id -> admin base URL
    # The processes, when the experiment started them (it may then stop, kill, pause and
    # restart brokers); None for brokers someone else runs.
    supervisor: Supervisor | None = None
    settings: dict[str, str] = field(default_factory=dict)

    def admin(self, broker_id: int) -> str:
        return self.admins[broker_id]


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections (Linux's ip_local_port_range)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(ports: range) -> bool:
    socks = []
    try:
        for port in ports:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def free_port_range(n: int) -> int:
    """A base port such that base .. base+n-1 are all free right now, below the ephemeral
    range: a port handed out later to a process that has not bound it yet must not be
    taken meanwhile by an outgoing connection (or by the health check polling it, which
    would then connect to itself and read its own request back)."""
    low = _ephemeral_range()[0]
    floor = 10000 if low > 11000 + n else 1024
    for _ in range(200):
        base = random.randrange(floor, max(floor + 1, low - n))
        if _bindable(range(base, base + n)):
            return base
    raise RuntimeError(f"no {n} consecutive free ports found below {low}")


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports, each chosen as ``free_port_range`` chooses."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port_range(1)
        if port not in ports:
            ports.append(port)
    return ports


@contextlib.asynccontextmanager
async def local_brokers(
    n: int, settings: dict[str, Any], log_dir: Path, startup_timeout: float = 30.0
) -> AsyncIterator[Brokers]:
    """``n`` broker processes, each with ``settings`` (--set), logging to ``log_dir``;
    the command lines are `purgatory cluster`'s."""
    base_port = free_port_range(2 * n)
    admin_base = base_port + n
    commands = broker_commands(
        argparse.Namespace(
            brokers=n,
            host="127.0.0.1",
            base_port=base_port,
            admin_base_port=admin_base,
            set=[f"{name}={value}" for name, value in settings.items()],
            config=None,
            log_format=None,
            log_level=None,
        )
    )
    admins = {i: f"http://127.0.0.1:{admin_base + i}" for i in range(n)}
    supervisor = Supervisor(
        commands, [admins[i] for i in range(n)], log_dir, startup_timeout, cluster_environment({})
    )
    try:
        supervisor.start_all()
        try:
            await asyncio.to_thread(supervisor.wait_healthy, list(range(n)))
        except SupervisorError as exc:
            raise RuntimeError(f"{exc}; see {log_dir}") from exc
        yield Brokers(
            ",".join(f"127.0.0.1:{base_port + i}" for i in range(n)),
            admins,
            supervisor,
            {k: str(v) for k, v in settings.items()},
        )
    finally:
        await asyncio.to_thread(supervisor.stop_all)


@contextlib.asynccontextmanager
async def existing_brokers(bootstrap: str, admins: list[str]) -> AsyncIterator[Brokers]:
    """Brokers someone else runs (the docker-compose cluster, say): admin URLs in broker id
    order are matched to ids through /healthz."""
    by_id: dict[int, str] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for base in admins:
            async with session.get(f"{base.rstrip('/')}/healthz") as response:
                payload = await response.json()
            if response.status != 200:
                raise RuntimeError(f"{base} is not healthy: {payload}")
            by_id[int(payload["broker_id"])] = base.rstrip("/")
    yield Brokers(bootstrap, by_id)


async def admin_call(base: str, method: str, path: str, body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.request(
            method,
            f"{base}{path}",
            json=body,
            # JSON even without a body: the admin API takes changes only as JSON.
            headers={"Content-Type": "application/json", **auth_headers()},
        ) as response,
    ):
        payload = await response.json()
        if response.status >= 400:
            raise RuntimeError(f"{method} {base}{path}: {payload.get('error', payload)}")
        return payload


async def set_config(base: str, name: str, value: Any) -> None:
    await admin_call(base, "PUT", f"/v1/config/{name}", {"value": value})


async def metric(base: str, name: str, labels: dict[str, str] | None = None) -> float:
    """The sum of a metric's samples (optionally those with ``labels``) on one broker."""
    from prometheus_client.parser import text_string_to_metric_families

    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
        session.get(f"{base}/metrics") as response,
    ):
        text = await response.text()
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
                total += s.value
    return total
