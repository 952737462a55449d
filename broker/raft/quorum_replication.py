"""QuorumReplication: how the metadata log reaches every member: a follower's fetches
(entries, a diverging epoch to truncate to, or a snapshot to fetch), and the leader's
answers to them, long-polled in the Fetch purgatory; DescribeQuorum."""

from __future__ import annotations

import asyncio
from typing import Any

from purgatory.broker.raft.delayed_raft_fetch import METADATA_PARTITION, DelayedRaftFetch
from purgatory.broker.raft.leader_state import LeaderState
from purgatory.broker.raft.log_store import Snapshot
from purgatory.broker.raft.quorum_member import QuorumMember
from purgatory.broker.raft.quorum_state import (
    NO_LEADER,
    FollowerState,
)
from purgatory.broker.raft.raft_log import NO_EPOCH, CorruptLog, Diverging, SnapshotNeeded
from purgatory.protocol import messages as m
from purgatory.protocol import raft_messages as rm
from purgatory.protocol.api import ApiKey
from purgatory.protocol.errors import ErrorCode


class QuorumReplication(QuorumMember):
    # -- fetching: the follower's side -----------------------------------------------------------

    def _fetch_target(self) -> int:
        state = self.quorum.state
        if state.leader_id >= 0 and state.leader_id != self.node_id:
            return state.leader_id
        others = sorted(self.voters - {self.node_id})
        return self.rng.choice(others) if others else NO_LEADER

    def _fetch(self) -> None:
        target = self._fetch_target()
        if target < 0:
            return
        state = self.quorum.state
        epoch = state.epoch if isinstance(state, FollowerState) else -1
        log = self.log
        request = m.FetchRequestV2(
            self.node_id,
            self.config.fetch_max_wait_ms,
            1,
            self.config.fetch_max_bytes,
            [
                m.FetchTopicV2(
                    rm.METADATA_TOPIC,
                    [
                        m.FetchPartitionV2(
                            0,
                            log.end_offset,
                            self.config.fetch_max_bytes,
                            epoch,
                            log.last_epoch,
                            self.high_watermark,
                        )
                    ],
                )
            ],
            self.cluster_id,
        )
        self._rpc(
            target,
            ApiKey.FETCH,
            request,
            lambda result: self._fetched(target, result),
            self.config.fetch_max_wait_ms + self.config.request_timeout_ms,
        )

    def _fetched(self, source: int, result: Any) -> None:
        if isinstance(result, BaseException):
            self._retry_later(self._fetch)
            return
        try:
            data = result.responses[0].partitions[0]
        except (AttributeError, IndexError):
            self._retry_later(self._fetch)
            return
        if self._transition_if_newer(data.leader_epoch, data.leader_id):
            return
        if data.error_code:
            self._retry_later(self._fetch)
            return
        state = self.quorum.state
        if isinstance(state, FollowerState):
            state.last_fetch_ms = self.scheduler.now_ms()
            self._set_timer(self.config.fetch_timeout_ms, self._fetch_timed_out)
        if data.snapshot_end_offset >= 0:
            self._fetch_snapshot(source, data.snapshot_end_offset, data.snapshot_epoch)
            return
        if data.diverging_end_offset >= 0 or data.diverging_epoch != NO_EPOCH:
            self._truncate_diverging(Diverging(data.diverging_epoch, data.diverging_end_offset))
        elif data.records:
            try:
                self.log.append_as_follower(rm.decode_entries(data.records))
            except (CorruptLog, ValueError) as exc:
                self.logger.error("quorum_fetch_refused", source=source, error=str(exc))
                self._retry_later(self._fetch)
                return
        self._set_high_watermark(min(data.high_watermark, self.log.end_offset))
        self._fetch()

    def _truncate_diverging(self, diverging: Diverging) -> None:
        """The leader's log diverges from ours at ``diverging``: cut ours back to where that
        epoch ends on both sides (then the next fetch checks again)."""
        log = self.log
        if diverging.epoch == NO_EPOCH:
            target = diverging.end_offset
        else:
            own = log.end_offset_for_epoch(diverging.epoch)
            target = min(
                diverging.end_offset, own.offset if own.epoch != NO_EPOCH else log.start_offset
            )
        target = max(target, log.start_offset)
        if target < self.high_watermark:
            # Raft never diverges below a committed entry; refuse rather than lose one.
            self.truncations_below_high_watermark += 1
            self.logger.error(
                "quorum_truncation_below_high_watermark",
                to_offset=target,
                high_watermark=self.high_watermark,
            )
            return
        dropped = log.truncate_to(target)
        if dropped:
            self.logger.info("quorum_log_truncated", to_offset=target, entries=dropped)

    def _fetch_snapshot(self, source: int, end_offset: int, epoch: int) -> None:
        request = rm.FetchSnapshotRequest(
            self.cluster_id, self.node_id, self.quorum.epoch, end_offset, epoch
        )

        def answered(result: Any) -> None:
            if isinstance(result, BaseException) or result.error_code:
                self._retry_later(self._fetch)
                return
            # Kafka's truncateToLatestSnapshot: the snapshot replaces this log when it is
            # later, by (epoch, offset), than the log's last entry: what this log has past
            # the snapshot's end is then a suffix no leader committed. Else this log moved
            # past it meanwhile, and fetches on.
            if (result.snapshot_epoch, result.snapshot_end_offset) <= (
                self.log.last_epoch,
                self.log.end_offset,
            ):
                self._fetch()
                return
            self.log.install_snapshot(
                Snapshot(result.snapshot_end_offset, result.snapshot_epoch, list(result.records))
            )
            self.logger.info("quorum_snapshot_loaded", end_offset=result.snapshot_end_offset)
            self._set_high_watermark(result.snapshot_end_offset)
            self._fetch()

        self._rpc(source, ApiKey.FETCH_SNAPSHOT, request, answered)

    # -- fetching: the leader's side -------------------------------------------------------------

    def handle_fetch(self, request: m.FetchRequestV2) -> m.FetchResponseV2 | asyncio.Future[Any]:
        """A replica's fetch of the metadata log (one topic, ``__cluster_metadata``, one
        partition): answered now, or parked until there is something new."""
        try:
            (topic,) = request.topics
            (partition,) = topic.partitions
        except ValueError:
            return self.fetch_error(ErrorCode.INVALID_REQUEST)
        if topic.topic != rm.METADATA_TOPIC or partition.partition != 0:
            return self.fetch_error(ErrorCode.INVALID_REQUEST)
        refused = self._refuse_foreign(request.cluster_id or "")
        if refused is not None:
            return self.fetch_error(refused)
        state = self.quorum.state
        if partition.current_leader_epoch > state.epoch:
            self._transition_if_newer(partition.current_leader_epoch, NO_LEADER)
            return self.fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if not isinstance(state, LeaderState):
            return self.fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if 0 <= partition.current_leader_epoch < state.epoch:
            return self.fetch_error(ErrorCode.FENCED_LEADER_EPOCH)
        if self.log.validate_fetch(partition.fetch_offset, partition.last_fetched_epoch):
            return self.fetch_answer(partition)
        if state.update_replica(
            request.replica_id,
            partition.fetch_offset,
            partition.high_watermark,
            self.log.end_offset,
            self.scheduler.now_ms(),
        ):
            self._set_high_watermark(state.high_watermark)
        if self.on_fetch is not None:
            self.on_fetch()
        if request.max_wait_ms <= 0 or self._fetch_satisfied(partition, state.epoch):
            return self.fetch_answer(partition)
        operation = DelayedRaftFetch(self, partition, state.epoch, request.max_wait_ms)
        if self.purgatory.try_complete_else_watch(operation, (METADATA_PARTITION,)):
            answer: m.FetchResponseV2 = operation.response.result()
            return answer
        return operation.response

    def _fetch_satisfied(self, partition: m.FetchPartitionV2, epoch: int) -> bool:
        """DelayedRaftFetch's cases A-C: the leadership changed, there are entries past the
        fetch offset, or a high watermark the fetcher has not seen."""
        state = self.quorum.state
        return (
            not isinstance(state, LeaderState)
            or state.epoch != epoch
            or self.log.end_offset > partition.fetch_offset
            or self.high_watermark > partition.high_watermark
        )

    def fetch_answer(self, partition: m.FetchPartitionV2, wait_ms: int = 0) -> m.FetchResponseV2:
        """The answer to a fetch from where it stands now: entries, where the fetcher's log
        diverges, or the snapshot to fetch."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return self.fetch_error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log = self.log
        check = log.validate_fetch(partition.fetch_offset, partition.last_fetched_epoch)
        data = m.PartitionDataV2(
            0, ErrorCode.NONE, self.high_watermark, log.start_offset, b"", self.node_id, state.epoch
        )
        if isinstance(check, SnapshotNeeded):
            data.snapshot_end_offset, data.snapshot_epoch = check.end_offset, check.epoch
        elif isinstance(check, Diverging):
            data.diverging_epoch, data.diverging_end_offset = check.epoch, check.end_offset
        elif partition.fetch_offset < log.end_offset:
            data.records = rm.encode_entries(
                log.read(partition.fetch_offset, self.config.fetch_max_bytes)
            )
        return m.FetchResponseV2([m.FetchableTopicResponseV2(rm.METADATA_TOPIC, [data])], wait_ms)

    def fetch_error(self, code: ErrorCode) -> m.FetchResponseV2:
        data = m.PartitionDataV2(0, code, -1, -1, b"", self.quorum.leader_id, self.quorum.epoch)
        return m.FetchResponseV2([m.FetchableTopicResponseV2(rm.METADATA_TOPIC, [data])])

    def handle_fetch_snapshot(self, request: rm.FetchSnapshotRequest) -> rm.FetchSnapshotResponse:
        state = self.quorum.state
        snapshot = self.log.snapshot
        refused = self._refuse_foreign(request.cluster_id)
        if refused is None and not isinstance(state, LeaderState):
            refused = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if refused is None and (
            snapshot is None
            or (snapshot.end_offset, snapshot.epoch)
            != (request.snapshot_end_offset, request.snapshot_epoch)
        ):
            refused = ErrorCode.SNAPSHOT_NOT_FOUND
        if refused is not None or snapshot is None:
            return rm.FetchSnapshotResponse(
                refused or ErrorCode.SNAPSHOT_NOT_FOUND,
                self.quorum.leader_id,
                self.epoch,
                -1,
                -1,
                [],
            )
        return rm.FetchSnapshotResponse(
            ErrorCode.NONE,
            self.node_id,
            self.epoch,
            snapshot.end_offset,
            snapshot.epoch,
            snapshot.records,
        )

    def handle_describe_quorum(self) -> rm.DescribeQuorumResponse:
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return rm.DescribeQuorumResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"node {self.node_id} does not lead the quorum (leader: {state.leader_id})",
                state.leader_id,
                state.epoch,
                -1,
                [],
                [],
            )
        now, wall = self.scheduler.now_ms(), self.scheduler.wall_ms()

        def replica(replica_id: int, progress: Any) -> rm.QuorumReplicaState:
            def stamp(ms: int) -> int:
                return -1 if ms < 0 else wall - (now - ms)

            return rm.QuorumReplicaState(
                replica_id,
                progress.end_offset,
                stamp(progress.last_fetch_ms),
                stamp(progress.last_caught_up_ms),
            )

        return rm.DescribeQuorumResponse(
            ErrorCode.NONE,
            None,
            self.node_id,
            state.epoch,
            self.high_watermark,
            [replica(v, p) for v, p in state.voters.items()],
            [replica(o, p) for o, p in sorted(state.observers.items())],
        )

    def replica_applied_offsets(self) -> dict[int, int]:
        """The leader's view of how far each replica has applied the log (from the high
        watermark its latest fetch reported); this leader's own is its listener's."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return {}
        applied = {
            r: p.applied_offset for r, p in (*state.voters.items(), *state.observers.items())
        }
        applied[self.node_id] = self._listener_offset
        return applied
