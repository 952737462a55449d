"""Scenarios of DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) on the
secured pair: the users seeded at format, an upsertion and a deletion, and each refusal
(a user twice in one request, a user without credentials, iterations out of range, an
unknown mechanism, an empty name), with their messages; a user who is no super user is
refused both."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from purgatory.protocol.api import ApiKey
from tests.differential.harness import Client
from tests.differential.scenarios.base import secured_scenario
from tests.differential.scenarios.security import login, scram_exchange

SHA_256, SHA_512 = 1, 2
SALT = b"differential-salt"


def with_messages(value: Any) -> Any:
    """A response as plain data keeping the message of each error but an authorization
    failure (the harness drops messages elsewhere): these APIs' refusals tell an operator
    what to fix. Kafka's authorization failures print its request object."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain = {f.name: with_messages(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if "error_message" in plain:
            message = plain.pop("error_message")
            code = plain.get("error_code")
            told = code is not None and code.value != 0 and "AUTHORIZATION" not in code.name.upper()
            plain["error_text"] = message if told else "<not compared>"
        return plain
    if isinstance(value, (tuple, list)):
        return [with_messages(item) for item in value]
    return value


def upsertion(name: str, password: str, mechanism: int = SHA_512, iterations: int = 8192) -> Any:
    digest = "sha512" if mechanism == SHA_512 else "sha256"
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), SALT, iterations)
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": SALT,
        "salted_password": salted,
    }


async def describe(c: Client, label: str, *users: str) -> Any:
    return await c.call(
        label,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        view=with_messages,
        users=[{"name": u} for u in users],
    )


async def alter(
    c: Client, label: str, upsertions: list[Any], deletions: list[tuple[str, int]] = ()
) -> Any:
    return await c.call(
        label,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        view=with_messages,
        deletions=[{"name": n, "mechanism": m} for n, m in deletions],
        upsertions=upsertions,
    )


async def settled(c: Client, user: str, count: int) -> None:
    """Wait (unrecorded) until the broker describes ``count`` credentials of ``user``:
    Kafka's brokers answer from their metadata image, which follows the controller's
    commit (that AlterUserScramCredentials waited for) a moment later."""
    await c.until(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        lambda r: len(r.results[0].credential_infos) == count,
        users=[{"name": user}],
    )


@secured_scenario
async def user_scram_credentials(c: Client) -> None:
    carol = c.topic("carol")
    await describe(c, "describe_seeded", "alice", "admin")
    await describe(c, "describe_unknown", carol)
    await describe(c, "describe_twice", "alice", "alice")
    await describe(c, "describe_empty_name", "")
    await alter(c, "add", [upsertion(carol, "carol-secret")])
    await settled(c, carol, 1)
    await describe(c, "describe_added", carol)
    await scram_exchange(c, "carol", "SCRAM-SHA-512", carol, "carol-secret")
    await alter(c, "add_sha256_at_4096", [upsertion(carol, "carol-secret", SHA_256, 4096)])
    await settled(c, carol, 2)
    await describe(c, "describe_both", carol)
    await alter(c, "iterations_too_few", [upsertion(c.topic("dave"), "x", iterations=4095)])
    await alter(c, "iterations_too_many", [upsertion(c.topic("dave"), "x", iterations=16385)])
    await alter(c, "unknown_mechanism", [upsertion(c.topic("dave"), "x", mechanism=3)])
    await alter(c, "empty_name", [upsertion("", "x")])
    await alter(
        c,
        "same_user_twice",
        [upsertion(c.topic("erin"), "x"), upsertion(c.topic("erin"), "y", SHA_256)],
    )
    await alter(c, "upsert_and_delete", [upsertion(carol, "x")], [(carol, SHA_256)])
    await alter(c, "delete_missing", [], [(c.topic("dave"), SHA_512)])
    await alter(c, "delete_unknown_mechanism", [], [(carol, 0)])
    await alter(
        c,
        "one_good_one_bad",
        [upsertion(c.topic("frank"), "frank-secret")],
        [(c.topic("dave"), SHA_256)],
    )
    await alter(c, "delete", [], [(carol, SHA_512), (c.topic("frank"), SHA_512)])
    await settled(c, carol, 1)
    await settled(c, c.topic("frank"), 0)
    await describe(c, "describe_after_delete", carol, c.topic("frank"))
    await alter(c, "delete_last", [], [(carol, SHA_256)])
    await settled(c, carol, 0)
    await describe(c, "describe_deleted", carol)


@secured_scenario
async def user_scram_credentials_need_cluster_permissions(c: Client) -> None:
    alice = await login(c, "alice")
    await describe(alice, "describe_as_alice", "alice")
    await alter(alice, "alter_as_alice", [upsertion(c.topic("carol"), "x")])
    admin = await login(c, "admin")
    await describe(admin, "describe_as_admin", "alice")
