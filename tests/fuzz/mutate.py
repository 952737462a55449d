"""How the fuzzer spoils a valid frame: each strategy takes the frame's payload (after
the 4-byte length) and returns a whole frame (length prefix included) or raw bytes that
break the framing itself. Seeded: a run replays from its seed."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

from tests.fuzz.corpus import kafka_batch, produce_frame
from tests.unit.test_kafka_records import recrc

# Values that make counts and lengths large or negative, in every encoding the two
# protocols use: Kafka's compact uvarint and int16/int32, MessagePack's 32-bit headers.
BIG = [
    b"\xff\xff\xff\xff\x0f",  # uvarint 2^32 - 1
    b"\xff\xff\xff\xff\x07",
    b"\x7f\xff\xff\xff",  # int32 max
    b"\x80\x00\x00\x00",  # int32 min
    b"\xff\xff",  # int16 -1
    b"\xdd\xff\xff\xff\xff",  # msgpack array32 of 2^32 - 1
    b"\xdf\xff\xff\xff\xff",  # msgpack map32
    b"\xdb\xff\xff\xff\xff",  # msgpack str32
    b"\xc6\xff\xff\xff\xff",  # msgpack bin32
    b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff",  # msgpack uint64 max
    b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00",  # msgpack float64 inf
]

Strategy = Callable[[random.Random, bytes], bytes]


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def flip(rng: random.Random, payload: bytes) -> bytes:
    out = bytearray(payload)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return framed(bytes(out))


def big_count(rng: random.Random, payload: bytes) -> bytes:
    out = bytearray(payload)
    value = rng.choice(BIG)
    at = rng.randrange(max(1, len(out)))
    out[at : at + len(value)] = value
    return framed(bytes(out))


def truncate(rng: random.Random, payload: bytes) -> bytes:
    return framed(payload[: rng.randrange(max(1, len(payload)))])


def extend(rng: random.Random, payload: bytes) -> bytes:
    return framed(payload + rng.randbytes(rng.randint(1, 64)))


def header(rng: random.Random, payload: bytes) -> bytes:
    """Another API key and version (any int16) on the same body."""
    if len(payload) < 4:
        return framed(payload)
    key, version = rng.randrange(-5, 80), rng.choice([-1, 0, 1, 2, 9, 12, 17, 200, 32767])
    if payload[0] & 0xF0 == 0x90:  # ours: a msgpack array [key, version, ...]
        return framed(payload[:1] + bytes([key & 0x7F, version & 0x7F]) + payload[3:])
    return framed(struct.pack(">hh", key, version) + payload[4:])


def garbage(rng: random.Random, payload: bytes) -> bytes:
    return framed(rng.randbytes(rng.randint(0, 200)))


def deep(rng: random.Random, payload: bytes) -> bytes:
    """A msgpack body nested deeper than any decoder follows."""
    depth = rng.choice([500, 5_000, 50_000])
    return framed(b"\x95\x00\x00\x01\xa1f" + b"\x91" * depth + b"\x01")


def bad_batch(rng: random.Random, payload: bytes) -> bytes:
    """A Kafka Produce whose batch is spoiled behind a correct CRC: a count that lies,
    records that do not decode, a control flag, a codec whose payload is garbage."""
    batch = bytearray(kafka_batch(rng.randint(1, 4)))
    choice = rng.randrange(5)
    if choice == 0:
        struct.pack_into(">i", batch, 57, rng.choice([0, 5, 2**31 - 1, -1]))
    elif choice == 1:
        for _ in range(rng.randint(1, 6)):
            batch[rng.randrange(61, len(batch))] = rng.randrange(256)
    elif choice == 2:
        batch[22] |= 0x20
    elif choice == 3:
        batch[22] = (batch[22] & ~0x07) | rng.randint(1, 7)
    else:
        struct.pack_into(">q", batch, 27, rng.choice([-5, 253402300799000]))
    return produce_frame(recrc(bytes(batch)), acks=rng.choice([0, 1, -1]))


STRATEGIES: list[tuple[Strategy, int]] = [
    (flip, 25),
    (big_count, 25),
    (truncate, 10),
    (extend, 10),
    (header, 10),
    (garbage, 8),
    (deep, 2),
    (bad_batch, 10),
]


def mutant(rng: random.Random, frame: bytes) -> bytes:
    strategies, weights = zip(*STRATEGIES, strict=True)
    strategy = rng.choices(strategies, weights)[0]
    return strategy(rng, frame[4:])


# -- framing tricks (raw bytes, for a connection of their own) ----------------------------


def framing_trick(rng: random.Random, frame: bytes) -> bytes:
    """Bytes that break the framing: a length beyond the limit or negative, a length that
    promises more than follows (then the connection closes), zero-length frames."""
    choice = rng.randrange(4)
    if choice == 0:
        return struct.pack(">i", rng.choice([104857601, 2**31 - 1, -1, -(2**31)]))
    if choice == 1:
        return struct.pack(">i", len(frame) + rng.randint(1, 1000)) + frame[4:]
    if choice == 2:
        return b"\x00\x00\x00\x00" * rng.randint(1, 50)
    return frame[: rng.randint(1, 3)]  # a length prefix cut short
