"""``purgatory leader-election``: elect preferred or unclean leaders of some partitions (or
of all), with kafka-leader-election's options, JSON file and output (and ``--json``)."""

from __future__ import annotations

import argparse
import json

from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.output import err, parse_file, print_json
from purgatory.clients.cli.tools import _run
from purgatory.protocol import messages as m
from purgatory.protocol.errors import ErrorCode, error_name

TopicPartition = tuple[str, int]
TYPES = {"PREFERRED": m.PREFERRED_ELECTION, "UNCLEAN": m.UNCLEAN_ELECTION}
# The exception a Kafka client raises for each error (kafka-leader-election prints it).
_EXCEPTIONS = {
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "PreferredLeaderNotAvailableException",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "EligibleLeadersNotAvailableException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
    ErrorCode.INVALID_REQUEST: "InvalidRequestException",
    ErrorCode.NOT_CONTROLLER: "NotControllerException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
}


class ElectionDataError(ValueError):
    """The JSON file is not what kafka-leader-election reads."""


def parse_election_json(text: str) -> list[TopicPartition]:
    """Kafka's file: ``{"partitions": [{"topic": T, "partition": P}, ...]}``. Raises
    ElectionDataError in kafka-leader-election's words where it has them."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ElectionDataError(f"the file is not JSON: {exc}") from None
    if document is None:
        raise ElectionDataError("Replica election data is empty")
    if not isinstance(document, dict):
        raise ElectionDataError('the file must hold a JSON object with a "partitions" list')
    partitions = document.get("partitions")
    if partitions is None:
        raise ElectionDataError('Replica election data is missing "partitions" field')
    if not isinstance(partitions, list):
        raise ElectionDataError('"partitions" must be a list of {"topic", "partition"} objects')
    asked: list[TopicPartition] = []
    for entry in partitions:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        index = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise ElectionDataError(f"a partition without a topic name: {entry!r}")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ElectionDataError(f"partition must be an integer >= 0: {entry!r}")
        asked.append((topic, index))
    repeated = sorted({f"{t}-{p}" for t, p in asked if asked.count((t, p)) > 1})
    if repeated:
        raise ElectionDataError(
            f"Replica election data contains duplicate partitions: [{', '.join(repeated)}]"
        )
    return asked


def check_options(args: argparse.Namespace) -> str | None:
    """kafka-leader-election's rules for the options; what is wrong, or None."""
    given = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(given) != 1:
        return (
            "One and only one of the following options is required: --topic, "
            "--all-topic-partitions, --path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        return "Missing required option(s): --partition"
    if args.topic is None and args.partition is not None:
        return "Option --partition is only allowed if --topic is used"
    if args.election_type.upper() not in TYPES:
        return f"--election-type must be PREFERRED or UNCLEAN, not {args.election_type!r}"
    return None


def leader_election_command(args: argparse.Namespace) -> int:
    problem = check_options(args)
    if problem:
        err.print(f"[red]purgatory leader-election: {problem}[/red]", soft_wrap=True)
        return 1
    partitions: list[TopicPartition] | None = None
    if args.topic is not None:
        partitions = [(args.topic, args.partition)]
    elif args.path_to_json_file is not None:
        partitions = parse_file(args.path_to_json_file, parse_election_json, "leader-election")
        if partitions is None:
            return 1
    return _run(_elect(args, partitions), "leader-election", args.bootstrap)


async def _elect(args: argparse.Namespace, partitions: list[TopicPartition] | None) -> int:
    kind = args.election_type.upper()
    async with admin_client(args) as admin:
        results = await admin.elect_leaders(TYPES[kind], partitions, timeout_ms=args.timeout_ms)
    rows = sorted(results.items())
    failed = [(tp, code, message) for tp, (code, message) in rows if _failed(code)]
    if args.json:
        print_json(
            [
                {
                    "topic": topic,
                    "partition": index,
                    "error": error_name(code) if code else None,
                    "message": message,
                }
                for (topic, index), (code, message) in rows
            ]
        )
        return 1 if failed else 0
    elected = [f"{t}-{p}" for (t, p), (code, _) in rows if code == ErrorCode.NONE]
    noop = [f"{t}-{p}" for (t, p), (code, _) in rows if code == ErrorCode.ELECTION_NOT_NEEDED]
    if elected:
        print(
            f"Successfully completed leader election ({kind}) for partitions {', '.join(elected)}"
        )
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for (topic, index), code, message in failed:
        print(
            f"Error completing leader election ({kind}) for partition: {topic}-{index}: "
            f"{_exception(code, message)}"
        )
    if failed:
        err.print(f"[red]{len(failed)} replica(s) could not be elected[/red]")
        return 1
    return 0


def _failed(code: int) -> bool:
    return code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)


def _exception(code: int, message: str | None) -> str:
    """As a Kafka client shows the error: its exception class and message."""
    name = _EXCEPTIONS.get(code, f"{error_name(code)}")  # type: ignore[call-overload]
    return f"org.apache.kafka.common.errors.{name}: {message or error_name(code)}"
