"""How late this machine wakes a process that does nothing but sleep: the floor under every
timed answer a benchmark measures here.

``python -m purgatory.testing.wake_probe SECONDS`` prints ``sleeping``, sleeps 0.5-2 ms at
a time for SECONDS, then prints as JSON how much later than asked the sleeps ended
(milliseconds: samples, p50, p99, max). A parked fetch's answer needs the broker woken by
its timer and the client woken by the answer, so on a machine that stalls a sleeping
process now and then (a virtual machine's host taking its cores) every answer's lateness
carries these stalls too; ``purgatory perf scale --modes parked-fetches`` runs it beside
its fetches and reports both.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from typing import Any

from purgatory.common.percentiles import spread


def probe(seconds: float, seed: int = 4) -> dict[str, Any]:
    """Sleep for ``seconds`` in short random naps; how late each one ended."""
    rng = random.Random(seed)
    late_ms: list[float] = []
    end = time.perf_counter() + seconds
    now = time.perf_counter()
    while now < end:
        nap = rng.uniform(0.0005, 0.002)
        time.sleep(nap)
        woke = time.perf_counter()
        late_ms.append((woke - now - nap) * 1000)
        now = woke
    return {"samples": len(late_ms), **spread(late_ms)}


def main(argv: list[str]) -> int:
    try:
        seconds = float(argv[0])
    except (IndexError, ValueError):
        print("usage: python -m purgatory.testing.wake_probe SECONDS", file=sys.stderr)
        return 2
    if not 0 < seconds < math.inf:
        print("SECONDS must be a number of seconds above 0", file=sys.stderr)
        return 2
    print("sleeping", flush=True)
    print(json.dumps(probe(seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
