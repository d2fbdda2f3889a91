"""raft.wire: frames and pysyncobj message codec (round trips, bounds, hostile input)."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raft.wire import (
    FrameDecoder,
    WireError,
    decode_messages,
    encode_frame,
    encode_messages,
)

ENTRY = (b"\x00\x01payload", 7, 3)

# One of each message pysyncobj sends (shapes taken from pysyncobj/syncobj.py).
MESSAGES = [
    {"type": "request_vote", "term": 5, "last_log_index": 10, "last_log_term": 4},
    {"type": "response_vote", "term": 5},
    {
        "type": "append_entries",
        "term": 5,
        "commit_index": 9,
        "prevLogIdx": 6,
        "prevLogTerm": 3,
        "entries": [ENTRY, (b"", 8, 5)],
    },
    {
        "type": "append_entries",
        "term": 5,
        "commit_index": 9,
        "prevLogIdx": 10,
        "prevLogTerm": 5,
        "entries": [],
    },
    {
        "type": "append_entries",
        "term": 5,
        "commit_index": 9,
        "serialized": (b"\x00" * 24 + b"chunk", True, False),
    },
    {"type": "append_entries", "term": 5, "commit_index": 9, "serialized": None},
    {"type": "next_node_idx", "next_node_idx": 11, "reset": False, "success": True, "term": 5},
    {"type": "next_node_idx", "next_node_idx": 3, "reset": True, "success": False},
    {"type": "apply_command", "command": b"\x00batch", "request_id": 42},
    {"type": "apply_command", "command": b"\x02membership"},
    {"type": "apply_command_response", "request_id": 42, "log_idx": 12, "log_term": 5},
    {"type": "apply_command_response", "request_id": 43, "error": 4},
    {"type": "timeout_now", "term": 5},
    # raft.quiet's own
    {"type": "quiet", "term": 5, "idx": 12, "log_term": 5, "commit": 12, "round": 3},
    {"type": "quiet_ack", "term": 5, "idx": 12, "round": 3},
    {"type": "wake", "term": 5},
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: m["type"])
def test_every_message_type_round_trips(msg: dict) -> None:
    assert decode_messages(encode_messages([msg])) == [msg]


def test_many_messages_in_one_payload() -> None:
    assert decode_messages(encode_messages(MESSAGES)) == MESSAGES


def test_chunked_transmission_is_refused() -> None:
    m = {
        "type": "append_entries",
        "transmission": "start",
        "data": b"x",
        "term": 1,
        "commit_index": 1,
        "prevLogIdx": 1,
        "prevLogTerm": 1,
    }
    with pytest.raises(WireError):
        encode_messages([m])
    with pytest.raises(WireError):
        encode_messages([{"type": "nonsense"}])


@pytest.mark.parametrize(
    "raw",
    [
        [[1, 5, 10]],  # wrong arity
        [[1, "5", 10, 4]],  # wrong type
        [[1, True, 10, 4]],  # bool is not an int
        [[3, 1, 1, 1, 1, [[b"x", 1]]]],  # short entry
        [[3, 1, 1, 1, 1, [["x", 1, 1]]]],  # str command
        [[99, 1]],  # unknown type
        {"type": "request_vote"},  # not an array
        [[5, 1, 1, True, None]],  # reset not bool
        [[9, 5, 12, 5, 12]],  # quiet without its round
        [[10, 5, "12", 3]],  # quiet_ack idx not int
        [[11, None]],  # wake without a term
    ],
)
def test_malformed_messages_raise_wire_error(raw: object) -> None:
    with pytest.raises(WireError):
        decode_messages(cbor2.dumps(raw))


def test_tags_and_garbage_raise_wire_error() -> None:
    with pytest.raises(WireError):
        decode_messages(cbor2.dumps(cbor2.CBORTag(4242, [1])))
    for junk in (b"", b"\xff", b"\x9f\x9f\x9f", b"\x5b" + b"\xff" * 8):
        with pytest.raises(WireError):
            decode_messages(junk)


def test_frame_round_trip_and_bounds() -> None:
    f = encode_frame("g-7f3a", b"payload")
    dec = FrameDecoder()
    dec.feed(f + f)
    assert dec.next_frame() == ("g-7f3a", b"payload")
    assert dec.next_frame() == ("g-7f3a", b"payload")
    assert dec.next_frame() is None
    with pytest.raises(WireError):
        encode_frame("", b"x")
    with pytest.raises(WireError):
        encode_frame("g" * 256, b"x")
    with pytest.raises(WireError):
        encode_frame("g", b"x" * 100, frame_bytes_max=50)
    small = FrameDecoder(frame_bytes_max=64)
    with pytest.raises(WireError):
        small.feed(encode_frame("g", b"x" * 100))  # refused from the header alone
    with pytest.raises(WireError):
        FrameDecoder().feed(b"\x00\x00\x00\x01")  # body too short for a group id


entries = st.lists(
    st.tuples(st.binary(max_size=64), st.integers(0, 2**63), st.integers(0, 2**63)),
    max_size=5,
)
messages = st.one_of(
    st.builds(
        lambda t, i, lt: {
            "type": "request_vote",
            "term": t,
            "last_log_index": i,
            "last_log_term": lt,
        },
        st.integers(0, 2**63),
        st.integers(0, 2**63),
        st.integers(0, 2**63),
    ),
    st.builds(
        lambda t, c, p, pt, es: {
            "type": "append_entries",
            "term": t,
            "commit_index": c,
            "prevLogIdx": p,
            "prevLogTerm": pt,
            "entries": es,
        },
        st.integers(0, 2**40),
        st.integers(0, 2**40),
        st.integers(0, 2**40),
        st.integers(0, 2**40),
        entries,
    ),
    st.builds(
        lambda n, r, s: {"type": "next_node_idx", "next_node_idx": n, "reset": r, "success": s},
        st.integers(0, 2**40),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(
        lambda c, r: {"type": "apply_command", "command": c, "request_id": r},
        st.binary(max_size=100),
        st.integers(0, 2**31),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, max_size=6))
def test_messages_round_trip_property(msgs: list[dict]) -> None:
    assert decode_messages(encode_messages(msgs)) == msgs


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=20), st.binary(max_size=300)),
        min_size=1,
        max_size=8,
    ),
    st.data(),
)
def test_frames_survive_any_chunking(frames: list[tuple[str, bytes]], data: st.DataObject) -> None:
    frames = [(g, p) for g, p in frames if len(g.encode()) <= 255]
    stream = b"".join(encode_frame(g, p) for g, p in frames)
    dec = FrameDecoder()
    out = []
    pos = 0
    while pos < len(stream):
        n = data.draw(st.integers(1, 64))
        dec.feed(stream[pos : pos + n])
        pos += n
        while (f := dec.next_frame()) is not None:
            out.append(f)
    assert out == frames
    assert dec.buffered_bytes == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_ever_raise_wire_error(blob: bytes) -> None:
    try:
        decode_messages(blob)
    except WireError:
        pass
    dec = FrameDecoder(frame_bytes_max=1024)
    try:
        dec.feed(blob)
        while dec.next_frame() is not None:
            pass
    except WireError:
        pass
