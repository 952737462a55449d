"""The chaos scenario's nemesis: seeded faults on real broker processes (kill -9, SIGSTOP,
two restarted together, network partitions and one-way loss through the fault API,
leader moves), each healed after a while, and timed: how long the partitions its targets
led went without a leader elsewhere, and how long the quorum went without a controller."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from purgatory.broker.ops.supervisor import Supervisor
from purgatory.experiments.cluster_view import ClusterView
from purgatory.experiments.processes import Brokers, admin_call

KINDS = ("kill", "pause", "restart-two", "isolate", "split", "one-way", "move-leader")
# The kinds after which the cluster must find new leaders (and a new controller) by
# itself; restart-two leaves no quorum until the two return, move-leader harms no one.
FAILOVER_KINDS = frozenset({"kill", "pause", "isolate", "split", "one-way"})


def seconds_range(text: str) -> tuple[float, float]:
    """``"1-40"`` -> (1.0, 40.0); ``"5"`` -> (5.0, 5.0)."""
    low, _, high = str(text).partition("-")
    try:
        bounds = float(low), float(high or low)
    except ValueError:
        raise ValueError(f"expected seconds as A-B or A, got {text!r}") from None
    if not 0 <= bounds[0] <= bounds[1]:
        raise ValueError(f"expected 0 <= A <= B in {text!r}")
    return bounds


@dataclass
class Fault:
    """One fault: what, on whom, when; and what it cost (ms)."""

    index: int
    kind: str
    targets: list[int]
    started: float  # epoch s
    hold_s: float
    controller: int | None  # the active controller when it began
    affected: list[int]  # partitions a target led when it began
    detail: str = ""
    healed: float | None = None
    # Until every affected partition had a leader outside the targets, or the fault ended.
    failover_ms: float | None = None
    # Until a broker outside the targets was the active controller (when one was a target).
    controller_failover_ms: float | None = None
    recovered_ms: float | None = None  # from the heal until the cluster settled
    error: str | None = None
    added: list[tuple[int, str]] = field(default_factory=list)  # (broker, fault name)

    def row(self) -> dict[str, Any]:
        row = asdict(self)
        del row["added"]
        return row


class Nemesis:
    def __init__(
        self,
        brokers: Brokers,
        view: ClusterView,
        rng: random.Random,
        kinds: list[str],
        params: dict[str, Any],
    ) -> None:
        assert brokers.supervisor is not None
        self.supervisor: Supervisor = brokers.supervisor
        self.brokers = brokers
        self.view = view
        self.rng = rng
        self.kinds = kinds
        self.pause_s = seconds_range(params.get("pause_s", "1-40"))
        self.down_s = seconds_range(params.get("down_s", "1-10"))
        self.hold_s = seconds_range(params.get("hold_s", "2-20"))
        # "random": each fault's kind drawn from ``kinds``; "cycle": each in turn (a short
        # run still meets every one).
        self.schedule = str(params.get("schedule", "random"))
        if self.schedule not in ("random", "cycle"):
            raise RuntimeError(f"schedule: expected random or cycle, got {self.schedule!r}")
        self.faults: list[Fault] = []
        view.on_poll(self._time_failovers)

    @property
    def ids(self) -> list[int]:
        return sorted(self.brokers.admins)

    def _victim(self) -> int:
        """The controller half the time (its failure is the hard one), else the leader of
        a random partition (a broker that leads nothing costs no failover)."""
        controller = self.view.controller()
        if controller is not None and self.rng.random() < 0.5:
            return controller
        leaders = sorted(set(self.view.leaders().values()) - {-1})
        return self.rng.choice(leaders or self.ids)

    async def strike(self) -> Fault:
        if self.schedule == "cycle":
            kind = self.kinds[len(self.faults) % len(self.kinds)]
        else:
            kind = self.rng.choice(self.kinds)
        controller = self.view.controller()

        def others(excluded: list[int]) -> list[int]:
            return [b for b in self.ids if b not in excluded]

        if kind == "kill":
            targets, hold = [self._victim()], self.rng.uniform(*self.down_s)
        elif kind == "pause":
            targets, hold = [self._victim()], self.rng.uniform(*self.pause_s)
        elif kind == "restart-two":
            first = controller if controller is not None else self.rng.choice(self.ids)
            targets = [first, self.rng.choice(others([first]))]
            hold = self.rng.uniform(*self.down_s)
        elif kind in ("isolate", "one-way"):
            targets, hold = [self._victim()], self.rng.uniform(*self.hold_s)
        elif kind == "split":
            targets = sorted(self.rng.sample(self.ids, (len(self.ids) - 1) // 2))
            hold = self.rng.uniform(*self.hold_s)
        else:
            targets, hold = [], 0.0
        leaders = self.view.leaders()
        fault = Fault(
            index=len(self.faults),
            kind=kind,
            targets=targets,
            started=time.time(),
            hold_s=round(hold, 3),
            controller=controller,
            affected=sorted(p for p, leader in leaders.items() if leader in targets),
        )
        self.faults.append(fault)
        try:
            await self._apply(fault, others(targets))
        except (RuntimeError, OSError) as exc:
            fault.error = f"could not apply: {exc}"
        return fault

    async def _apply(self, fault: Fault, rest: list[int]) -> None:
        kind, targets = fault.kind, fault.targets
        if kind in ("kill", "restart-two"):
            for b in targets:
                await asyncio.to_thread(self.supervisor.kill, b)
        elif kind == "pause":
            await asyncio.to_thread(self.supervisor.pause, targets[0])
        elif kind in ("isolate", "split"):
            for b in targets:
                await self._add(fault, b, {"kind": "partition", "peers": rest})
        elif kind == "one-way":
            # The others lose what the target sends; what they send it still arrives.
            for b in rest:
                await self._add(fault, b, {"kind": "drop", "peers": targets})
        elif kind == "move-leader":
            await self._move_leader(fault)

    async def _add(self, fault: Fault, broker_id: int, spec: dict[str, Any]) -> None:
        name = f"chaos-{fault.index}"
        await admin_call(
            self.brokers.admin(broker_id), "POST", "/v1/faults", {"name": name, **spec}
        )
        fault.added.append((broker_id, name))

    async def _move_leader(self, fault: Fault) -> None:
        view = self.view.partitions()
        movable = [i for i, p in sorted(view.items()) if len(p["isr"]) > 1 and p["leader"] >= 0]
        if not movable:
            fault.detail = "no partition with another in-sync replica"
            return
        index = self.rng.choice(movable)
        p = view[index]
        to = self.rng.choice([b for b in p["isr"] if b != p["leader"]])
        fault.targets, fault.affected = [to], [index]
        fault.detail = f"partition {index}: leader {p['leader']} -> {to}"
        controller = self.view.controller()
        via = self.brokers.admin(controller if controller is not None else to)
        answer = await admin_call(
            via, "POST", f"/v1/partitions/{self.view.topic}/{index}/leader", {"broker_id": to}
        )
        fault.failover_ms = round((time.time() - fault.started) * 1000, 1)
        fault.detail += "" if answer.get("changed") else " (already)"

    async def heal(self, fault: Fault) -> None:
        """End the fault: restart what was killed (both at once for restart-two), resume
        what was paused, remove what was added."""
        if fault.healed is not None:
            return
        if fault.kind in ("kill", "restart-two"):
            for b in fault.targets:
                if not self.supervisor.running(b):
                    await asyncio.to_thread(self.supervisor.start, b)
        elif fault.kind == "pause":
            await asyncio.to_thread(self.supervisor.resume, fault.targets[0])
        for broker_id, name in fault.added:
            with contextlib.suppress(RuntimeError, OSError):
                await admin_call(self.brokers.admin(broker_id), "DELETE", f"/v1/faults/{name}")
        fault.healed = time.time()
        self._time_failovers()

    async def heal_everything(self) -> None:
        """Whatever state the brokers are in: every one running, none paused, no fault."""
        for b in self.ids:
            if not self.supervisor.running(b):
                await asyncio.to_thread(self.supervisor.start, b)
            await asyncio.to_thread(self.supervisor.resume, b)
        for b in self.ids:
            with contextlib.suppress(RuntimeError, OSError):
                await admin_call(self.brokers.admin(b), "POST", "/v1/faults/reset", {})

    def _time_failovers(self) -> None:
        now = time.time()
        for fault in self.faults[-2:]:
            if fault.kind not in FAILOVER_KINDS or fault.error is not None:
                continue
            ended = fault.healed is not None
            since = round(((fault.healed if ended else now) - fault.started) * 1000, 1)  # type: ignore[operator]
            harmed = set(fault.targets)
            if fault.failover_ms is None and fault.affected:
                leaders = self.view.leaders(excluding=harmed)
                if ended or all(leaders.get(p, -1) not in (*harmed, -1) for p in fault.affected):
                    fault.failover_ms = since
            if (
                fault.controller_failover_ms is None
                and fault.controller in harmed
                and (ended or self.view.controller(excluding=harmed) is not None)
            ):
                fault.controller_failover_ms = since
