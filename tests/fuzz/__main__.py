"""python -m tests.fuzz: hostile frames against a 3-broker process cluster (make fuzz).

    python -m tests.fuzz --frames 100000 --seed 7

Prints the run's JSON summary; exits 1 if a broker died, became unhealthy, lost or changed
acknowledged batches, grew its RSS by more than 20%, or logged a traceback. Broker logs
stay in BROKER_TEST_LOGS=<dir> when it is set."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from tests.cluster.process_cluster import ProcessCluster, ready
from tests.fuzz.run import fuzz


async def main(args: argparse.Namespace) -> int:
    cluster = ProcessCluster(**{"default.replication.factor": "3"})
    try:
        for i in range(3):
            cluster.start(i)
        await ready(cluster)

        def progress(frames: int) -> None:
            if not args.quiet:
                print(f"{frames} / {args.frames} hostile frames", file=sys.stderr, flush=True)

        result = await fuzz(cluster, args.frames, args.seed, args.workers, progress)
    finally:
        cluster.stop_all()
    if not args.quiet:
        print(file=sys.stderr)
    print(json.dumps(result.summary(), indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz")
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--quiet", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
