"""`purgatory admin quorum`: the metadata quorum as its leader sees it, as Kafka's
`kafka-metadata-quorum describe --status` and `--replication` print it."""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

from purgatory.clients.cli.client_config import admin_client
from purgatory.clients.cli.tools import _run
from purgatory.protocol import raft_messages as rm


def quorum_command(args: argparse.Namespace) -> int:
    return _run(_quorum(args), "admin quorum", args.bootstrap)


async def _quorum(args: argparse.Namespace) -> int:
    async with admin_client(args) as admin:
        quorum = await admin.describe_quorum()
        cluster = await admin.describe_cluster()
    rows = replication_rows(quorum)
    if args.json:
        status = status_of(quorum, cluster["cluster_id"], rows)
        print(json.dumps({**status, "replicas": rows} if args.replication else status, indent=2))
    elif args.replication:
        header = (
            "NodeId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        )
        print("\t".join(header))
        for r in rows:
            print(
                "\t".join(
                    str(v)
                    for v in (
                        r["node_id"],
                        r["log_end_offset"],
                        r["lag"],
                        r["last_fetch_timestamp"],
                        r["last_caught_up_timestamp"],
                        r["status"],
                    )
                )
            )
    else:
        for key, value in status_of(quorum, cluster["cluster_id"], rows).items():
            label = "".join(word.capitalize() for word in key.split("_"))
            print(f"{label + ':':<24}{value}")
    return 0


def replication_rows(quorum: rm.DescribeQuorumResponse) -> list[dict[str, Any]]:
    def row(state: rm.QuorumReplicaState, status: str) -> dict[str, Any]:
        end = state.log_end_offset
        return {
            "node_id": state.replica_id,
            "log_end_offset": end,
            "lag": max(0, quorum.high_watermark - end) if end >= 0 else None,
            "last_fetch_timestamp": _when(state.last_fetch_timestamp),
            "last_caught_up_timestamp": _when(state.last_caught_up_timestamp),
            "status": status,
        }

    rows = [
        row(v, "Leader" if v.replica_id == quorum.leader_id else "Follower")
        for v in quorum.current_voters
    ]
    return rows + [row(o, "Observer") for o in quorum.observers]


def status_of(
    quorum: rm.DescribeQuorumResponse, cluster_id: str, rows: list[dict[str, Any]]
) -> dict[str, Any]:
    followers = [r for r in rows if r["status"] == "Follower"]
    caught_up = [
        s.last_caught_up_timestamp
        for s in quorum.current_voters
        if s.replica_id != quorum.leader_id and s.last_caught_up_timestamp >= 0
    ]
    leader_now = next(
        (
            s.last_caught_up_timestamp
            for s in quorum.current_voters
            if s.replica_id == quorum.leader_id
        ),
        -1,
    )
    return {
        "cluster_id": cluster_id,
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "max_follower_lag": max((r["lag"] or 0 for r in followers), default=0),
        "max_follower_lag_time_ms": max((leader_now - t for t in caught_up), default=0)
        if leader_now >= 0
        else None,
        "current_voters": sorted(s.replica_id for s in quorum.current_voters),
        "current_observers": sorted(s.replica_id for s in quorum.observers),
    }


def _when(ms: int) -> str | None:
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds"
    )
