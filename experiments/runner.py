"""`purgatory experiment run SCENARIO --out DIR`: one scenario, recorded; Ctrl-C stops it
cleanly and keeps what was written."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from purgatory.experiments.harness import Options
from purgatory.experiments.recorder import Recorder
from purgatory.experiments.scenarios import SCENARIOS


def parse_params(items: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--param expects name=value, got {item!r}")
        params[name.strip().replace("-", "_")] = value.strip()
    return params


async def run_scenario(name: str, options: Options) -> tuple[Recorder, dict[str, Any] | None]:
    settings = {
        "duration_s": options.duration_s,
        "partitions": options.partitions,
        "records": options.records,
        **options.params,
    }
    recorder = Recorder(options.out, name, settings)
    results: dict[str, Any] | None = None
    try:
        results = await SCENARIOS[name](recorder, options)
        recorder.results(results)
    finally:
        recorder.close(completed=results is not None)
    return recorder, results


def main(args: argparse.Namespace) -> int:
    import uvloop

    try:
        params = parse_params(args.param)
    except ValueError as exc:
        print(f"purgatory experiment run: {exc}", file=sys.stderr)
        return 2
    if args.bootstrap and not args.admin:
        print("purgatory experiment run: --bootstrap needs --admin URLs too", file=sys.stderr)
        return 2
    options = Options(
        out=Path(args.out),
        bootstrap=args.bootstrap,
        admin=args.admin or [],
        duration_s=args.duration,
        partitions=args.partitions,
        records=args.records,
        progress=not args.no_progress,
        params=params,
    )
    try:
        _, results = uvloop.run(run_scenario(args.scenario, options))
    except KeyboardInterrupt:
        print(f"stopped; what was recorded is in {options.out}", file=sys.stderr)
        return 130
    except (RuntimeError, OSError) as exc:  # brokers that would not start, a wait that ran out
        print(
            f"purgatory experiment run {args.scenario}: {exc}; what was recorded is in "
            f"{options.out}",
            file=sys.stderr,
        )
        return 1
    print(json.dumps({"scenario": args.scenario, "out": str(options.out), "results": results}))
    violations = (results or {}).get("violations") or []
    for violation in violations:
        print(f"purgatory experiment run {args.scenario}: violated: {violation}", file=sys.stderr)
    return 1 if violations else 0
