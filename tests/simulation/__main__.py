"""python -m tests.simulation: seeded runs of the deterministic simulation.

    python -m tests.simulation --seeds 0-9999 --workers 2     # CI's run
    python -m tests.simulation --seed 1234 --verbose          # replay one, with its log

Each failing seed is printed with what broke and the command that replays it. String
hashing is pinned (PYTHONHASHSEED=0): this module starts itself again with it when it is
not, so a seed replays the same run on any machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from tests.simulation.run import FAULTS_S, RunResult, replay_command, run_seed


def seeds(spec: str) -> range:
    first, _, last = spec.partition("-")
    return range(int(first), int(last or first) + 1)


def run_many(chunk: list[int], faults_s: float, parent: int | None = None) -> list[RunResult]:
    """The seeds of ``chunk``; a worker whose ``parent`` is gone (killed, say by a test's
    timeout) stops at the next seed instead of running on, orphaned."""
    results = []
    for seed in chunk:
        if parent is not None and os.getppid() != parent:
            os._exit(1)  # the pool's worker loop would catch SystemExit and wait on
        results.append(run_seed(seed, faults_s))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="one run, e.g. to replay a failure")
    which.add_argument("--seeds", help="a range of seeds, A-B (inclusive)")
    parser.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    parser.add_argument(
        "--faults-s", type=float, default=FAULTS_S, help="simulated seconds of faults"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="the brokers' log, in simulated time"
    )
    parser.add_argument("--json", action="store_true", help="a JSON summary on stdout")
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "tests.simulation", *sys.argv[1:]])
    if args.seed is not None:
        result = run_seed(args.seed, args.faults_s, verbose=args.verbose)
        print("\n".join(result.faults))
        results = [result]
    else:
        todo = list(seeds(args.seeds))
        started = time.monotonic()
        if args.workers <= 1:
            results = run_many(todo, args.faults_s)
        else:
            size = max(1, len(todo) // (args.workers * 8))
            chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
            with ProcessPoolExecutor(args.workers) as pool:
                results = [
                    r
                    for part in pool.map(
                        run_many,
                        chunks,
                        [args.faults_s] * len(chunks),
                        [os.getpid()] * len(chunks),
                    )
                    for r in part
                ]
        elapsed = time.monotonic() - started
    failed = [r for r in results if not r.passed]
    for r in failed:
        print(f"seed {r.seed} FAILED:", file=sys.stderr)
        for problem in r.problems[:20]:
            print(f"  {problem}", file=sys.stderr)
        print(f"  faults: {'; '.join(r.faults)}", file=sys.stderr)
        print(f"  replay: {replay_command(r.seed)}", file=sys.stderr)
    summary = {
        "schedules": len(results),
        "failed": [r.seed for r in failed],
        "acked_records": sum(r.acked for r in results),
        "messages": sum(r.messages for r in results),
        "quorum_elections": sum(r.elections for r in results),
        "simulated_seconds": round(sum(r.simulated_s for r in results), 1),
    }
    if args.seed is None:
        summary["wall_seconds"] = round(elapsed, 1)
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['schedules']} schedules, {len(failed)} failed; "
            f"{summary['acked_records']} records acknowledged, "
            f"{summary['quorum_elections']} quorum elections, "
            f"{summary['simulated_seconds']} simulated seconds"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
