"""Stream archives (``cluster.stream_archive``): round trips through arbitrary
chunking, the Snappy framing container, and refusal of every damaged form."""

from __future__ import annotations

import hashlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.model import StreamConfig
from cluster.ops import Publish, StreamMsg
from cluster.stream_archive import (
    FRAME_BYTES_MAX,
    STREAM_ID,
    Archive,
    ArchiveDecoder,
    ArchiveError,
    chunked,
    encode_archive,
)
from cluster.stream_fsm import StreamStateMachine
from cluster.streams import policy_of
from store.memory import MemoryStreamStore

CFG = StreamConfig(name="ARCH", subjects=("a.>",), duplicate_window_ns=60_000_000_000)


def _machine() -> StreamStateMachine:
    store = MemoryStreamStore(CFG.limits())
    fsm = StreamStateMachine(store, policy_of(CFG))
    msgs = tuple(
        Publish(f"a.{i % 3}", b"NATS/1.0\r\nNats-Msg-Id: id-%d\r\n\r\n" % i, b"p%d" % i, 1000 + i)
        for i in range(20)
    )
    fsm.apply_op(StreamMsg(msgs))
    store.remove(5)
    store.remove(6)
    return fsm


def _archive(doc: bytes | None = None) -> Archive:
    return Archive(CFG, 123_456_789, _machine().snapshot() if doc is None else doc)


def _decode(data: bytes, step: int = 7) -> Archive:
    dec = ArchiveDecoder()
    for i in range(0, len(data), step):
        dec.feed(data[i : i + step])
    return dec.finish()


def test_round_trip_restores_an_identical_machine() -> None:
    archive = _archive()
    data = b"".join(encode_archive(archive))
    got = _decode(data)
    assert got == archive
    fsm = StreamStateMachine(MemoryStreamStore(CFG.limits()), policy_of(CFG))
    fsm.restore(io.BytesIO(got.document))
    assert fsm.snapshot() == archive.document
    assert fsm.store.state() == _machine().store.state()
    assert list(fsm.dedupe_entries()) == list(_machine().dedupe_entries())
    assert fsm.last_msg_id == "id-19"


def test_container_is_a_snappy_framing_stream_of_skippable_chunks() -> None:
    archive = _archive(b"x" * (3 * FRAME_BYTES_MAX + 17))
    data = b"".join(encode_archive(archive))
    assert data.startswith(STREAM_ID)
    pos, bodies = len(STREAM_ID), []
    while pos < len(data):
        kind, length = data[pos], int.from_bytes(data[pos + 1 : pos + 4], "little")
        assert kind == 0x80 and 0 < length <= FRAME_BYTES_MAX
        bodies.append(data[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(data)
    payload = b"".join(bodies)
    assert payload.startswith(b"TJARCH\x00\x01")
    assert hashlib.sha256(payload[:-32]).digest() == payload[-32:]


@settings(max_examples=60, deadline=None)
@given(
    doc=st.binary(max_size=3 * FRAME_BYTES_MAX),
    cuts=st.lists(st.integers(min_value=1, max_value=70_000), min_size=1, max_size=8),
)
def test_any_chunking_round_trips(doc: bytes, cuts: list[int]) -> None:
    archive = _archive(doc)
    data = b"".join(encode_archive(archive))
    dec = ArchiveDecoder()
    pos = 0
    for i in range(10_000):
        n = cuts[i % len(cuts)]
        dec.feed(data[pos : pos + n])
        pos += n
        if pos >= len(data):
            break
    assert dec.received == len(data)
    assert dec.finish() == archive


@settings(max_examples=40, deadline=None)
@given(pieces=st.lists(st.binary(max_size=300), max_size=12), size=st.integers(1, 257))
def test_chunked_recuts_exactly(pieces: list[bytes], size: int) -> None:
    out = list(chunked(pieces, size))
    assert b"".join(out) == b"".join(pieces)
    assert all(len(p) == size for p in out[:-1])
    assert not out or 0 < len(out[-1]) <= size


def test_chunked_rejects_a_non_positive_size() -> None:
    with pytest.raises(ValueError):
        list(chunked([b"abc"], 0))


def test_every_truncation_is_refused() -> None:
    data = b"".join(encode_archive(_archive(b"d" * 300)))
    for cut in range(len(data)):
        with pytest.raises(ArchiveError):
            _decode(data[:cut], step=64)


def test_truncation_at_a_chunk_boundary_reads_unexpected_eof() -> None:
    pieces = list(encode_archive(_archive(b"d" * (FRAME_BYTES_MAX + 10))))
    with pytest.raises(ArchiveError, match=r"^unexpected EOF$"):
        _decode(b"".join(pieces[:-1]), step=4096)


def test_garbage_reads_like_s2() -> None:
    with pytest.raises(ArchiveError, match=r"^s2: corrupt input$"):
        _decode(b"garbage garbage garbage")
    with pytest.raises(ArchiveError, match=r"^s2: corrupt input$"):
        _decode(b"\xff\x06\x00\x00nosnap")
    with pytest.raises(ArchiveError, match=r"^s2: unsupported input$"):
        _decode(STREAM_ID + b"\x05\x01\x00\x00x")


def test_the_first_damage_sticks() -> None:
    dec = ArchiveDecoder()
    with pytest.raises(ArchiveError):
        dec.feed(b"zz\x00\x00")
    with pytest.raises(ArchiveError):
        dec.feed(STREAM_ID)
    with pytest.raises(ArchiveError):
        dec.finish()


def test_flipped_bytes_are_refused_by_the_checksum() -> None:
    data = bytearray(b"".join(encode_archive(_archive(b"q" * 500))))
    for pos in range(len(STREAM_ID) + 4, len(data), 37):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        with pytest.raises(ArchiveError):
            _decode(bytes(bad))
    bad = bytearray(data)
    bad[-100] ^= 1  # inside the document
    with pytest.raises(ArchiveError, match=r"^archive checksum mismatch$"):
        _decode(bytes(bad))


def test_a_nats_server_archive_is_named_as_foreign() -> None:
    # S2 stream identifier and an uncompressed data chunk (nats-server's tar)
    foreign = b"\xff\x06\x00\x00S2sTwO" + b"\x01\x08\x00\x00" + b"\x00" * 4 + b"tar!"
    with pytest.raises(ArchiveError, match=r"^not a trijet stream archive$"):
        _decode(foreign)


def test_other_skippable_chunks_and_repeated_identifiers_are_ignored() -> None:
    pieces = list(encode_archive(_archive(b"z" * 10)))
    data = pieces[0] + b"\xfe\x03\x00\x00pad" + STREAM_ID + b"".join(pieces[1:])
    assert _decode(data).document == b"z" * 10


def test_trailing_payload_is_refused() -> None:
    data = b"".join(encode_archive(_archive(b"z" * 10))) + b"\x80\x01\x00\x00!"
    with pytest.raises(ArchiveError, match=r"^trailing bytes after the archive$"):
        _decode(data)
