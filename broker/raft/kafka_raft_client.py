"""KafkaRaftClient: one member of the metadata quorum (Kafka's KafkaRaftClient, KIP-595,
with KIP-996's pre-vote and check-quorum).

It keeps the log (``RaftLog``), plays its role (``QuorumState``) and tells a listener, in
order, which entries are committed and who leads. The rules:

- A voter that hears from no leader for ``controller.quorum.fetch.timeout.ms`` (or, with
  none known, for a random election timeout) first asks the voters whether they would
  vote for it (pre-vote); only with a majority of yeses does it raise the epoch and ask
  for votes. A voter grants one vote per epoch, to a candidate whose log is at least as
  up to date as its own, and refuses a pre-vote while it still hears from a leader.
- The winner appends an entry of its own epoch, tells the voters (BeginQuorumEpoch), and
  answers their fetches. An entry is committed once a majority of voters hold it and
  the leader's first entry of its epoch (the high watermark); only committed entries
  reach the listener, and the leader tells the listener it leads only once everything
  before its epoch is committed.
- A leader that does not hear from a majority within 1.5 fetch timeouts resigns
  (check-quorum): cut off, it stops acting before a new leader can be elected elsewhere.
- A fetch names the fetcher's position (offset, and the epoch of its last entry); the
  leader answers with entries, or where the fetcher's log diverges (it truncates and
  fetches again), or the snapshot to fetch when it is behind the log start. Fetches that
  find nothing new wait in the Fetch purgatory (``DelayedRaftFetch``).
- A request or answer from a later epoch moves a member to that epoch at once.

Everything runs on one event loop: transitions are plain method calls; network requests
are tasks whose answers are dropped if the role changed meanwhile (``_generation``).
"""

from __future__ import annotations

from purgatory.broker.raft.quorum_elections import QuorumElections
from purgatory.broker.raft.quorum_replication import QuorumReplication


class KafkaRaftClient(QuorumElections, QuorumReplication):
    """One member of the metadata quorum, by the rules above."""
