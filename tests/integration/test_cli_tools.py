"""The console tools as a newcomer meets them, real CLI processes against in-process
brokers: --json on every read command, whole tables in a pipe, addresses from the
environment, --producer-property, null keys, a group that rebalances, and Ctrl-C that
always ends with a summary."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from purgatory.broker.ops.faults import parse_spec
from purgatory.broker.server import Broker
from purgatory.clients import AdminClient, Producer
from purgatory.protocol.errors import ErrorCode
from tests.support import bootstrap, running_cluster, wait_until

PURGATORY = [sys.executable, "-m", "purgatory"]


async def cli(
    *args: str, env: dict[str, str] | None = None, stdin: bytes = b""
) -> tuple[int, str, str]:
    """``purgatory ARGS`` with stdout and stderr pipes (never a terminal)."""
    proc = await asyncio.create_subprocess_exec(
        *PURGATORY, *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *PURGATORY, *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_every_read_command_prints_one_json_document_with_json(broker: Broker) -> None:
    boot = bootstrap([broker])
    admin = f"http://127.0.0.1:{broker.admin_port}"
    async with AdminClient(boot) as client:
        await client.create_topic("t", 2)
    reads = {
        ("topics", "list"): list,
        ("topics", "describe", "t"): list,
        ("consumer-groups", "--list"): list,
        ("admin", "config", "get", "num.partitions"): list,
        ("admin", "config", "set", "replica.lag.time.max.ms", "10000"): dict,
        ("admin", "fault", "list"): dict,
        ("admin", "elect-leaders", "--election-type", "preferred", "--topic", "t"): list,
        ("admin", "quorum"): dict,
    }
    for argv, kind in reads.items():
        where = (
            ("--admin", admin)
            if argv[0] == "admin" and argv[1] in ("config", "fault")
            else ("--bootstrap", boot)
        )
        code, out, err = await cli(*argv, "--json", *where)
        assert code == 0, (argv, err)
        assert isinstance(json.loads(out), kind), argv  # the whole of stdout: one document
        assert "\x1b[" not in out, argv  # no colour
    code, out, _ = await cli("topics", "list", "--json", "--bootstrap", boot)
    assert json.loads(out) == ["t"]
    code, out, _ = await cli(
        "admin", "config", "set", "replica.lag.time.max.ms", "12000", "--json", "--admin", admin
    )
    assert json.loads(out) == {"name": "replica.lag.time.max.ms", "old": 10000, "new": 12000}


async def test_a_table_in_a_pipe_keeps_every_name_and_value_whole(broker: Broker) -> None:
    admin = f"http://127.0.0.1:{broker.admin_port}"
    code, out, err = await cli("admin", "config", "get", "--admin", admin)
    assert code == 0, err
    assert "…" not in out
    for name in ("remote.storage.latency.distribution", "group.initial.rebalance.delay.ms"):
        [row] = [line for line in out.splitlines() if f" {name} " in line]
        assert row.count("│") == 6 and " default " in row, row  # 5 columns, one line


async def test_topics_create_takes_kafkas_configs_and_describe_shows_the_ones_set(
    broker: Broker,
) -> None:
    boot = bootstrap([broker])
    code, out, err = await cli(
        "topics", "create", "compacted", "--config", "cleanup.policy=compact, delete",
        "--config", "min.compaction.lag.ms=100", "--bootstrap", boot,
    )  # fmt: skip
    assert code == 0 and "created topic compacted" in out, err
    code, out, err = await cli("topics", "describe", "compacted", "--json", "--bootstrap", boot)
    assert code == 0, err
    [topic] = json.loads(out)
    assert topic["configs"] == {"cleanup.policy": "compact,delete", "min.compaction.lag.ms": "100"}
    code, out, _ = await cli("topics", "describe", "compacted", "--bootstrap", boot)
    assert "cleanup.policy=compact,delete,min.compaction.lag.ms=100" in out
    # A bad value: refused in Kafka's words.
    code, _, err = await cli(
        "topics", "create", "refused", "--config", "segment.ms=0", "--bootstrap", boot
    )
    assert code == 1
    assert "Invalid value 0 for configuration segment.ms: Value must be at least 1" in err


async def test_the_bootstrap_and_admin_address_come_from_the_environment(
    broker: Broker,
) -> None:
    env = {
        "PURGATORY_BOOTSTRAP": bootstrap([broker]),
        "PURGATORY_ADMIN": f"http://127.0.0.1:{broker.admin_port}",
    }
    code, out, err = await cli("topics", "create", "from-env", env=env)
    assert code == 0 and "created topic from-env" in out, err
    code, out, _ = await cli("admin", "config", "get", "num.partitions", "--json", env=env)
    assert code == 0 and json.loads(out)[0]["name"] == "num.partitions"
    # The flag wins over the environment.
    code, _, err = await cli("topics", "list", "--bootstrap", "127.0.0.1:1", env=env)
    assert code == 1 and "127.0.0.1:1" in err


async def test_a_producer_property_reaches_the_producer_and_a_flag_wins(broker: Broker) -> None:
    boot = bootstrap([broker])
    lines = b"short\n" + b"x" * 300 + b"\n"
    code, _, err = await cli(
        "produce", "t", "--producer-property", "max.request.size=200", "--bootstrap", boot,
        stdin=lines,
    )  # fmt: skip
    assert code == 1
    assert "line 2: not sent: MESSAGE_TOO_LARGE" in err and "max.request.size 200" in err, err
    code, _, err = await cli(
        "produce", "t", "--producer-property", "max.request.size=200",
        "--max-request-size", "1048576", "--bootstrap", boot, stdin=lines,
    )  # fmt: skip
    assert code == 0 and "produced 2 of 2" in err, err
    code, _, err = await cli("produce", "t", "--producer-property", "linger=5", stdin=lines)
    assert code == 2 and "'linger' is not a producer config this tool sets" in err


async def test_consume_prints_a_missing_key_or_value_as_null(broker: Broker) -> None:
    boot = bootstrap([broker])
    async with Producer(boot) as producer:
        for key, value in ((None, b"v1"), (b"k2", None), (b"", b"v3")):
            await producer.send("nulls", value, key, partition=0)
        await producer.flush()
    code, out, err = await cli(
        "consume", "nulls", "--from-beginning", "--print-key", "--max-records", "3",
        "--bootstrap", boot,
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == ["null\tv1", "k2\tnull", "\tv3"]
    assert "Processed a total of 3 messages" in err


async def test_consumer_groups_says_a_group_is_rebalancing() -> None:
    # A first member's join waits out the initial rebalance delay: the group stays in
    # PreparingRebalance meanwhile.
    async with running_cluster(1, group_initial_rebalance_delay_ms=60000) as brokers:
        boot = bootstrap(brokers)
        async with AdminClient(boot) as admin:
            await admin.create_topic("r", 1)
        member = await start("consume", "r", "--group", "joining", "--bootstrap", boot)
        try:
            await wait_until(
                lambda: (
                    (g := brokers[0].group_coordinator.groups.get("joining")) is not None
                    and g.state.value == "PreparingRebalance"
                ),
                timeout=30,
                message="the group preparing a rebalance",
            )
            code, _, err = await cli("consumer-groups", "--describe", "--group", "joining",
                                     "--bootstrap", boot)  # fmt: skip
            assert code == 0, err
            assert "Warning: Consumer group 'joining' is rebalancing." in err
        finally:
            member.kill()
            await member.wait()
        code, out, err = await cli(
            "consumer-groups", "--describe", "--group", "nosuch", "--json", "--bootstrap", boot
        )
        assert code == 1 and json.loads(out) == []
        assert "Error: Consumer group 'nosuch' does not exist." in err


async def test_ctrl_c_ends_consume_with_the_count_it_printed(broker: Broker) -> None:
    boot = bootstrap([broker])
    async with Producer(boot) as producer:
        await (await producer.send("c", b"first", partition=0))
    proc = await start("consume", "c", "--from-beginning", "--bootstrap", boot)
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"first\n"
    proc.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130
    assert "Processed a total of 1 messages" in err.decode()
    assert "Traceback" not in err.decode()


async def test_ctrl_c_ends_perf_produce_with_a_summary_of_what_was_acknowledged(
    broker: Broker,
) -> None:
    boot = bootstrap([broker])
    proc = await start(
        "perf", "produce", "--topic", "slow", "--num-records", "1000000", "--throughput", "200",
        "--json", "--bootstrap", boot,
    )  # fmt: skip
    await wait_until(
        lambda: (
            ("slow", 0) in broker.replica_manager.partitions
            and broker.replica_manager.partitions[("slow", 0)].log.log_end_offset > 0
        ),
        timeout=30,
        message="perf produce under way",
    )
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130, err.decode()
    summary = json.loads(out)
    assert summary["interrupted"] is True
    # The first Ctrl-C waits for the requests in flight: all that arrived is counted.
    end = broker.replica_manager.partitions[("slow", 0)].log.log_end_offset
    assert 0 < summary["records"] == end < 1000000


async def test_ctrl_c_ends_perf_consume_with_its_summary(broker: Broker) -> None:
    boot = bootstrap([broker])
    async with AdminClient(boot) as admin:
        await admin.create_topic("empty", 1)
    # Every fetch fails (retriably): the consumer is in its loop once one has.
    broker.faults.add(
        parse_spec({"name": "no-fetch", "kind": "error", "api": "Fetch",
                    "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER.name})
    )  # fmt: skip
    proc = await start(
        "perf", "consume", "--topic", "empty", "--timeout-ms", "600000", "--json",
        "--bootstrap", boot,
    )  # fmt: skip
    await wait_until(
        lambda: broker.faults.describe()[0]["applied"] > 0, timeout=30, message="a fetch"
    )
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130, err.decode()
    summary = json.loads(out)
    assert (summary["interrupted"], summary["records"]) == (True, 0)
