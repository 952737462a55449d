"""``purgatory delete-records``: delete every record below an offset of some partitions, with
kafka-delete-records.sh's offset file and output (and ``--json`` for scripts)."""

from __future__ import annotations

import argparse
import json

from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.output import parse_file, print_json
from purgatory.clients.cli.tools import _run
from purgatory.protocol.errors import error_name

TopicPartition = tuple[str, int]


class OffsetFileError(ValueError):
    """The offset JSON file is not what kafka-delete-records.sh reads."""


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """Kafka's offset file: ``{"partitions": [{"topic": T, "partition": P, "offset": O},
    ...], "version": 1}`` (an offset of -1: the high watermark). Raises OffsetFileError
    saying what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetFileError(f"the offset file is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise OffsetFileError("the offset file must hold a JSON object with a partitions list")
    version = document.get("version", 1)
    if version != 1:
        raise OffsetFileError(f"Not supported version field value {version}")
    partitions = document.get("partitions")
    if not isinstance(partitions, list):
        raise OffsetFileError("Missing partitions field")
    offsets: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    for entry in partitions:
        if not isinstance(entry, dict):
            raise OffsetFileError(f"each partition must be an object, got {entry!r}")
        topic, index, offset = (entry.get(k) for k in ("topic", "partition", "offset"))
        if not isinstance(topic, str) or not topic:
            raise OffsetFileError(f"a partition without a topic name: {entry!r}")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise OffsetFileError(f"partition must be an integer >= 0: {entry!r}")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise OffsetFileError(f"offset must be an integer (-1: the high watermark): {entry!r}")
        if (topic, index) in offsets:
            duplicates.append(f"{topic}-{index}")
        offsets[(topic, index)] = offset
    if duplicates:
        raise OffsetFileError(
            f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}"
        )
    if not offsets:
        raise OffsetFileError("the offset file names no partitions")
    return offsets


def delete_records_command(args: argparse.Namespace) -> int:
    offsets = parse_file(args.offset_json_file, parse_offset_json, "delete-records")
    if offsets is None:
        return 1
    return _run(_delete(args, offsets), "delete-records", args.bootstrap)


async def _delete(args: argparse.Namespace, offsets: dict[TopicPartition, int]) -> int:
    if not args.json:
        print("Executing records delete operation")
    async with admin_client(args) as admin:
        results = await admin.delete_records(offsets, args.timeout_ms)
    failed = any(code for code, _ in results.values())
    if args.json:
        print_json(
            [
                {
                    "topic": topic,
                    "partition": index,
                    "low_watermark": low,
                    "error": error_name(code) if code else None,
                }
                for (topic, index), (code, low) in results.items()
            ]
        )
        return 1 if failed else 0
    print("Records delete operation completed:")
    for (topic, index), (code, low) in results.items():
        if code:
            print(f"partition: {topic}-{index}\terror: {error_name(code)}: {_meaning(code)}")
        else:
            print(f"partition: {topic}-{index}\tlow_watermark: {low}")
    return 1 if failed else 0


_MEANINGS = {
    "OFFSET_OUT_OF_RANGE": "the offset is past the partition's high watermark (or below -1)",
    "UNKNOWN_TOPIC_OR_PARTITION": "no such topic or partition",
    "NOT_LEADER_OR_FOLLOWER": "the leader moved; run it again",
    "POLICY_VIOLATION": "the topic's cleanup.policy is compact: its records are not deleted",
    "INVALID_TOPIC_EXCEPTION": "records of an internal topic cannot be deleted",
    "REQUEST_TIMED_OUT": "the leader deleted them, but not every replica followed within "
    "--timeout-ms",
}


def _meaning(code: int) -> str:
    return _MEANINGS.get(error_name(code), "see docs/protocol.md, Error codes")
