"""Coverage-guided fuzzing (atheris, libFuzzer) of the three things hostile bytes reach
first: the Kafka codec (the bounds walker and kio's reader behind it), our MessagePack
codec, and the LogValidator. A target raises only on a bug: any exception other than
the refusals each is expected to make.

    python -m tests.fuzz.coverage kafka --runs 100000            # make fuzz-coverage
    python -m tests.fuzz.coverage validator -- -max_total_time=600

The seed corpus is every served request of both protocols (and batches of every codec);
libFuzzer keeps what it finds in tests/corpus/coverage/<target>/ when run from the
repository, and writes a crashing input as crash-<sha1> in the current directory: move it
to tests/corpus/crashes/<target>/, where tests/unit/test_fuzz_crashes.py replays each.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).parents[2]
CRASHES = ROOT / "tests" / "corpus" / "crashes"
COVERAGE = ROOT / "tests" / "corpus" / "coverage"


def kafka_target() -> Callable[[bytes], None]:
    from purgatory.broker.network.kafka_codec import KafkaCodec
    from purgatory.broker.network.request_channel import UnreadableRequest

    codec = KafkaCodec(lambda request, code, message: None)

    def target(data: bytes) -> None:
        with contextlib.suppress(UnreadableRequest):
            codec.decode(data, 0.0)

    return target


def msgpack_target() -> Callable[[bytes], None]:
    from purgatory.broker.network.msgpack_codec import MsgpackCodec
    from purgatory.broker.network.request_channel import UnreadableRequest
    from purgatory.protocol.api import RequestError

    codec = MsgpackCodec()

    def target(data: bytes) -> None:
        with contextlib.suppress(UnreadableRequest, RequestError):
            codec.decode(data, 0.0)

    return target


def validator_target() -> Callable[[bytes], None]:
    from purgatory.broker.log.log_validator import LogValidator, RecordValidationError

    validator = LogValidator(2**63 - 1, 3_600_000, 1 << 20)

    def target(data: bytes) -> None:
        with contextlib.suppress(RecordValidationError):
            validator.validate(data, 1_700_000_000_000)

    return target


TARGETS: dict[str, Callable[[], Callable[[bytes], None]]] = {
    "kafka": kafka_target,
    "msgpack": msgpack_target,
    "validator": validator_target,
}


def seeds(name: str) -> list[bytes]:
    """Valid inputs of a target (frames without their length prefix, or batches)."""
    from tests.fuzz.corpus import kafka_batch, kafka_frames, msgpack_frames

    if name == "kafka":
        return [frame[4:] for frame in kafka_frames()]
    if name == "msgpack":
        return [frame[4:] for frame in msgpack_frames()]
    from tests.unit.test_kafka_records import CODECS, kafka_python_batch

    records = [(1_700_000_000_000, b"k", b"v" * 50, []), (1_700_000_000_001, None, b"w", [])]
    return [kafka_batch(3)] + [kafka_python_batch(records, codec) for codec in CODECS]


def write_seeds(name: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for seed in seeds(name):
        (directory / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    return directory


def crashes(name: str) -> list[Path]:
    """Inputs that once crashed ``name``: each is a regression test."""
    folder = CRASHES / name
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.coverage")
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument(
        "--corpus", type=Path, default=None, help="default: tests/corpus/coverage/<target>"
    )
    parser.add_argument("--write-seeds", action="store_true", help=argparse.SUPPRESS)
    args, libfuzzer = parser.parse_known_args()
    corpus = args.corpus or COVERAGE / args.target
    if args.write_seeds:
        write_seeds(args.target, corpus)
        return
    # The seeds come from a child: this process must import our modules first inside
    # atheris's instrumentation, so that their branches guide it.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fuzz.coverage",
            args.target,
            "--corpus",
            str(corpus),
            "--write-seeds",
        ],
        check=True,
    )
    import atheris

    with atheris.instrument_imports(include=["purgatory"]):
        target = TARGETS[args.target]()
    argv = [sys.argv[0], str(corpus), f"-runs={args.runs}", *[a for a in libfuzzer if a != "--"]]
    atheris.Setup(argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
