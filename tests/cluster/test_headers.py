"""cluster.headers: NATS header block parsing (strict and lenient)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.headers import HeaderParseError, Headers, encode_headers, parse_headers
from cluster.stream_fsm.machine import MSG_ID, _only_msg_id


def test_minimal_block() -> None:
    h = parse_headers(b"NATS/1.0\r\n\r\n")
    assert h == Headers()
    assert len(h) == 0
    assert h.get("Nats-Msg-Id") is None


def test_fields_multiple_values_and_order() -> None:
    h = parse_headers(b"NATS/1.0\r\nA: 1\r\nB: x\r\nA: 2\r\n\r\n")
    assert h.fields == (("A", "1"), ("B", "x"), ("A", "2"))
    assert h.get("A") == "1"
    assert h.get_all("A") == ["1", "2"]
    assert "B" in h
    assert list(h) == list(h.fields)


def test_keys_are_case_sensitive() -> None:
    h = parse_headers(b"NATS/1.0\r\nnats-msg-id: lc1\r\n\r\n")
    assert h.get("Nats-Msg-Id") is None
    assert h.get("nats-msg-id") == "lc1"


def test_no_space_and_trimmed_values() -> None:
    h = parse_headers(b"NATS/1.0\r\nNats-Msg-Id:nospace\r\nK:  \tpadded \t\r\nE:\r\n\r\n")
    assert h.get("Nats-Msg-Id") == "nospace"
    assert h.get("K") == "padded"
    assert h.get("E") == ""


def test_colon_inside_value() -> None:
    assert parse_headers(b"NATS/1.0\r\nK: a:b: c\r\n\r\n").get("K") == "a:b: c"


@pytest.mark.parametrize(
    ("block", "status", "desc"),
    [
        (b"NATS/1.0 503\r\n\r\n", 503, ""),
        (b"NATS/1.0 404 No Messages\r\n\r\n", 404, "No Messages"),
        (
            b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\n\r\n",
            408,
            "Request Timeout",
        ),
    ],
)
def test_status_line(block: bytes, status: int, desc: str) -> None:
    h = parse_headers(block)
    assert h.status == status
    assert h.description == desc


def test_status_line_keeps_following_headers() -> None:
    h = parse_headers(b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\n\r\n")
    assert h.get("Nats-Last-Consumer") == "5"


@pytest.mark.parametrize(
    "block",
    [
        b"",
        b"NATS/1.0\r\n",
        b"NATS/1.0\r\nA: 1\r\n",
        b"HTTP/1.0\r\n\r\n",
        b"NATS/1.0 50\r\n\r\n",
        b"NATS/1.0 abc\r\n\r\n",
        b"NATS/1.0x\r\n\r\n",
        b"NATS/1.0\r\nno colon\r\n\r\n",
        b"NATS/1.0\r\n: empty key\r\n\r\n",
        b"NATS/1.0\r\nbad key: v\r\n\r\n",
        b"NATS/1.0\r\nA: 1\r\n\r\nB: 2\r\n\r\n",
    ],
)
def test_strict_rejects(block: bytes) -> None:
    with pytest.raises(HeaderParseError):
        parse_headers(block)
    # Lenient parsing never raises.
    parse_headers(block, strict=False)


def test_lenient_skips_bad_lines_but_keeps_good_ones() -> None:
    h = parse_headers(b"garbage\r\nno colon\r\nNats-Msg-Id: x\r\n", strict=False)
    assert h.status is None
    assert h.get("Nats-Msg-Id") == "x"


def test_undecodable_bytes_round_trip() -> None:
    h = parse_headers(b"NATS/1.0\r\nK: \xff\xfe\r\n\r\n")
    v = h.get("K")
    assert v is not None
    assert v.encode("utf-8", "surrogateescape") == b"\xff\xfe"


def test_encode_round_trip_and_status() -> None:
    b = encode_headers([("A", "1"), ("A", "2")], status=404, description="No Messages")
    assert b == b"NATS/1.0 404 No Messages\r\nA: 1\r\nA: 2\r\n\r\n"
    h = parse_headers(b)
    assert (h.status, h.description, h.fields) == (404, "No Messages", (("A", "1"), ("A", "2")))
    assert encode_headers([]) == b"NATS/1.0\r\n\r\n"


@pytest.mark.parametrize("fields", [[("", "v")], [("a b", "v")], [("a:b", "v")], [("k", "a\r\nb")]])
def test_encode_rejects_bad_fields(fields: list[tuple[str, str]]) -> None:
    with pytest.raises(ValueError):
        encode_headers(fields)


_key = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters=":"), min_size=1
)
_value = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=20).map(
    lambda s: s.strip(" \t")
)


@given(st.lists(st.tuples(_key, _value), max_size=8))
def test_encode_parse_round_trip(fields: list[tuple[str, str]]) -> None:
    assert parse_headers(encode_headers(fields)).fields == tuple(fields)


@given(st.binary(max_size=200))
def test_parse_only_raises_named_error(data: bytes) -> None:
    try:
        parse_headers(data)
    except HeaderParseError:
        pass
    parse_headers(data, strict=False)
    parse_headers(b"NATS/1.0\r\n" + data, strict=False)


_ID_BLOCK_PARTS = st.sampled_from(
    [b"NATS/1.0", b"\r\n", b"Nats-Msg-Id", b":", b" ", b"\t", b"x", b"\r", b"\n", b"\xff", b"A: b"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ID_BLOCK_PARTS, max_size=12), st.text(max_size=8))
def test_only_msg_id_fast_path_equals_full_parser(parts: list[bytes], mid: str) -> None:
    """The state machine's shortcut for a block holding only ``Nats-Msg-Id``
    gives what the non-strict parser gives, and declines every other block."""
    blocks = [
        b"".join(parts),
        b"NATS/1.0\r\nNats-Msg-Id:" + b"".join(parts) + b"\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: " + mid.encode("utf-8", "surrogateescape") + b"\r\n\r\n",
    ]
    for block in blocks:
        fast = _only_msg_id(block)
        h = parse_headers(block, strict=False)
        if fast is not None:
            assert [k for k, _ in h.fields] == [MSG_ID]
            assert fast == h.get(MSG_ID)
    if "\r\n" not in mid:
        assert _only_msg_id(blocks[2]) == mid.strip(" \t")
