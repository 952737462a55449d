"""SCRAM users in the metadata log: the keys a credential holds (RFC 5802/7677, checked
against RFC 7677's exchange and scramp), AlterUserScramCredentials on the controller with
Kafka's ScramControlManager rules, the records replayed into the image (and its
snapshot), DescribeUserScramCredentials from the image, and the bootstrap arguments of
``--add-scram``."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
import scramp

from purgatory.broker.controller.metadata_cache import MetadataCache
from purgatory.broker.controller.scram_control import ScramControlManager
from purgatory.broker.metadata.metadata_image import MetadataDelta, MetadataImage
from purgatory.broker.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)
from purgatory.broker.metadata.scram_parser import parse_scram_arguments
from purgatory.broker.security.scram_credential import (
    credential_from_salted_password,
    new_credential,
)
from purgatory.protocol import scram_messages as sm
from purgatory.protocol.errors import ErrorCode
from purgatory.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512, salted_password
from tests.unit.test_metadata_image import replay

SALT = b"salt"
SALTED = b"saltedPassword"  # Kafka's AlterUserScramCredentialsRequestTest's


def upsert(
    user: str, mechanism: int = SCRAM_SHA_256.type, iterations: int = 4096
) -> sm.ScramCredentialUpsertion:
    return sm.ScramCredentialUpsertion(user, mechanism, iterations, SALT, SALTED)


def delete(user: str, mechanism: int = SCRAM_SHA_256.type) -> sm.ScramCredentialDeletion:
    return sm.ScramCredentialDeletion(user, mechanism)


def alter(
    image: MetadataImage,
    deletions: list[sm.ScramCredentialDeletion] = (),  # type: ignore[assignment]
    upsertions: list[sm.ScramCredentialUpsertion] = (),  # type: ignore[assignment]
) -> tuple[dict[str, tuple[int, str | None]], MetadataImage]:
    """The results by user, and the image after the records."""
    response, records = ScramControlManager().alter_credentials(
        image, sm.AlterUserScramCredentialsRequest(list(deletions), list(upsertions))
    )
    results = {r.user: (r.error_code, r.error_message) for r in response.results}
    assert len(results) == len(response.results), "one result per user"
    return results, replay(image, *records)


# -- the keys ------------------------------------------------------------------------------


def test_keys_prove_rfc_7677s_exchange() -> None:
    """RFC 7677 section 3: user "user", password "pencil": the client's proof checks out
    against the stored key and the server's signature is made with the server key."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = new_credential(SCRAM_SHA_256, "pencil", 4096, salt)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = (
        f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        f"c=biws,r={nonce}"
    ).encode()
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.digest(credential.stored_key, auth_message, "sha256")
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    server_signature = hmac.digest(credential.server_key, auth_message, "sha256")
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512], ids=lambda m: m.name)
def test_keys_are_scramps_and_the_same_from_the_salted_password(mechanism) -> None:  # type: ignore[no-untyped-def]
    salt = b"some-salt-bytes"
    expected = scramp.ScramMechanism(mechanism.name).make_auth_info(
        "alice-secret", iteration_count=8192, salt=salt
    )
    credential = new_credential(mechanism, "alice-secret", 8192, salt)
    assert (credential.salt, credential.stored_key, credential.server_key) == expected[:3]
    salted = salted_password(mechanism, "alice-secret", salt, 8192)
    assert credential_from_salted_password(mechanism, salt, salted, 8192) == credential
    assert "stored" not in repr(credential) and str(credential.server_key) not in repr(credential)


def test_a_new_credential_gets_a_fresh_salt() -> None:
    one, two = (new_credential(SCRAM_SHA_512, "pw") for _ in range(2))
    assert one.salt != two.salt and one.stored_key != two.stored_key


# -- the controller ------------------------------------------------------------------------


def test_an_upsertion_stores_the_keys_derived_from_the_salted_password() -> None:
    results, image = alter(MetadataImage(), upsertions=[upsert("alice", SCRAM_SHA_512.type, 8192)])
    assert results == {"alice": (ErrorCode.NONE, None)}
    stored = image.scram.credential("SCRAM-SHA-512", "alice")
    assert stored == credential_from_salted_password(SCRAM_SHA_512, SALT, SALTED, 8192)
    assert image.scram.credential("SCRAM-SHA-256", "alice") is None


def test_iterations_outside_4096_to_16384_are_unacceptable() -> None:
    results, image = alter(
        MetadataImage(),
        upsertions=[upsert("few", iterations=4095), upsert("many", iterations=16385)],
    )
    assert results == {
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    }
    assert image.scram.mechanisms == {}
    results, _ = alter(
        MetadataImage(), upsertions=[upsert("low", iterations=4096), upsert("hi", iterations=16384)]
    )
    assert results == {"low": (0, None), "hi": (0, None)}


def test_an_empty_user_and_an_unknown_mechanism_are_refused_with_kafkas_errors() -> None:
    results, image = alter(
        MetadataImage(),
        deletions=[delete("", 1), delete("bob", 0)],
        upsertions=[upsert("", 2), upsert("carol", 10)],
    )
    assert results == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "bob": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "carol": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    }
    assert image.scram.mechanisms == {}


def test_a_user_altered_twice_in_one_request_is_a_duplicate_and_changes_nothing() -> None:
    _, image = alter(MetadataImage(), upsertions=[upsert("a"), upsert("b")])
    twice = (
        ErrorCode.DUPLICATE_RESOURCE,
        "A user credential cannot be altered twice in the same request",
    )
    # The same deletion twice; a deletion and an upsertion; two mechanisms of one user.
    results, after = alter(
        image,
        deletions=[delete("a"), delete("a"), delete("b")],
        upsertions=[upsert("b"), upsert("c", 1), upsert("c", 2), upsert("d")],
    )
    assert results == {"a": twice, "b": twice, "c": twice, "d": (0, None)}
    assert after.scram.users() == ["a", "b", "d"]


def test_deleting_a_credential_that_does_not_exist_is_resource_not_found() -> None:
    _, image = alter(MetadataImage(), upsertions=[upsert("alice", SCRAM_SHA_256.type)])
    results, after = alter(image, deletions=[delete("alice", SCRAM_SHA_512.type), delete("bob")])
    missing = (
        ErrorCode.RESOURCE_NOT_FOUND,
        "Attempt to delete a user credential that does not exist",
    )
    assert results == {"alice": missing, "bob": missing}
    results, after = alter(image, deletions=[delete("alice", SCRAM_SHA_256.type)])
    assert results == {"alice": (0, None)}
    assert after.scram.mechanisms == {} and after.scram.users() == []


# -- the image -----------------------------------------------------------------------------


def credential_record(
    user: str, mechanism: int = 2, iterations: int = 4096
) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(user, mechanism, b"s", b"stored", b"server", iterations)


def test_credential_records_replay_into_a_new_image_and_survive_a_snapshot() -> None:
    before = MetadataImage()
    image = replay(
        before,
        credential_record("alice", 2, 8192),
        credential_record("alice", 1),
        credential_record("bob", 2),
        credential_record("bob", 2, 10000),  # replaced
        RemoveUserScramCredentialRecord("alice", 1),
    )
    assert before.scram.mechanisms == {} and not image.empty
    assert image.scram.credential("SCRAM-SHA-512", "bob").iterations == 10000  # type: ignore[union-attr]
    assert image.scram.credential("SCRAM-SHA-256", "alice") is None
    assert sorted(image.scram.mechanisms) == ["SCRAM-SHA-512"]
    # A snapshot (the image's records, encoded) rebuilds the same credentials.
    delta = MetadataDelta(MetadataImage())
    for record in image.records():
        decoded = decode_record(encode_record(record))
        assert decoded is not None
        delta.replay(decoded, 0)
    assert delta.apply().scram.mechanisms == image.scram.mechanisms


def test_metadata_cache_answers_the_authenticators_lookup() -> None:
    cache = MetadataCache({}, "PLAINTEXT")
    cache.image = replay(MetadataImage(), credential_record("alice", 2, 8192))
    found = cache.scram_credential("SCRAM-SHA-512", "alice")
    assert found is not None and (found.salt, found.iterations) == (b"s", 8192)
    assert cache.scram_credential("SCRAM-SHA-256", "alice") is None
    assert cache.scram_credential("SCRAM-SHA-512", "bob") is None


def test_describe_answers_every_user_or_those_named_with_kafkas_errors() -> None:
    image = replay(
        MetadataImage(),
        credential_record("bob", 2),
        credential_record("alice", 1, 8192),
        credential_record("alice", 2),
    )
    every = image.scram.describe(None)
    assert every.error_code == 0
    assert [
        (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in every.results
    ] == [
        ("alice", 0, [(1, 8192), (2, 4096)]),
        ("bob", 0, [(2, 4096)]),
    ]
    named = image.scram.describe(["carol", "bob", "alice", "bob"])
    assert [(r.user, r.error_code, r.error_message) for r in named.results] == [
        (
            "carol",
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: carol",
        ),
        (
            "bob",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        ("alice", 0, None),
    ]


# -- bootstrap arguments ---------------------------------------------------------------------


def test_add_scram_arguments_parse_as_kafka_storage_reads_them() -> None:
    salt = base64.b64encode(b"fixed-salt").decode()
    salted = base64.b64encode(SALTED).decode()
    [alice, bob] = parse_scram_arguments(
        "SCRAM-SHA-512=[name=alice,password=alice-secret]  "
        f'SCRAM-SHA-256=[name="bob",iterations=8192,salt={salt},saltedpassword={salted}]'
    )
    assert (alice.mechanism, alice.name, alice.iterations, alice.password) == (
        SCRAM_SHA_512,
        "alice",
        4096,
        "alice-secret",
    )
    assert alice.credential().salt != alice.credential().salt  # random each time
    assert bob.name == "bob"
    assert bob.credential() == credential_from_salted_password(
        SCRAM_SHA_256, b"fixed-salt", SALTED, 8192
    )
    assert parse_scram_arguments("") == []


@pytest.mark.parametrize(
    ("argument", "complaint"),
    [
        ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported"),
        ("SCRAM-SHA-512", "Failed to find equals sign"),
        ("SCRAM-SHA-512=name=a,password=b]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-512=[password=b]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-512=[name=a]", "You must supply one of 'password' or 'saltedpassword'"),
        (
            "SCRAM-SHA-512=[name=a,saltedpassword=YQ==]",
            "You must supply 'salt' with 'saltedpassword'",
        ),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=100]", "must be >= 4096"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=20000]", "must be <= 16384"),
        ("SCRAM-SHA-512=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ],
)
def test_a_bad_add_scram_argument_says_what_is_wrong(argument: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint.replace("[", r"\[")):
        parse_scram_arguments(argument)
