"""Fault injection, built into the broker so clients cannot route around it (the shape of
toxiproxy's API): named faults, added and removed over admin HTTP, counted in metrics.

Kinds:

- ``latency``: delay (``delay_ms`` ± uniform ``jitter_ms``) on bytes *received* by this
  broker: requests from clients and followers, and responses to its own fetches from
  leaders (KIP-736's experiment delays a broker's incoming packets). ``peers`` limits it to
  given brokers (ints) or client ids (strings).
- ``error``: answer requests of ``api`` (Kafka's name: ``Produce``, ``Fetch``, ...) with
  ``error_code`` (number or name), for the next ``times`` requests or each with
  ``probability``.
- ``pause``: stop reading from every connection (requests wait in socket buffers).
- ``disconnect``: close the connections of ``peers`` (all when empty) now, and any new one
  while the fault lasts.
- ``partition``: cut this broker off from the brokers in ``peers`` (ids): their
  connections here are closed and refused, and this broker does not connect to them.
  Added on each side (or on one: it cuts both ways), it is a network partition: one broker
  isolated, or a majority and a minority.
- ``drop``: lose every byte this broker receives from the brokers in ``peers`` (ids),
  one way only: what it sends them still arrives (so they act on its requests, and it
  never hears their answers), as a one-way packet loss leaves TCP. A connection that lost
  bytes is closed when the fault ends.

``duration_ms`` removes a fault by itself; ``times`` removes an error fault once used up.
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

import msgspec
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from purgatory.broker.purgatory.clock import Cancellable, Scheduler
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode

Kind = Literal["latency", "error", "pause", "disconnect", "partition", "drop"]
KINDS: tuple[str, ...] = ("latency", "error", "pause", "disconnect", "partition", "drop")
LOST = math.inf  # the receive delay of bytes a drop fault loses
_BROKER_CLIENT = re.compile(r"^(?:replica-fetcher|broker)-(\d+)$")
API_NAMES = {key.api_name: key for key in ApiKey}  # both protocols' APIs


class FaultError(ValueError):
    """A fault spec that cannot be applied; the message says why."""


# Bounds of a fault spec: beyond them a value is a mistake (or an attack: a delay of 1e300
# ms hung every request of the broker), answered 400 with the range.
MAX_DURATION_MS = 7 * 24 * 3_600_000
MAX_DELAY_MS = 600_000
MAX_TIMES = 2**31 - 1
MAX_PEERS = 1024


class FaultSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: str
    kind: str
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    peers: list[int | str] = []
    api: str | None = None
    error_code: int | str | None = None
    times: int | None = None
    probability: float = 1.0
    duration_ms: int | None = None


def parse_spec(raw: Any) -> FaultSpec:
    """Validate a fault spec (JSON object); raise FaultError with the reason."""
    try:
        spec = msgspec.convert(raw, FaultSpec)
    except msgspec.ValidationError as exc:
        raise FaultError(f"bad fault spec: {exc}") from None
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", spec.name):
        raise FaultError(f"fault name {spec.name!r}: use 1-64 letters, digits, '.', '_', '-'")
    if spec.kind not in KINDS:
        raise FaultError(f"fault kind {spec.kind!r} is not one of {', '.join(KINDS)}")
    if spec.duration_ms is not None and not 0 < spec.duration_ms <= MAX_DURATION_MS:
        raise FaultError(f"duration_ms must be in 1..{MAX_DURATION_MS} (7 days)")
    if len(spec.peers) > MAX_PEERS or any(len(str(p)) > 255 for p in spec.peers):
        raise FaultError(f"peers: at most {MAX_PEERS}, each at most 255 characters")
    if spec.kind == "latency":
        if not (
            0 < spec.delay_ms <= MAX_DELAY_MS and 0 <= spec.jitter_ms <= spec.delay_ms
        ):  # (NaN fails every comparison)
            raise FaultError(
                f"a latency fault needs 0 < delay_ms <= {MAX_DELAY_MS} (10 minutes) and "
                "0 <= jitter_ms <= delay_ms"
            )
    elif spec.kind == "error":
        if spec.api not in API_NAMES:
            raise FaultError(f"api {spec.api!r} is not one of {', '.join(sorted(API_NAMES))}")
        code = _error_code(spec.error_code)
        spec.error_code = int(code)
        if spec.times is not None and not 0 < spec.times <= MAX_TIMES:
            raise FaultError(f"times must be in 1..{MAX_TIMES}")
        if not 0 < spec.probability <= 1:
            raise FaultError("probability must be in (0, 1]")
    elif spec.kind == "pause" and spec.duration_ms is None:
        raise FaultError("a pause fault needs duration_ms (how long to stop reading)")
    elif spec.kind in ("partition", "drop") and (
        not spec.peers or not all(isinstance(p, int) and p >= 0 for p in spec.peers)
    ):
        raise FaultError(f"a {spec.kind} fault needs peers: the ids of the brokers cut off")
    return spec


def _error_code(raw: int | str | None) -> ErrorCode:
    if raw is None:
        raise FaultError("an error fault needs error_code (a Kafka error number or name)")
    try:
        code = ErrorCode[raw] if isinstance(raw, str) else ErrorCode(raw)
    except (KeyError, ValueError):
        raise FaultError(f"error_code {raw!r} is not a Kafka error this broker knows") from None
    if code == ErrorCode.NONE:
        raise FaultError("error_code 0 (NONE) is not an error")
    return code


class Fault:
    __slots__ = ("applied", "created_ms", "expiry", "remaining", "spec")

    def __init__(self, spec: FaultSpec, created_ms: int) -> None:
        self.spec = spec
        self.created_ms = created_ms
        self.applied = 0
        self.remaining = spec.times
        self.expiry: Cancellable | None = None

    def matches(self, broker_id: int | None, client_id: str | None) -> bool:
        peers = self.spec.peers
        if not peers:
            return True
        return (broker_id is not None and broker_id in peers) or (
            client_id is not None and client_id in peers
        )

    def describe(self) -> dict[str, Any]:
        return {
            **msgspec.to_builtins(self.spec),
            "applied": self.applied,
            "created_ms": self.created_ms,
        }


def peer_broker(client_id: str | None) -> int | None:
    """The broker id behind an inter-broker client id, else None."""
    match = _BROKER_CLIENT.match(client_id or "")
    return int(match.group(1)) if match else None


class FaultInjector:
    """The faults active on one broker. The network layer asks it, per connection, how
    long to hold received bytes, whether to answer a request with an error, whether to
    read at all, and whether to drop the connection. ``active`` is False when there are
    none, so the request path pays one attribute check."""

    def __init__(self, scheduler: Scheduler, rng: random.Random | None = None) -> None:
        self.scheduler = scheduler
        # Called on every change (the network layer re-checks pausing and disconnects).
        self.listeners: list[Callable[[], None]] = []
        self.rng = rng or random.Random()
        self.faults: dict[str, Fault] = {}
        self.active = False
        self.paused = False
        self.injected: dict[tuple[str, str], int] = {}  # (name, kind) -> times applied

    def add(self, spec: FaultSpec) -> Fault:
        if spec.name in self.faults:
            raise FaultError(f"a fault named {spec.name!r} exists; remove it first")
        fault = Fault(spec, self.scheduler.now_ms())
        if spec.duration_ms is not None:
            fault.expiry = self.scheduler.call_at(
                self.scheduler.now_ms() + spec.duration_ms,
                functools.partial(self._expire, spec.name),
            )
        self.faults[spec.name] = fault
        if spec.kind == "pause":
            self._count(fault)  # a pause acts once: when it begins
        self._changed()
        return fault

    def remove(self, name: str) -> Fault | None:
        fault = self.faults.pop(name, None)
        if fault is not None:
            if fault.expiry is not None:
                fault.expiry.cancel()
            self._changed()
        return fault

    def _expire(self, name: str) -> None:
        self.remove(name)

    def reset(self) -> None:
        for name in list(self.faults):
            self.remove(name)

    def _changed(self) -> None:
        self.active = bool(self.faults)
        self.paused = any(f.spec.kind == "pause" for f in self.faults.values())
        for listener in self.listeners:
            listener()

    def _count(self, fault: Fault) -> None:
        fault.applied += 1
        key = (fault.spec.name, fault.spec.kind)
        self.injected[key] = self.injected.get(key, 0) + 1

    def receive_delay(self, broker_id: int | None, client_id: str | None) -> float:
        """Seconds to hold bytes received from this peer (0 without a latency fault;
        ``LOST`` when a drop fault loses them)."""
        delay = 0.0
        for fault in self.faults.values():
            spec = fault.spec
            if spec.kind == "drop" and broker_id is not None and broker_id in spec.peers:
                self._count(fault)
                return LOST
            if spec.kind == "latency" and fault.matches(broker_id, client_id):
                jitter = self.rng.uniform(-spec.jitter_ms, spec.jitter_ms) if spec.jitter_ms else 0
                delay += (spec.delay_ms + jitter) / 1000
                self._count(fault)
        return delay

    def delay_from_broker(self, broker_id: int) -> float:
        """Seconds to hold bytes this broker's own connections receive from ``broker_id``."""
        return self.receive_delay(broker_id, None) if self.active else 0.0

    def error_for(self, api_key: int) -> tuple[int, str] | None:
        """The error to answer a request of ``api_key`` with, if an error fault says so."""
        for fault in list(self.faults.values()):
            spec = fault.spec
            if spec.kind != "error" or API_NAMES[spec.api or ""] != api_key:
                continue
            if spec.probability < 1 and self.rng.random() >= spec.probability:
                continue
            self._count(fault)
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.remove(spec.name)
            assert spec.error_code is not None
            return int(spec.error_code), f"injected by fault {spec.name!r}"
        return None

    def disconnects(self, broker_id: int | None, client_id: str | None) -> bool:
        """Whether a connection of this peer is to be dropped now."""
        for fault in self.faults.values():
            kind = fault.spec.kind
            if (kind == "disconnect" and fault.matches(broker_id, client_id)) or (
                kind == "partition" and broker_id is not None and broker_id in fault.spec.peers
            ):
                self._count(fault)
                return True
        return False

    def cuts_off(self, broker_id: int) -> bool:
        """Whether a partition fault forbids this broker to connect to ``broker_id``."""
        if not self.active:
            return False
        return any(
            f.spec.kind == "partition" and broker_id in f.spec.peers for f in self.faults.values()
        )

    def drops(self, broker_id: int | None) -> bool:
        """Whether a drop fault loses what ``broker_id`` sends this broker."""
        if not self.active or broker_id is None:
            return False
        return any(
            f.spec.kind == "drop" and broker_id in f.spec.peers for f in self.faults.values()
        )

    def describe(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self.faults.values()]

    def collect_metrics(self) -> Iterator[Metric]:
        """Faults in force, and how often each acted."""
        active = GaugeMetricFamily(
            "purgatory_faults_active", "Injected faults in force, by kind.", labels=["kind"]
        )
        by_kind: dict[str, int] = {}
        for fault in self.faults.values():
            by_kind[fault.spec.kind] = by_kind.get(fault.spec.kind, 0) + 1
        for kind in KINDS:
            active.add_metric([kind], by_kind.get(kind, 0))
        yield active
        injected = CounterMetricFamily(
            "purgatory_fault_injections",
            "Times a fault acted: bytes held, requests answered with an error, connections "
            "dropped, pauses begun.",
            labels=["fault", "kind"],
        )
        for (name, kind), count in sorted(self.injected.items()):
            injected.add_metric([name, kind], count)
        yield injected
