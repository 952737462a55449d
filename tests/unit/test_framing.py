from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from purgatory.protocol.framing import FrameDecoder, FrameError, FrameTooLarge, encode_frame


def test_frames_split_across_reads_come_out_whole_and_in_order() -> None:
    stream = encode_frame(b"first") + encode_frame(b"") + encode_frame(b"third" * 100)
    decoder = FrameDecoder()
    out = []
    for i in range(len(stream)):
        out += decoder.feed(stream[i : i + 1])
    assert out == [b"first", b"", b"third" * 100]
    assert decoder.buffered == 0


def test_an_oversized_length_prefix_is_refused_before_any_body_is_buffered() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(FrameTooLarge, match="1025 bytes exceeds the limit of 1024"):
        decoder.feed(struct.pack(">I", 1025))
    assert decoder.buffered == 4  # the prefix only: nothing of the body was waited for


def test_a_negative_int32_length_is_a_huge_unsigned_one_and_refused() -> None:
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(struct.pack(">i", -1))


def test_a_truncated_frame_waits_for_the_rest() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(b"abcdef")
    assert decoder.feed(frame[:7]) == []
    assert decoder.feed(frame[7:]) == [b"abcdef"]


@given(st.lists(st.binary(max_size=300), max_size=20), st.lists(st.integers(0, 7000), max_size=10))
def test_any_split_of_a_frame_stream_yields_the_same_frames(
    bodies: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(b) for b in bodies)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for a, b in itertools.pairwise(points):
        out += decoder.feed(stream[a:b])
    assert out == bodies


@given(st.binary(max_size=2000))
def test_random_bytes_give_frames_or_a_frame_error_never_anything_else(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_bytes=512)
    try:
        frames = decoder.feed(data)
    except FrameError:
        return
    assert sum(len(f) + 4 for f in frames) + decoder.buffered == len(data)
