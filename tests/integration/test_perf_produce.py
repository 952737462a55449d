"""`perf produce` finds where to send (the topic's partitions and the broker leading them)
and, with --echo, takes turns with the echo server."""

from __future__ import annotations

import json

import pytest

from purgatory.cli import main
from purgatory.clients import AdminClient
from purgatory.clients.perf.produce import _prepare
from purgatory.protocol.errors import KafkaError
from purgatory.testing import Cluster
from tests.support import bootstrap, running_cluster, wait_until

FAST_FENCING = {"broker_heartbeat_interval_ms": 50, "broker_session_timeout_ms": 600}


async def test_a_new_topic_is_written_at_the_broker_leading_its_first_partitions() -> None:
    async with running_cluster(2) as brokers:
        host, port, partitions = await _prepare(bootstrap(brokers[1:]), "fresh", 4)
        states = [brokers[0].metadata.partition("fresh", i) for i in range(4)]
        leader_of = {s.partition_index: s.leader_id for s in states if s is not None}
        first = min(leader_of.values())
        assert (host, port) == ("127.0.0.1", brokers[first].port)
        assert partitions == [i for i, leader in sorted(leader_of.items()) if leader == first]


async def test_a_partition_without_a_leader_is_waited_for_then_named_in_the_error() -> None:
    async with running_cluster(3, **FAST_FENCING) as brokers:
        async with AdminClient(bootstrap(brokers)) as admin:
            await admin.create_topic("t", 3, replication_factor=1)
        victim = next(b for b in brokers if b.controller is None)  # the quorum keeps a majority
        [lost] = [p.index for p in victim.replica_manager.partitions.values()]
        survivor = next(b for b in brokers if b is not victim)
        await victim.stop()
        await wait_until(
            lambda: (s := survivor.metadata.partition("t", lost)) is not None and s.leader_id == -1,
            message="the stopped broker's partition has no leader",
        )
        with pytest.raises(
            KafkaError, match=rf"partitions \[{lost}\] still have no leader after 0.3 s"
        ):
            await _prepare(bootstrap([survivor]), "t", 3, leader_timeout_s=0.3)


def test_beside_echo_the_broker_and_the_echo_server_take_turns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`perf produce --echo --rounds 3`: three broker runs sharing the records, each
    followed by an echo run of as many requests; the totals and the fraction are over
    all rounds, and each round's figures are listed."""
    with Cluster(brokers=1) as cluster:
        argv = ["perf", "produce", "--bootstrap", cluster.bootstrap_servers, "--json"]
        assert main([*argv, "--num-records", "1000", "--echo", "--rounds", "3"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert cluster.partition("perf").high_watermark == 1000
    assert (summary["requests"], summary["echo"]["requests"]) == (1000, 1000)
    assert (summary["errors"], summary["echo"]["errors"]) == (0, 0)
    rounds = summary["rounds"]
    assert len(rounds) == 3
    assert all(r["fraction_of_echo"] > 0 for r in rounds)
    rates = summary["requests_per_sec"], summary["echo"]["requests_per_sec"]
    assert summary["fraction_of_echo"] == pytest.approx(rates[0] / rates[1], abs=0.001)


def test_rounds_without_echo_or_beyond_the_requests_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["perf", "produce", "--bootstrap", "127.0.0.1:1", "--num-records", "4"]
    assert main([*argv, "--rounds", "2"]) == 2
    assert "give --echo" in capsys.readouterr().err
    assert main([*argv, "--echo", "--rounds", "5"]) == 2
    assert "--rounds must be 1..4" in capsys.readouterr().err
