"""Configs of the metadata quorum and the nodes' roles in it (Kafka's KRaftConfigs and
QuorumConfig): who votes, its timings, and where a member keeps the metadata log."""

from __future__ import annotations

from purgatory.broker.config.addresses import parse_members
from purgatory.broker.config.config_def import ConfigDef, at_least, parses
from purgatory.broker.metadata.scram_parser import parse_scram_arguments

ROLES = ("broker", "controller")


def parse_roles(value: str) -> tuple[str, ...]:
    """``broker``, ``controller`` or both (``broker,controller``); empty: not given."""
    roles = tuple(r.strip() for r in value.split(",") if r.strip())
    for role in roles:
        if role not in ROLES:
            raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    if len(set(roles)) != len(roles):
        raise ValueError(f"a role is named twice in {value!r}")
    return roles


QUORUM_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "process.roles",
        str,
        "",
        "What this node is: `broker` (holds partitions, serves clients), `controller` (a "
        "voter of the metadata quorum) or both, `broker,controller` (Kafka's combined "
        "mode). Empty: both for a node in `controller.quorum.voters`, `broker` otherwise.",
        parses(parse_roles),
    ),
    ConfigDef(
        "controller.quorum.voters",
        str,
        "",
        "The metadata quorum's voters, `id@host:port,...`: a majority of them must agree "
        "before any metadata change (topics, leaders, ISRs, fenced brokers) takes effect, "
        "and the quorum's leader is the active controller. Empty: every member of "
        "`cluster.members` (in a small cluster every node is broker and controller).",
        parses(parse_members),
    ),
    ConfigDef(
        "controller.quorum.election.timeout.ms",
        int,
        1000,
        "A voter that knows no leader waits a random time between this and twice this "
        "(the first time after it starts: between 0 and this) before it asks the others "
        "whether they would elect it (a pre-vote, KIP-996), then stands; a candidate that "
        "wins no majority within it backs off and stands again.",
        at_least(1),
    ),
    ConfigDef(
        "controller.quorum.fetch.timeout.ms",
        int,
        2000,
        "A voter that cannot fetch from the leader for this long stands for election; a "
        "leader that no majority of voters fetched from within 1.5 times this resigns "
        "(check-quorum), so a leader cut off from the others stops acting.",
        at_least(4),
    ),
    ConfigDef(
        "controller.quorum.election.backoff.max.ms",
        int,
        1000,
        "The longest random wait of a candidate that lost an election before it stands "
        "again (it grows with each loss).",
        at_least(1),
    ),
    ConfigDef(
        "controller.quorum.request.timeout.ms",
        int,
        2000,
        "How long a quorum member, and a broker asking the active controller (register, "
        "heartbeat, AlterPartition, forwarded topic changes), waits for an answer.",
        at_least(1),
    ),
    ConfigDef(
        "controller.quorum.retry.backoff.ms",
        int,
        20,
        "Pause before a quorum member sends a failed request again.",
        at_least(0),
    ),
    ConfigDef(
        "metadata.log.dir",
        str,
        "",
        "Where this node keeps the metadata log, its snapshot and its quorum state (its "
        "votes), so that a restarted controller remembers them, as Raft needs. Written "
        "and flushed to the operating system before it is acknowledged: it survives the "
        "process being killed, not the machine losing power. Empty: in memory, which is "
        "fine for one node; a voter of several that restarts without it forgets its votes "
        "and entries (warned at start). `purgatory cluster`, the container and "
        "`purgatory.testing.Cluster` give each node a directory.",
    ),
    ConfigDef(
        "metadata.log.max.record.bytes.between.snapshots",
        int,
        20971520,
        "After this many bytes of metadata records, a node snapshots the committed "
        "metadata and drops the log before it; a replica behind that fetches the snapshot.",
        at_least(1),
    ),
    ConfigDef(
        "bootstrap.scram.credentials",
        str,
        "",
        "SCRAM users the first active controller of an empty metadata log writes into it "
        "(as `kafka-storage format --add-scram` seeds Kafka's): "
        "`SCRAM-SHA-512=[name=alice,password=alice-secret]`, optionally with `iterations` "
        "(4096..16384, default 4096), or `salt` and `saltedpassword` (base64) instead of "
        "`password`; several separated by whitespace. `purgatory broker --add-scram` sets "
        "it. Read once, when the metadata log is new: later changes are "
        "AlterUserScramCredentials (`purgatory configs --entity-type users`).",
        parses(parse_scram_arguments),
        sensitive=True,
    ),
)
