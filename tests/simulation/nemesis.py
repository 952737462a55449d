"""The simulation's faults, drawn from the seed (Jepsen's nemeses): kill -9 a node (the
active controller, often) and restart it later with its disk but nothing of its memory;
kill two at once and restart them together; freeze one (SIGSTOP) and let it run on late;
isolate one from the others; cut a link one way; slow the network down. Faults overlap.
Every fault ends by itself: after ``heal`` nothing is broken.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.simulation.cluster import SimCluster

KINDS = ("crash", "crash-controller", "crash-two", "pause", "isolate", "one-way", "slow")


@dataclass
class Nemesis:
    cluster: SimCluster
    rng: random.Random
    log: list[str] = field(default_factory=list)  # what was done, when (for a failure report)

    def plan(self, start: float, end: float) -> None:
        """Schedule faults between ``start`` and ``end`` (simulated seconds from now)."""
        sim = self.cluster.sim
        t = start
        while t < end:
            kind = self.rng.choice(KINDS)
            duration = self.rng.uniform(0.1, 2.0)
            sim.at(t, self._action(kind, duration))
            t += self.rng.uniform(0.1, 1.2)

    def _note(self, text: str) -> None:
        self.log.append(f"t={self.cluster.sim.now - 1000:.3f} {text}")

    def _action(self, kind: str, duration: float) -> Callable[[], None]:
        return lambda: self._begin(kind, duration)

    def _begin(self, kind: str, duration: float) -> None:
        cluster, sim = self.cluster, self.cluster.sim
        ids = sorted(cluster.nodes)
        up = [i for i in ids if cluster.nodes[i].up]
        if kind == "crash-controller":
            active = cluster.active_controller()
            kind, targets = "crash", [active.broker_id] if active is not None else up[:1]
        elif kind == "crash-two":
            kind, targets = "crash", self.rng.sample(up, min(2, len(up)))
        else:
            targets = [self.rng.choice(ids)]
        if kind == "crash":
            targets = [t for t in targets if cluster.nodes[t].up]
            if not targets:
                return
            for t in targets:
                cluster.nodes[t].crash()
            self._note(f"crash {targets} for {duration:.2f}s")
            sim.at(duration, lambda: self._restart(targets))
        elif kind == "pause":
            node = cluster.nodes[targets[0]]
            if not node.up or node.paused:
                return
            node.pause()
            self._note(f"pause {targets[0]} for {duration:.2f}s")
            sim.at(duration, node.resume)
        elif kind == "isolate":
            cut = {(targets[0], o) for o in ids if o != targets[0]}
            cut |= {(b, a) for a, b in cut}
            self._cut(cut, duration, f"isolate {targets[0]}")
        elif kind == "one-way":
            other = self.rng.choice([i for i in ids if i != targets[0]])
            self._cut({(targets[0], other)}, duration, f"lose {targets[0]}->{other}", lossy=True)
        elif kind == "slow":
            net = cluster.net
            net.max_delay_ms = self.rng.uniform(5, 80)
            self._note(f"slow network up to {net.max_delay_ms:.0f}ms for {duration:.2f}s")

            def fast() -> None:
                net.max_delay_ms = 3.0

            sim.at(duration, fast)

    def _cut(
        self, links: set[tuple[int, int]], duration: float, what: str, lossy: bool = False
    ) -> None:
        net = self.cluster.net
        broken = net.lossy if lossy else net.cut
        added = links - net.cut - net.lossy
        broken |= added
        self._note(f"{what} for {duration:.2f}s")
        self.cluster.sim.at(duration, lambda: net.heal(added))

    def _restart(self, targets: list[int]) -> None:
        for t in targets:
            node = self.cluster.nodes[t]
            if not node.up:
                node.start()
        self._note(f"restart {targets}")

    def heal(self) -> None:
        """End every fault now: every node up and running, the network whole and fast."""
        cluster = self.cluster
        cluster.net.heal(cluster.net.cut | cluster.net.lossy)
        cluster.net.max_delay_ms = 3.0
        for node in cluster.nodes.values():
            node.resume()
            if not node.up:
                node.start()
        self._note("heal")
