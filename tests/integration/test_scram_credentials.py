"""SCRAM users held in the metadata log, through Kafka's APIs with an unmodified Kafka
client (confluent-kafka's AdminClient: AlterUserScramCredentials salts the password
client-side) against a replicated in-process cluster: the controller derives the keys,
every broker replays them, any broker describes them; Kafka's errors on the wire; users
seeded at start (``bootstrap.scram.credentials``, ``--add-scram``,
``Cluster(add_scram=...)``); and ``purgatory configs --entity-type users``.

The synchronous client runs in a worker thread while the brokers serve on the test's event
loop."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from purgatory.broker.main import resolve_config
from purgatory.broker.security.scram_credential import new_credential
from purgatory.broker.server import Broker
from purgatory.cli import build_parser
from purgatory.protocol.api import ApiKey
from purgatory.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramMechanism
from purgatory.testing import Cluster
from tests.integration.test_admin_http import purgatory_cli
from tests.integration.test_topic_configs import in_thread
from tests.kafka_wire import KafkaWire, request, schema
from tests.support import bootstrap, running_cluster, wait_until

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def holds_password(broker: Broker, mechanism: ScramMechanism, user: str, password: str) -> bool:
    """Whether ``broker``'s image holds ``user``'s credential for ``password``: the keys
    derived again from the password with the credential's own salt and iterations."""
    stored = broker.metadata.scram_credential(mechanism.name, user)
    if stored is None:
        return False
    return new_credential(mechanism, password, stored.iterations, stored.salt) == stored


def confluent_alter(servers: str, alterations: list[tuple[Any, ...]]) -> dict[str, str | None]:
    """("upsert", user, mechanism, iterations, password) or ("delete", user, mechanism)
    each; the error name of each user (None: done)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": servers})
    asked: list[Any] = []
    for kind, user, mechanism, *rest in alterations:
        if kind == "upsert":
            iterations, password = rest
            info = ScramCredentialInfo(ScramMechanism[mechanism], iterations)
            asked.append(UserScramCredentialUpsertion(user, info, password.encode()))
        else:
            asked.append(UserScramCredentialDeletion(user, ScramMechanism[mechanism]))
    out: dict[str, str | None] = {}
    for user, future in admin.alter_user_scram_credentials(asked).items():
        try:
            future.result(timeout=20)
            out[user] = None
        except KafkaException as exc:
            out[user] = exc.args[0].name()
    return out


def confluent_describe(servers: str) -> dict[str, list[tuple[str, int]]]:
    """Every user's (mechanism, iterations)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})
    described = admin.describe_user_scram_credentials().result(timeout=20)
    return {
        user: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
        for user, d in described.items()
    }


async def test_a_kafka_client_alters_credentials_every_broker_holds_and_describes() -> None:
    async with running_cluster(3) as brokers:
        servers = bootstrap(brokers)
        done = await in_thread(
            confluent_alter,
            servers,
            [
                ("upsert", "alice", "SCRAM_SHA_512", 8192, "alice-secret"),
                ("upsert", "bob", "SCRAM_SHA_256", 4096, "bob-secret"),
            ],
        )
        assert done == {"alice": None, "bob": None}
        await wait_until(
            lambda: all(
                holds_password(b, SCRAM_SHA_512, "alice", "alice-secret")
                and holds_password(b, SCRAM_SHA_256, "bob", "bob-secret")
                for b in brokers
            ),
            message="both credentials on every broker",
        )
        assert not holds_password(brokers[0], SCRAM_SHA_512, "alice", "wrong")
        assert await in_thread(confluent_describe, servers) == {
            "alice": [("SCRAM_SHA_512", 8192)],
            "bob": [("SCRAM_SHA_256", 4096)],
        }
        # Kafka's refusals, per user; the others' changes go through.
        done = await in_thread(
            confluent_alter,
            servers,
            [
                ("upsert", "carol", "SCRAM_SHA_256", 20000, "c"),
                ("delete", "dave", "SCRAM_SHA_256"),
                ("delete", "bob", "SCRAM_SHA_256"),
            ],
        )
        assert done == {
            "carol": "UNACCEPTABLE_CREDENTIAL",
            "dave": "RESOURCE_NOT_FOUND",
            "bob": None,
        }
        await wait_until(
            lambda: all(
                b.metadata.scram_credential("SCRAM-SHA-256", "bob") is None for b in brokers
            ),
            message="bob's credential gone everywhere",
        )
        assert await in_thread(confluent_describe, servers) == {"alice": [("SCRAM_SHA_512", 8192)]}


async def test_describe_answers_kafkas_errors_on_the_wire() -> None:
    async with running_cluster(
        1, bootstrap_scram_credentials="SCRAM-SHA-256=[name=alice,password=a]"
    ) as (broker,):
        await wait_until(
            lambda: broker.metadata.scram_credential("SCRAM-SHA-256", "alice") is not None
        )
        s = schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
        names = ("alice", "nobody", "alice")
        body = request(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            users=tuple(s.UserName(name=n) for n in names),
        )
        wire = await KafkaWire.open(broker.port)
        try:
            answer = await wire.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)
        finally:
            await wire.close()
        assert answer.error_code.value == 0
        assert [(r.user, r.error_code.name, r.error_message) for r in answer.results] == [
            (
                "alice",
                "duplicate_resource",
                "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
            ),
            (
                "nobody",
                "resource_not_found",
                "Attempt to describe a user credential that does not exist: nobody",
            ),
        ]


async def test_bootstrap_credentials_are_in_the_new_metadata_log_of_every_broker() -> None:
    users = (
        "SCRAM-SHA-512=[name=alice,iterations=8192,password=alice-secret] "
        "SCRAM-SHA-256=[name=bob,password=bob-secret]"
    )
    async with running_cluster(3, bootstrap_scram_credentials=users) as brokers:
        await wait_until(
            lambda: all(
                holds_password(b, SCRAM_SHA_512, "alice", "alice-secret")
                and holds_password(b, SCRAM_SHA_256, "bob", "bob-secret")
                for b in brokers
            ),
            message="the bootstrap credentials on every broker",
        )
        assert brokers[0].metadata.scram_credential("SCRAM-SHA-512", "alice").iterations == 8192  # type: ignore[union-attr]


def test_broker_add_scram_sets_the_bootstrap_credentials() -> None:
    args = build_parser().parse_args(
        [
            "broker",
            "--add-scram",
            "SCRAM-SHA-512=[name=alice,password=alice-secret]",
            "--add-scram",
            "SCRAM-SHA-256=[name=bob,password=b]",
        ]
    )
    assert isinstance(args, argparse.Namespace)
    config = resolve_config(args, environ={})
    assert config["bootstrap.scram.credentials"] == (
        "SCRAM-SHA-512=[name=alice,password=alice-secret] SCRAM-SHA-256=[name=bob,password=b]"
    )


def test_a_testing_cluster_starts_with_its_users() -> None:
    with Cluster(2, add_scram=["SCRAM-SHA-512=[name=alice,password=alice-secret]"]) as cluster:
        assert confluent_describe(cluster.bootstrap_servers) == {"alice": [("SCRAM_SHA_512", 4096)]}


async def test_purgatory_configs_alters_describes_and_deletes_users() -> None:
    async with running_cluster(3) as brokers:
        servers = ("--bootstrap-server", bootstrap(brokers))
        alice = ("--entity-type", "users", "--entity-name", "alice")
        code, out = await purgatory_cli(
            "configs",
            "--alter",
            *alice,
            "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=alice-secret],SCRAM-SHA-256=[password=x]",
            *servers,
        )
        # Kafka refuses two mechanisms of one user in one request, as here.
        assert code == 1 and "DUPLICATE_RESOURCE" in out, out
        code, out = await purgatory_cli(
            "configs",
            "--alter",
            *alice,
            "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=alice-secret]",
            *servers,
        )
        assert (code, out) == (0, "Completed updating config for user alice.\n")
        assert all(holds_password(b, SCRAM_SHA_512, "alice", "alice-secret") for b in brokers)
        code, out = await purgatory_cli(
            "configs", "--alter", "--entity-type", "users", "--entity-name", "bob",
            "--add-config", "SCRAM-SHA-256=[password=bob-secret]", *servers,
        )  # fmt: skip
        assert code == 0, out
        code, out = await purgatory_cli("configs", "--describe", *alice, *servers)
        assert (code, out) == (
            0,
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192\n",
        )
        code, out = await purgatory_cli("configs", "--describe", "--entity-type", "users", *servers)
        assert code == 0 and out.splitlines() == [
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096",
        ], out
        code, out = await purgatory_cli(
            "configs", "--alter", *alice, "--delete-config", "SCRAM-SHA-512", *servers, "--json"
        )
        assert code == 0 and json.loads(out) == {"user": "alice", "error": None, "message": None}
        assert all(b.metadata.scram_credential("SCRAM-SHA-512", "alice") is None for b in brokers)
        code, out = await purgatory_cli("configs", "--describe", *alice, *servers)
        assert (code, out) == (0, "")  # as kafka-configs: nothing for a user without any
        # Mistakes: one line each, never a traceback.
        for extra, words in (
            (("--delete-config", "SCRAM-SHA-512"), "RESOURCE_NOT_FOUND"),
            (
                ("--add-config", "SCRAM-SHA-512=[iterations=100,password=p]"),
                "less than the minimum 4096",
            ),
            (
                ("--add-config", "SCRAM-SHA-512=[iterations=20000,password=p]"),
                "Too many iterations",
            ),
            (("--add-config", "SCRAM-SHA-1=[password=p]"), "Unexpected config names: SCRAM-SHA-1"),
            (("--add-config", "SCRAM-SHA-512=[secret=p]"), "Invalid credential property"),
        ):
            code, out = await purgatory_cli("configs", "--alter", *alice, *extra, *servers)
            assert code in (1, 2) and words in out and "Traceback" not in out, out
