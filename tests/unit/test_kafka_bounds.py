"""The bounds walker in front of kio's native reader: it agrees with the reader on every
valid body, refuses the counts that made the reader abort the process, and lets nothing
through that the reader would size by a count larger than the bytes present."""

from __future__ import annotations

import io
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kio.serial import entity_reader, entity_writer

from purgatory.broker.network.kafka_codec import KafkaCodec
from purgatory.broker.network.request_channel import UnreadableRequest
from purgatory.protocol.api import ApiKey
from purgatory.protocol.kafka_bounds import BodyOutOfBounds, _walker, check_body
from purgatory.protocol.kafka_schemas import VERSIONS, request_class
from tests.kafka_wire import request_frame, sample_request

SERVED = [(key, v) for key, (lo, hi) in sorted(VERSIONS.items()) for v in range(lo, hi + 1)]


def body_bytes(api_key: int, version: int, width: int = 2) -> bytes:
    body = sample_request(api_key, version, width)
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_the_walker_ends_where_kios_reader_ends(api_key: ApiKey, version: int) -> None:
    cls = request_class(api_key, version)
    data = body_bytes(api_key, version)
    _, read_to = entity_reader(cls)(data, 0)
    assert _walker(cls)(data, 0, len(data)) == read_to == len(data)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_a_body_cut_short_is_out_of_bounds(api_key: ApiKey, version: int) -> None:
    cls = request_class(api_key, version)
    data = body_bytes(api_key, version)
    for cut in range(len(data)):
        with pytest.raises(BodyOutOfBounds):
            check_body(cls, data[:cut], 0)


def frame_body(api_key: int, version: int, body: bytes) -> bytes:
    """A whole request frame (without the length prefix) around raw body bytes."""
    empty = request_frame(api_key, version, 1, sample_request(api_key, version, 0))[4:]
    header = len(empty) - len(body_bytes(api_key, version, 0))
    return empty[:header] + body


CORPUS = Path(__file__).parent.parent / "corpus" / "kio_native_aborts.txt"


def aborting() -> list[tuple[int, int, bytes]]:
    """The bodies that aborted a process in kio's reader (issue 42), kept as regressions."""
    rows = []
    for line in CORPUS.read_text().splitlines():
        if line and not line.startswith("#"):
            key, version, body = line.split()
            rows.append((int(key), int(version), bytes.fromhex(body)))
    return rows


ABORTING = aborting()


@pytest.mark.parametrize(("api_key", "version", "body"), ABORTING)
def test_counts_beyond_the_bytes_are_refused_before_the_reader(
    api_key: ApiKey, version: int, body: bytes
) -> None:
    with pytest.raises(BodyOutOfBounds):
        check_body(request_class(api_key, version), body, 0)
    with pytest.raises(UnreadableRequest) as caught:
        KafkaCodec(lambda *_: None).decode(frame_body(api_key, version, body), 0.0)
    assert caught.value.reason == "malformed_request"


MUTATIONS = 60  # per served version, in a child process: the native reader may abort it

CHILD = """
import random, struct, sys
from kio.serial import entity_reader
from purgatory.protocol.kafka_bounds import BodyOutOfBounds, check_body
from purgatory.protocol.kafka_schemas import request_class
from tests.unit.test_kafka_bounds import SERVED, MUTATIONS, body_bytes, mutate
rng = random.Random(int(sys.argv[1]))
passed = 0
for api_key, version in SERVED:
    cls = request_class(api_key, version)
    reader = entity_reader(cls)
    data = body_bytes(api_key, version)
    for _ in range(MUTATIONS):
        mutated = mutate(rng, data)
        try:
            check_body(cls, mutated, 0)
        except BodyOutOfBounds:
            continue
        passed += 1
        try:
            reader(mutated, 0)
        except Exception:
            pass
print(passed)
"""


def mutate(rng: random.Random, data: bytes) -> bytes:
    """Overwrite a few bytes with the values that make counts and lengths large."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(out)) if out else 0
        value = rng.choice([b"\xff", b"\x7f", b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff"])
        out[at : at + len(value)] = value
    return bytes(out)


def test_mutated_bodies_that_pass_the_walker_never_abort_the_reader() -> None:
    """Every served version, mutated where counts live; the reader only sees what the
    walker let through, and the child process must survive them all."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "42"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) > 0  # some mutations are valid bodies: the reader saw them


def test_a_legacy_array_count_below_minus_one_is_out_of_bounds() -> None:
    body = struct.pack(">i", -5) + b"\x00"
    with pytest.raises(BodyOutOfBounds, match="negative"):
        check_body(request_class(ApiKey.METADATA, 1), body, 0)


def test_a_null_array_is_refused_only_where_the_schema_has_no_null() -> None:
    null = struct.pack(">i", -1)
    with pytest.raises(BodyOutOfBounds, match="null array"):  # DeleteGroups' names
        check_body(request_class(ApiKey.DELETE_GROUPS, 0), null, 0)
    check_body(request_class(ApiKey.METADATA, 1), null, 0)  # topics: null is "all"
