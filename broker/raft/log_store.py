"""Where a quorum member keeps what Raft needs to survive a restart (Kafka's
``quorum-state`` file and the ``__cluster_metadata`` log directory): the election state,
the latest snapshot and the log entries after it.

Raft is safe only if a voter never forgets an epoch it voted in nor an entry it
acknowledged, so a voter writes its election state before it answers a vote and its
entries before it reports them fetched. ``FileLogStore`` keeps them in
``metadata.log.dir`` (written and flushed to the operating system: they survive the
process being killed, not the machine losing power); ``MemoryLogStore`` keeps them in
memory: a single-node cluster, and the deterministic simulation, whose simulated disk
outlives a simulated process.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple, Protocol

import msgspec

_LENGTH = struct.Struct(">I")


class ElectionState(msgspec.Struct, frozen=True):
    """A member's durable view of the quorum (Kafka's ElectionState): the latest epoch it
    knows, whom it voted for in it and who leads it (-1: nobody, or not known)."""

    epoch: int = 0
    voted_id: int = -1
    leader_id: int = -1


class Snapshot(msgspec.Struct, array_like=True, gc=False):
    """The metadata records that rebuild the committed state up to ``end_offset`` (the
    first offset after it); ``epoch`` is the epoch of the last entry it covers."""

    end_offset: int
    epoch: int
    records: list[bytes]


class LoadedLog(NamedTuple):
    election: ElectionState
    snapshot: Snapshot | None
    entries: list[bytes]  # encoded RaftEntry, in offset order, from the snapshot's end


class LogStore(Protocol):
    durable: bool  # survives the process (a restart keeps its votes and entries)

    def load(self) -> LoadedLog: ...

    def write_election(self, state: ElectionState) -> None: ...

    def append(self, entries: list[bytes]) -> None: ...

    def rewrite(self, snapshot: Snapshot | None, entries: list[bytes]) -> None: ...

    def close(self) -> None: ...


class MemoryLogStore:
    durable = False

    def __init__(self) -> None:
        self.election = ElectionState()
        self.snapshot: Snapshot | None = None
        self.entries: list[bytes] = []

    def load(self) -> LoadedLog:
        return LoadedLog(self.election, self.snapshot, list(self.entries))

    def write_election(self, state: ElectionState) -> None:
        self.election = state

    def append(self, entries: list[bytes]) -> None:
        self.entries.extend(entries)

    def rewrite(self, snapshot: Snapshot | None, entries: list[bytes]) -> None:
        self.snapshot = snapshot
        self.entries = list(entries)

    def close(self) -> None:
        pass


class StoreError(RuntimeError):
    """A metadata log directory this node cannot use; the message says why and what to do."""


class FileLogStore:
    """Three files in one directory: ``quorum-state`` (JSON, replaced atomically),
    ``snapshot`` (MessagePack, replaced atomically) and ``log`` (entries, each behind a
    4-byte length, appended; a torn last entry, from a kill in mid-write, is dropped at
    load). ``meta.properties`` names the node and cluster the directory belongs to, as
    Kafka's does: another node's directory is refused, never silently adopted."""

    durable = True

    def __init__(self, directory: str | Path, node_id: int, cluster_id: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._check_meta(node_id, cluster_id)
        self._log_path = self.directory / "log"
        self._log = open(self._log_path, "ab")  # noqa: SIM115 (kept open for appends)

    def _check_meta(self, node_id: int, cluster_id: str) -> None:
        meta = self.directory / "meta.properties"
        wanted = {"node.id": str(node_id), "cluster.id": cluster_id}
        if meta.exists():
            found = dict(
                line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line
            )
            for key, value in wanted.items():
                if found.get(key) != value:
                    raise StoreError(
                        f"{self.directory} belongs to {key} {found.get(key)!r}, not {value!r}: "
                        "give each node its own metadata.log.dir (or empty this one to start "
                        "a new cluster)"
                    )
            return
        _replace(meta, "".join(f"{k}={v}\n" for k, v in wanted.items()).encode())

    def load(self) -> LoadedLog:
        election = ElectionState()
        state_path = self.directory / "quorum-state"
        if state_path.exists():
            election = msgspec.json.decode(state_path.read_bytes(), type=ElectionState)
        snapshot = None
        snapshot_path = self.directory / "snapshot"
        if snapshot_path.exists():
            snapshot = msgspec.msgpack.decode(snapshot_path.read_bytes(), type=Snapshot)
        data = self._log_path.read_bytes()
        entries: list[bytes] = []
        at = 0
        while at + 4 <= len(data):
            (size,) = _LENGTH.unpack_from(data, at)
            if at + 4 + size > len(data):
                break
            entries.append(data[at + 4 : at + 4 + size])
            at += 4 + size
        if at != len(data):  # a torn entry at the end: it was never acknowledged
            self.rewrite(snapshot, entries)
        return LoadedLog(election, snapshot, entries)

    def write_election(self, state: ElectionState) -> None:
        _replace(self.directory / "quorum-state", msgspec.json.encode(state))

    def append(self, entries: list[bytes]) -> None:
        out = bytearray()
        for entry in entries:
            out += _LENGTH.pack(len(entry))
            out += entry
        self._log.write(out)
        self._log.flush()

    def rewrite(self, snapshot: Snapshot | None, entries: list[bytes]) -> None:
        if snapshot is not None:
            _replace(self.directory / "snapshot", msgspec.msgpack.encode(snapshot))
        self._log.close()
        out = bytearray()
        for entry in entries:
            out += _LENGTH.pack(len(entry))
            out += entry
        _replace(self._log_path, bytes(out))
        self._log = open(self._log_path, "ab")  # noqa: SIM115

    def close(self) -> None:
        self._log.close()


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (a new file renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
    os.replace(tmp, path)
