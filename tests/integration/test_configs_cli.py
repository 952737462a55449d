"""``purgatory configs`` (kafka-configs' options) against an in-process 3-broker cluster:
a topic's configs added, described and deleted, a broker's dynamic config and the
cluster-wide default changed, and every mistake a one-line error, never a traceback."""

from __future__ import annotations

import json

from tests.integration.test_admin_http import purgatory_cli
from tests.support import bootstrap, running_cluster, wait_until


async def test_configs_alters_and_describes_a_topic_and_the_brokers() -> None:
    async with running_cluster(3, **{"default.replication.factor": 3}) as brokers:
        servers = ("--bootstrap-server", bootstrap(brokers))
        topic = ("--entity-type", "topics", "--entity-name", "cli-t")
        code, out = await purgatory_cli("topics", "create", "cli-t", *servers)
        assert code == 0, out
        code, out = await purgatory_cli(
            "configs",
            "--alter",
            *topic,
            "--add-config",
            "retention.ms=60000,cleanup.policy=[compact,delete]",
            *servers,
        )
        assert (code, out) == (0, "Completed updating config for topic cli-t.\n")
        assert all(
            b.metadata.topics["cli-t"].configs.get("retention.ms") == "60000" for b in brokers
        )
        code, out = await purgatory_cli("configs", "--describe", *topic, *servers)
        assert code == 0 and out.splitlines() == [
            "Dynamic configs for topic cli-t are:",
            "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}",
            "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}",
        ], out
        code, out = await purgatory_cli(
            "configs", "--alter", *topic, "--delete-config", "retention.ms", *servers, "--json"
        )
        assert code == 0 and json.loads(out)["error"] is None
        assert all("retention.ms" not in b.metadata.topics["cli-t"].configs for b in brokers)
        code, out = await purgatory_cli(
            "configs", "--alter", *topic, "--add-config", "retention.ms=soon", *servers
        )
        assert (
            code == 1 and "INVALID_CONFIG: Invalid value soon for configuration retention.ms" in out
        ), out
        # The brokers: the cluster-wide default, then one broker's own value.
        brokers_default = ("--entity-type", "brokers", "--entity-default")
        code, out = await purgatory_cli(
            "configs",
            "--alter",
            *brokers_default,
            "--add-config",
            "log.retention.ms=120000",
            *servers,
        )
        assert (code, out) == (0, "Completed updating default config for brokers in the cluster.\n")
        await wait_until(
            lambda: all(b.config["log.retention.ms"] == 120000 for b in brokers),
            message="the default applied",
        )
        one = ("--entity-type", "brokers", "--entity-name", "1")
        code, out = await purgatory_cli(
            "configs", "--alter", *one, "--add-config", "log.retention.ms=240000", *servers
        )
        assert (code, out) == (0, "Completed updating config for broker 1.\n")
        await wait_until(
            lambda: brokers[1].config["log.retention.ms"] == 240000, message="broker 1's own"
        )
        assert brokers[0].config["log.retention.ms"] == 120000
        code, out = await purgatory_cli(
            "configs", "--alter", *one, "--add-config", "broker.id=4", *servers
        )
        assert code == 1 and "Cannot update these configs dynamically: Set(broker.id)" in out, out


async def test_configs_mistakes_are_one_line_never_a_traceback() -> None:
    cases = [
        (
            ("--entity-type", "topics", "--entity-name", "t", "--add-config", "a=1"),
            "give one of --describe and --alter",
        ),
        (
            ("--alter", "--entity-type", "ips", "--entity-name", "g", "--add-config", "a=1"),
            "--entity-type must be topics, brokers, groups, users or clients",
        ),
        (
            ("--alter", "--entity-type", "topics", "--entity-default", "--add-config", "a=1"),
            "--entity-default goes with --entity-type brokers",
        ),
        (
            ("--alter", "--entity-type", "topics", "--entity-name", "t"),
            "--alter needs --add-config or --delete-config",
        ),
        (
            ("--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "oops"),
            "--add-config takes name=value pairs",
        ),
        (
            ("--alter", "--entity-type", "brokers", "--entity-name", "one", "--add-config", "a=1"),
            "--entity-name of a broker is its id",
        ),
    ]
    for args, message in cases:
        code, out = await purgatory_cli("configs", *args)
        assert code == 2 and message in out and "Traceback" not in out, out
