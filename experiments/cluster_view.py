"""What a cluster looks like from outside while faults hit it: every broker's /v1/state
read every few tens of milliseconds, each broker by a reader of its own (a paused or dead
broker costs its own reader a timeout, never the others a turn), merged into one view of
each partition's leader and ISR and of the active controller. Each change goes to
events.jsonl (the figures mark them)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection
from typing import Any

import aiohttp

from purgatory.experiments.processes import Brokers
from purgatory.experiments.recorder import Recorder

POLL_S = 0.05
ANSWER_TIMEOUT_S = 0.5


class ClusterView:
    """Invariant: ``states[b]`` is broker b's latest answer, read at ``read_at[b]``; a
    broker that stops answering keeps its last one (``fresh`` tells them apart)."""

    def __init__(self, brokers: Brokers, recorder: Recorder, topic: str) -> None:
        self.brokers = brokers
        self.recorder = recorder
        self.topic = topic
        self.states: dict[int, dict[str, Any]] = {}
        self.read_at: dict[int, float] = {}
        self._seen: dict[tuple[str, int], Any] = {}
        self._listeners: list[Callable[[], None]] = []

    async def __aenter__(self) -> ClusterView:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ANSWER_TIMEOUT_S))
        await asyncio.gather(*(self._read(b) for b in self.brokers.admins))
        self._changed()
        self._tasks = [asyncio.ensure_future(self._run(b)) for b in self.brokers.admins]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._session.close()

    def on_poll(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every answer (the nemesis times failovers with it)."""
        self._listeners.append(listener)

    async def _run(self, broker_id: int) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            if await self._read(broker_id):
                self._changed()

    def _changed(self) -> None:
        self._record_changes()
        for listener in self._listeners:
            listener()

    async def _read(self, broker_id: int) -> bool:
        try:
            async with self._session.get(f"{self.brokers.admin(broker_id)}/v1/state") as response:
                state = await response.json()
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
            return False  # dead, paused or starting: its last answer stays, and ages
        self.states[broker_id] = state
        self.read_at[broker_id] = time.monotonic()
        return True

    def fresh(self, broker_id: int, within_s: float = 1.0) -> bool:
        return time.monotonic() - self.read_at.get(broker_id, -1e9) < within_s

    # -- the merged view -------------------------------------------------------------------

    def partitions(self, excluding: Collection[int] = ()) -> dict[int, dict[str, Any]]:
        """Each partition of the topic as the freshest-informed answering broker outside
        ``excluding`` (a harmed broker's view is stale) knows it: the replica description
        with the highest (leader epoch, partition epoch)."""
        out: dict[int, dict[str, Any]] = {}
        for broker_id, state in self.states.items():
            if broker_id in excluding or not self.fresh(broker_id):
                continue
            for p in state["partitions"]:
                if p["topic"] != self.topic:
                    continue
                known = out.get(p["partition"])
                key = (p["leader_epoch"], p["partition_epoch"])
                if known is None or key > (known["leader_epoch"], known["partition_epoch"]):
                    out[p["partition"]] = p
        return out

    def controller(self, excluding: Collection[int] = ()) -> int | None:
        """The broker that says it is the active controller (None: none answering does)."""
        for broker_id, state in sorted(self.states.items()):
            if broker_id not in excluding and self.fresh(broker_id) and state["is_controller"]:
                return broker_id
        return None

    def leaders(self, excluding: Collection[int] = ()) -> dict[int, int]:
        return {i: p["leader"] for i, p in self.partitions(excluding).items()}

    def settled(self, partitions: int, replication_factor: int) -> bool:
        """An active controller; every partition led, with every replica in its ISR."""
        view = self.partitions()
        return (
            self.controller() is not None
            and len(view) == partitions
            and all(p["leader"] >= 0 and len(p["isr"]) == replication_factor for p in view.values())
        )

    async def until(self, check: Callable[[], bool], what: str, timeout: float) -> float:
        """Wait until ``check()`` holds; returns when it first did (epoch s)."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:g} s")
            await asyncio.sleep(POLL_S)
        return time.time()

    def _record_changes(self) -> None:
        now = time.time()
        controller = self.controller()
        if controller is not None and self._seen.get(("controller", 0)) != controller:
            self._seen[("controller", 0)] = controller
            self.recorder.write(
                "events.jsonl", {"ts": now, "event": "controller", "broker": controller}
            )
        for index, p in self.partitions().items():
            current = (p["leader"], p["leader_epoch"], tuple(p["isr"]))
            before = self._seen.get(("partition", index))
            self._seen[("partition", index)] = current
            if before is None or before[:2] != current[:2]:
                event = "leader"
            elif before[2] != current[2]:
                event = "isr"
            else:
                continue
            self.recorder.write(
                "events.jsonl",
                {
                    "ts": now,
                    "event": event,
                    "topic": self.topic,
                    "partition": index,
                    "leader": p["leader"],
                    "leader_epoch": p["leader_epoch"],
                    "isr": p["isr"],
                },
            )
