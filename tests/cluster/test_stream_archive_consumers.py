"""Consumers in stream archives (``cluster.stream_archive``, version 2): their
config and state round-trip, version 1 archives (no consumers) still read,
and a damaged consumer section refuses the whole archive."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.consumer_model import AckPolicy, ConsumerConfig, DeliverPolicy
from cluster.model import StreamConfig
from cluster.stream_archive import (
    ARCHIVE_VERSION,
    FRAME_BYTES_MAX,
    MAGIC,
    STREAM_ID,
    Archive,
    ArchivedConsumer,
    ArchiveDecoder,
    ArchiveError,
    chunked,
    encode_archive,
)
from store.api import ConsumerState, Pending
from store.consumer import encode_consumer_state

CFG = StreamConfig(name="ARCH", subjects=("a.>",))
DOC = b"the stream document"

DURABLE = ArchivedConsumer(
    "D",
    ConsumerConfig(
        durable_name="D",
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait_ns=2_000_000_000,
        backoff_ns=(1_000_000_000, 5_000_000_000),
        max_deliver=5,
        filter_subjects=("a.1", "a.2"),
        metadata=(("team", "blue"),),
    ),
    1_700_000_000_123_456_789,
    ConsumerState(
        delivered_consumer_seq=6,
        delivered_stream_seq=5,
        ack_floor_consumer_seq=2,
        ack_floor_stream_seq=2,
        pending={
            3: Pending(3, 1_700_000_001_000_000_000),
            5: Pending(5, 1_700_000_002_000_000_000),
        },
        redelivered={3: 1},
    ),
)
EPHEMERAL = ArchivedConsumer(
    "X13hxTfh",
    ConsumerConfig(deliver_policy=DeliverPolicy.NEW, inactive_threshold_ns=5_000_000_000),
    1_700_000_000_000_000_001,
    ConsumerState(delivered_stream_seq=10, ack_floor_stream_seq=10),
)


def _archive(*consumers: ArchivedConsumer) -> Archive:
    return Archive(CFG, 123_456_789, DOC, consumers)


def _decode(data: bytes, step: int = 7) -> Archive:
    dec = ArchiveDecoder()
    for i in range(0, len(data), step):
        dec.feed(data[i : i + step])
    return dec.finish()


def _container(header: dict[str, Any], *sections: bytes) -> bytes:
    """An archive container around a hand-made header and sections (a sound
    digest, so only what the test changed is wrong)."""
    raw = cbor2.dumps(header)
    payload = MAGIC + struct.pack("<I", len(raw)) + raw + b"".join(sections)
    payload += hashlib.sha256(payload).digest()
    out = STREAM_ID
    for body in chunked([payload], FRAME_BYTES_MAX):
        out += b"\x80" + len(body).to_bytes(3, "little") + body
    return out


def _header(version: int = 2, **extra: Any) -> dict[str, Any]:
    h: dict[str, Any] = {
        "v": version,
        "config": json.dumps(CFG.to_dict()),
        "created_ns": 123_456_789,
        "doc_bytes": len(DOC),
    }
    h.update(extra)
    return h


def _entry(c: ArchivedConsumer, **changes: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "name": c.name,
        "config": json.dumps(c.config.to_dict()),
        "created_ns": c.created_ns,
        "state": encode_consumer_state(c.state),
    }
    e.update(changes)
    return e


def _with_consumers(entries: Any) -> bytes:
    section = cbor2.dumps(entries)
    return _container(_header(cons_bytes=len(section)), DOC, section)


# --------------------------------------------------------------------------- round trips


def test_consumers_round_trip_with_config_and_state() -> None:
    archive = _archive(DURABLE, EPHEMERAL)
    got = _decode(b"".join(encode_archive(archive)))
    assert got == archive
    assert got.consumers[0].state.pending[3] == Pending(3, 1_700_000_001_000_000_000)
    assert got.consumers[0].config.backoff_ns == (1_000_000_000, 5_000_000_000)
    assert got.consumers[1].config.durable_name == ""


def test_an_archive_without_consumers_still_has_an_empty_section() -> None:
    data = b"".join(encode_archive(_archive()))
    assert ARCHIVE_VERSION == 2
    assert _decode(data) == _archive()


@settings(max_examples=40, deadline=None)
@given(
    pending=st.dictionaries(
        st.integers(1, 2**40), st.tuples(st.integers(1, 2**40), st.integers(0, 2**62)), max_size=50
    ),
    redelivered=st.dictionaries(st.integers(1, 2**40), st.integers(1, 1000), max_size=20),
    delivered=st.integers(0, 2**63 - 1),
    step=st.integers(1, 300),
)
def test_any_consumer_state_round_trips(
    pending: dict[int, tuple[int, int]], redelivered: dict[int, int], delivered: int, step: int
) -> None:
    state = ConsumerState(
        delivered_consumer_seq=delivered,
        delivered_stream_seq=delivered // 2,
        ack_floor_consumer_seq=delivered // 3,
        ack_floor_stream_seq=delivered // 4,
        pending={s: Pending(c, ts) for s, (c, ts) in pending.items()},
        redelivered=redelivered,
    )
    archive = _archive(ArchivedConsumer("C", ConsumerConfig(name="C"), 1, state))
    assert _decode(b"".join(encode_archive(archive)), step=step) == archive


def test_a_version_1_archive_reads_without_consumers() -> None:
    data = _container(_header(version=1), DOC)
    assert _decode(data) == Archive(CFG, 123_456_789, DOC)


# --------------------------------------------------------------------------- refusals


def test_headers_that_do_not_fit_their_version_are_refused() -> None:
    cases = {
        _container(_header(version=1, cons_bytes=0), DOC): "archive header malformed",
        _container(_header(version=2), DOC): "archive header malformed",
        _container(_header(version=3, cons_bytes=0), DOC): "unsupported archive version 3",
        _container(_header(cons_bytes=-1), DOC): "archive header malformed",
        _container(_header(cons_bytes="1"), DOC): "archive header malformed",
    }
    for data, reason in cases.items():
        with pytest.raises(ArchiveError, match=f"^{reason}$"):
            _decode(data)


def test_a_short_consumer_section_reads_unexpected_eof() -> None:
    section = cbor2.dumps([_entry(DURABLE)])
    data = _container(_header(cons_bytes=len(section) + 5), DOC, section)
    with pytest.raises(ArchiveError, match=r"^unexpected EOF$"):
        _decode(data)


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ({"not": "a list"}, "archive consumers malformed"),
        ([["D"]], "archive consumer malformed"),
        ([_entry(DURABLE, extra=1)], "archive consumer malformed"),
        ([_entry(DURABLE, name="")], "archive consumer malformed"),
        ([_entry(DURABLE), _entry(DURABLE)], "archive consumer malformed"),
        ([_entry(DURABLE, name="a.b")], "archive consumer malformed"),
        ([_entry(DURABLE, name="../up")], "archive consumer malformed"),
        ([_entry(DURABLE, name="nul\x00")], "archive consumer malformed"),
        ([_entry(DURABLE, created_ns="x")], "archive consumer 'D' malformed"),
        ([_entry(DURABLE, state="text")], "archive consumer 'D' malformed"),
        ([_entry(DURABLE, config="{x")], "archive consumer 'D' malformed: .*"),
        (
            [_entry(DURABLE, config=json.dumps({"ack_policy": "sometimes"}))],
            "archive consumer 'D' malformed: .*",
        ),
        ([_entry(DURABLE, state=cbor2.dumps([1, 2]))], "archive consumer 'D' malformed: .*"),
    ],
)
def test_a_damaged_consumer_entry_refuses_the_archive(entries: Any, reason: str) -> None:
    with pytest.raises(ArchiveError, match=f"^{reason}$"):
        _decode(_with_consumers(entries))


def test_not_cbor_in_the_consumer_section_is_refused() -> None:
    data = _container(_header(cons_bytes=3), DOC, b"\xff\xff\xff")
    with pytest.raises(ArchiveError, match=r"^archive consumers malformed: .*"):
        _decode(data)


def test_every_truncation_of_an_archive_with_consumers_is_refused() -> None:
    data = b"".join(encode_archive(_archive(DURABLE, EPHEMERAL)))
    for cut in range(len(data)):
        with pytest.raises(ArchiveError):
            _decode(data[:cut], step=64)


def test_flipped_bytes_in_the_consumer_section_fail_the_checksum() -> None:
    data = b"".join(encode_archive(_archive(DURABLE)))
    at = data.index(b'"durable_name":"D"')  # the consumer's config, near the end
    bad = bytearray(data)
    bad[at + 17] ^= 0x01
    with pytest.raises(ArchiveError, match=r"^archive checksum mismatch$"):
        _decode(bytes(bad))
