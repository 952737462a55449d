"""RaftLog: the metadata quorum's replicated log on one member (Kafka's ReplicatedLog and
KafkaMetadataLog): entries with offsets and leader epochs, where each epoch starts, the
snapshot that replaced its prefix, and the checks a leader makes of a fetcher's position.

Invariants: ``entries[i].offset == start_offset + i``; epochs never decrease along the
log; ``_epoch_starts`` holds (epoch, first offset) for each epoch present in ``entries``,
in order; ``snapshot`` (if any) covers every offset below ``start_offset`` and its epoch
is at most the first entry's. Whatever changes the log goes through ``store`` first.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from purgatory.broker.raft.log_store import LoadedLog, LogStore, Snapshot
from purgatory.protocol.raft_messages import RaftEntry, encode_entry

_entry_decoder = msgspec.msgpack.Decoder(RaftEntry)

NO_EPOCH = -1


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


class Diverging(NamedTuple):
    """The fetcher's log diverges from the leader's: the leader's largest epoch up to the
    fetcher's last one, and where it ends in the leader's log."""

    epoch: int
    end_offset: int


class SnapshotNeeded(NamedTuple):
    """The fetcher is below the leader's log start: it must fetch this snapshot."""

    end_offset: int
    epoch: int


class CorruptLog(ValueError):
    """Entries that do not continue this log (wrong offsets, epochs going back)."""


class RaftLog:
    def __init__(self, store: LogStore, loaded: LoadedLog) -> None:
        self.store = store
        self.snapshot: Snapshot | None = loaded.snapshot
        self.start_offset = 0 if self.snapshot is None else self.snapshot.end_offset
        self.entries: list[RaftEntry] = []
        self._encoded: list[bytes] = []
        self._epoch_starts: list[tuple[int, int]] = []
        self.bytes_since_snapshot = 0
        for raw in loaded.entries:
            entry = _entry_decoder.decode(raw)
            if entry.offset != self.end_offset:
                break  # a log whose tail does not follow on: keep what does
            self._add(entry, raw)
        if len(self.entries) != len(loaded.entries):
            store.rewrite(self.snapshot, self._encoded)

    # -- positions -------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.entries)

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry (of the snapshot's, with no entry; 0 when empty)."""
        if self.entries:
            return self.entries[-1].epoch
        return self.snapshot.epoch if self.snapshot is not None else 0

    def last_offset_and_epoch(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.end_offset, self.last_epoch)

    def entry(self, offset: int) -> RaftEntry:
        return self.entries[offset - self.start_offset]

    def read(self, offset: int, max_bytes: int) -> list[bytes]:
        """Encoded entries from ``offset`` (at least one if any), up to ``max_bytes``."""
        at = offset - self.start_offset
        out: list[bytes] = []
        size = 0
        for encoded in self._encoded[at:]:
            if out and size + len(encoded) > max_bytes:
                break
            out.append(encoded)
            size += len(encoded)
        return out

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Where ``epoch`` ends in this log, as Kafka's leader epoch cache answers: for
        the latest epoch, the log end; for an older one, the start of the first later
        epoch, with the largest epoch present that is not above it. With no such epoch
        held (it lies inside the snapshot, or before anything written), the log start and
        NO_EPOCH."""
        if epoch >= self.last_epoch:
            return OffsetAndEpoch(self.end_offset, self.last_epoch)
        previous = NO_EPOCH
        if self.snapshot is not None and self.snapshot.epoch <= epoch:
            previous = self.snapshot.epoch
        end = self.end_offset
        for start_epoch, start in self._epoch_starts:
            if start_epoch > epoch:
                end = start
                break
            previous = start_epoch
        if previous == NO_EPOCH:
            return OffsetAndEpoch(self.start_offset, NO_EPOCH)
        return OffsetAndEpoch(end, previous)

    def validate_fetch(
        self, fetch_offset: int, last_fetched_epoch: int
    ) -> Diverging | SnapshotNeeded | None:
        """The leader's check of a fetcher's position (Kafka's validateOffsetAndEpoch):
        None when the fetcher's log agrees with this one up to ``fetch_offset``."""
        snapshot = self.snapshot
        if fetch_offset < self.start_offset or (
            fetch_offset == self.start_offset
            and snapshot is not None
            and last_fetched_epoch != snapshot.epoch
        ):
            if snapshot is None:  # cannot happen: a log without snapshot starts at 0
                return Diverging(NO_EPOCH, 0)
            return SnapshotNeeded(snapshot.end_offset, snapshot.epoch)
        if fetch_offset == 0:
            return None
        offset, epoch = self.end_offset_for_epoch(last_fetched_epoch)
        if epoch == NO_EPOCH and self.snapshot is not None:
            return SnapshotNeeded(self.snapshot.end_offset, self.snapshot.epoch)
        if epoch != last_fetched_epoch or offset < fetch_offset:
            return Diverging(epoch, offset)
        return None

    # -- changes -------------------------------------------------------------------------

    def append_as_leader(self, epoch: int, records: list[bytes]) -> list[RaftEntry]:
        """Append ``records`` in ``epoch`` (the leader's); the entries they became."""
        if epoch < self.last_epoch:
            raise CorruptLog(f"epoch {epoch} is older than the log's {self.last_epoch}")
        entries = [
            RaftEntry(self.end_offset + i, epoch, record) for i, record in enumerate(records)
        ]
        encoded = [encode_entry(e) for e in entries]
        self.store.append(encoded)
        for entry, raw in zip(entries, encoded, strict=True):
            self._add(entry, raw)
        return entries

    def append_as_follower(self, entries: list[RaftEntry]) -> None:
        """Append entries the leader sent; they must continue this log exactly."""
        expected, epoch = self.end_offset, self.last_epoch
        for entry in entries:
            if entry.offset != expected or entry.epoch < epoch:
                raise CorruptLog(
                    f"entry at offset {entry.offset} epoch {entry.epoch} does not follow "
                    f"offset {expected - 1} epoch {epoch}"
                )
            expected, epoch = expected + 1, entry.epoch
        encoded = [encode_entry(e) for e in entries]
        self.store.append(encoded)
        for entry, raw in zip(entries, encoded, strict=True):
            self._add(entry, raw)

    def truncate_to(self, offset: int) -> int:
        """Drop every entry at ``offset`` and after; how many were dropped. Raises
        CorruptLog below the log start (what a snapshot covers is committed)."""
        if offset >= self.end_offset:
            return 0
        if offset < self.start_offset:
            raise CorruptLog(f"cannot truncate to {offset}, below the log start")
        keep = offset - self.start_offset
        dropped = len(self.entries) - keep
        del self.entries[keep:]
        del self._encoded[keep:]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()
        self.store.rewrite(self.snapshot, self._encoded)
        return dropped

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the whole log by a snapshot the leader sent (the fetcher was below its
        log start)."""
        self.snapshot = snapshot
        self.start_offset = snapshot.end_offset
        self.entries, self._encoded, self._epoch_starts = [], [], []
        self.bytes_since_snapshot = 0
        self.store.rewrite(snapshot, [])

    def compact(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` (of committed state, within this log) and drop the entries it
        covers: replicas behind it fetch the snapshot instead."""
        if not self.start_offset < snapshot.end_offset <= self.end_offset:
            raise CorruptLog(f"snapshot at {snapshot.end_offset} is outside the log")
        drop = snapshot.end_offset - self.start_offset
        self.snapshot = snapshot
        self.start_offset = snapshot.end_offset
        del self.entries[:drop]
        del self._encoded[:drop]
        self._epoch_starts = [(e, s) for e, s in self._epoch_starts if s >= self.start_offset]
        if self.entries and (
            not self._epoch_starts or self._epoch_starts[0][1] != self.start_offset
        ):
            self._epoch_starts.insert(0, (self.entries[0].epoch, self.start_offset))
        self.bytes_since_snapshot = 0
        self.store.rewrite(snapshot, self._encoded)

    def _add(self, entry: RaftEntry, encoded: bytes) -> None:
        if not self._epoch_starts or self._epoch_starts[-1][0] != entry.epoch:
            self._epoch_starts.append((entry.epoch, entry.offset))
        self.entries.append(entry)
        self._encoded.append(encoded)
        self.bytes_since_snapshot += len(encoded)
