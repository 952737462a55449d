"""python -m tests.eos: the exactly-once proof under kills, at length (make eos).

    python -m tests.eos --kills 50 --broker-kills 6 --seed 7

Prints the run's JSON summary (kills, records, duplicates, missing, seconds); exits 1 if
the output topic read read_committed does not hold every input record exactly once, or a
worker stopped making progress. The workers' stderr goes to --worker-log (else a
temporary file)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.eos.run import EosResult, eos


def main(args: argparse.Namespace) -> int:
    def progress(result: EosResult) -> None:
        if not args.quiet:
            print(
                f"{result.kills} / {args.kills} worker kills, "
                f"{len(result.broker_kills)} broker kills, {result.commits} commits",
                file=sys.stderr,
                flush=True,
            )

    records = args.records if args.records is not None else 200 * (args.kills + 2)
    result = eos(
        args.kills,
        args.broker_kills,
        records,
        args.seed,
        args.batch,
        args.worker_log,
        progress,
        args.debug,
    )
    print(json.dumps(result.summary(), indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.eos")
    parser.add_argument("--kills", type=int, default=50, help="worker SIGKILLs")
    parser.add_argument("--broker-kills", type=int, default=6, help="broker kill -9s among them")
    parser.add_argument("--records", type=int, help="input records (200 per kill)")
    parser.add_argument("--batch", type=int, default=20, help="records per transaction")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--worker-log", type=Path)
    parser.add_argument("--debug", help="the workers' librdkafka debug contexts (eos,broker)")
    parser.add_argument("--quiet", action="store_true")
    sys.exit(main(parser.parse_args()))
