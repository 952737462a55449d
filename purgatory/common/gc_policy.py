"""How often a broker process collects cyclic garbage.

Python's default runs a young-generation collection every 700 net container allocations. A
broker allocates a few per request (the delayed operation, its response, buffers) and frees
almost all of them by reference counting, so at 250k operations a second the default
collects some 350 times a second and, worse, re-scans the operations still waiting in the
purgatory each time they are promoted. Measured with ``purgatory perf purgatory`` (the
timing-wheel post's high-timeout mix at 250k/s, 2 cores): about 11% of the CPU went to
collections with the defaults, under 1% with these thresholds. A young collection then
scans at most 10,000 objects (well under a millisecond).
"""

from __future__ import annotations

import gc

BROKER_THRESHOLDS = (10_000, 10, 10)
PYTHON_THRESHOLDS = (700, 10, 10)  # CPython's defaults
POLICIES = {"broker": BROKER_THRESHOLDS, "python": PYTHON_THRESHOLDS}


def use(policy: str = "broker") -> tuple[int, int, int]:
    """Collect as ``policy`` says (``broker`` or ``python``); return the thresholds."""
    thresholds = POLICIES[policy]
    gc.set_threshold(*thresholds)
    return thresholds
