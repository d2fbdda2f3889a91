"""Hostile client protocol input: the same bytes to trijet and nats-server.

Families: deep and huge JSON in CONNECT (with and without auth), CONNECT
field types and protocol numbers, subjects with thousands of tokens (a
subscription that makes a later publish walk deep), oversized and malformed
ops, deep JSON in an ack's ``-NAK``.  Each case compares the transcripts and
checks that an observer connected beforehand is still served.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator

import pytest

from tests.hostile.conftest import (
    CONNECT,
    LIVENESS_S,
    REPLY_S,
    Observer,
    api,
    api_client,
    read_msg,
    send_api,
    start_pair,
    stop_pair,
)
from tests.support import RawClient, ServerProcess
from tests.support.raw import Transcript


def deep(n: int, inner: bytes = b"1") -> bytes:
    return b"[" * n + inner + b"]" * n


def deep_obj(n: int) -> bytes:
    return b'{"a":' * n + b"1" + b"}" * n


def connect_with(field: bytes) -> bytes:
    return b'CONNECT {"verbose":false,"headers":true,' + field + b"}\r\n"


STARS = b".".join([b"*"] * 1000)
LONG = b".".join([b"t"] * 1000)
A2000 = b".".join([b"a"] * 2000)

# (id, input); compared between the servers, observer served meanwhile
CASES: list[tuple[str, bytes]] = [
    ("connect_deep_array_1000", connect_with(b'"x":' + deep(1000))),
    ("connect_deep_array_1900", connect_with(b'"x":' + deep(1900))),
    ("connect_deep_object_500", connect_with(b'"x":' + deep_obj(500))),
    ("connect_deep_past_control_line", connect_with(b'"x":' + deep(3000))),
    ("connect_deep_in_known_field", connect_with(b'"name":' + deep(1000))),
    ("connect_deep_unclosed", connect_with(b'"x":' + b"[" * 1500)),
    ("connect_deep_top_level", b"CONNECT " + deep(1500) + b"\r\n"),
    ("info_from_client_deep", CONNECT + b"INFO " + deep(1500) + b"\r\n"),
    ("connect_protocol_-1", connect_with(b'"protocol":-1')),
    ("connect_protocol_2", connect_with(b'"protocol":2')),
    ("connect_protocol_int64_max", connect_with(b'"protocol":9223372036854775807')),
    ("connect_protocol_past_int64", connect_with(b'"protocol":9223372036854775808')),
    ("connect_protocol_huge", connect_with(b'"protocol":' + b"9" * 400)),
    ("connect_protocol_float", connect_with(b'"protocol":1.5')),
    ("connect_protocol_string", connect_with(b'"protocol":"1"')),
    ("connect_protocol_bool", connect_with(b'"protocol":true')),
    ("connect_protocol_null", connect_with(b'"protocol":null')),
    ("connect_name_number", connect_with(b'"name":5')),
    ("connect_lang_object", connect_with(b'"lang":{}')),
    ("connect_user_array", connect_with(b'"user":[]')),
    ("connect_echo_string", connect_with(b'"echo":"no"')),
    ("connect_verbose_null", connect_with(b'"verbose":null')),
    ("connect_huge_name", connect_with(b'"name":"' + b"n" * 4000 + b'"')),
    ("connect_many_keys", connect_with(b",".join(b'"k%d":1' % i for i in range(400)))),
    ("connect_trailing_value", b'CONNECT {"verbose":false}{"x":1}\r\n'),
    ("sub_1000_stars_then_pub", CONNECT + b"SUB " + STARS + b" 1\r\nPUB " + LONG + b" 2\r\nhi\r\n"),
    ("sub_2000_tokens_then_pub", CONNECT + b"SUB " + A2000 + b" 1\r\nPUB " + A2000 + b" 0\r\n\r\n"),
    (
        "sub_1000_tokens_fwc",
        CONNECT + b"SUB " + STARS + b".> 1\r\nPUB " + LONG + b".x 1\r\nx\r\n",
    ),
    ("sub_empty_tokens", CONNECT + b"SUB " + b"." * 2000 + b" 1\r\n"),
    ("pub_empty_tokens", CONNECT + b"SUB > 1\r\nPUB " + b"." * 2000 + b" 1\r\nx\r\n"),
    ("unsub_long", CONNECT + b"SUB " + STARS + b" 1\r\nUNSUB 1\r\nPUB " + LONG + b" 0\r\n\r\n"),
    ("pub_size_huge", CONNECT + b"PUB foo 99999999999999999999\r\n"),
    ("hpub_header_past_total", CONNECT + b"HPUB foo 900 10\r\n"),
    ("args_many", CONNECT + b"SUB " + b" ".join([b"a"] * 1500) + b"\r\n"),
    ("spaces_many", CONNECT + b"SUB" + b" " * 3000 + b"foo 1\r\n"),
    ("nul_bytes", CONNECT + b"\x00" * 100 + b"\r\n"),
    ("binary_garbage", CONNECT + bytes(range(256)) + b"\r\n"),
    ("control_line_no_newline", CONNECT + b"PUB " + b"x" * 70_000),
]


def run_case(sp: ServerProcess, data: bytes) -> Transcript:
    with Observer(sp) as obs, RawClient(sp.host, sp.port, timeout=LIVENESS_S) as c:
        t = c.exchange(data, timeout=LIVENESS_S, pongs_owed=0)
        obs.assert_serving()
    return t


@pytest.mark.parametrize(("case_id", "data"), CASES, ids=[c[0] for c in CASES])
def test_protocol_input(pair: dict[str, ServerProcess], case_id: str, data: bytes) -> None:
    got = {kind: run_case(sp, data) for kind, sp in pair.items()}
    ref, tj = got["reference"], got["trijet"]
    assert tj.normalised() == ref.normalised(), case_id
    assert tj.closed == ref.closed, case_id


@pytest.fixture(scope="module")
def auth_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    base = tmp_path_factory.mktemp("hostile-auth")
    p = start_pair(base, ["--user", "u", "--pass", "p"])
    try:
        yield p
    finally:
        stop_pair(p)


AUTH_CASES: list[tuple[str, bytes]] = [
    ("deep_no_creds", connect_with(b'"x":' + deep(1500))),
    ("deep_with_creds", connect_with(b'"user":"u","pass":"p","x":' + deep(1500))),
    ("deep_in_pass", connect_with(b'"user":"u","pass":' + deep(1500))),
    ("protocol_-1_good_creds", connect_with(b'"user":"u","pass":"p","protocol":-1')),
    ("protocol_-1_bad_creds", connect_with(b'"user":"u","pass":"x","protocol":-1')),
]


@pytest.mark.parametrize(("case_id", "data"), AUTH_CASES, ids=[c[0] for c in AUTH_CASES])
def test_protocol_input_with_auth(
    auth_pair: dict[str, ServerProcess], case_id: str, data: bytes
) -> None:
    got: dict[str, Transcript] = {}
    for kind, sp in auth_pair.items():
        with RawClient(sp.host, sp.port, timeout=LIVENESS_S) as c:
            got[kind] = c.exchange(data, timeout=LIVENESS_S, pongs_owed=0)
        assert sp.alive(), kind
        with RawClient(sp.host, sp.port, timeout=LIVENESS_S) as ok:
            good = ok.exchange(connect_with(b'"user":"u","pass":"p"'), timeout=LIVENESS_S)
            assert good.normalised() == [b"PONG"], (kind, good)
    assert got["trijet"].normalised() == got["reference"].normalised(), case_id
    assert got["trijet"].closed == got["reference"].closed, case_id


@pytest.mark.parametrize(
    "nak",
    [
        b"-NAK " + b'{"delay":' + deep(5000) + b"}",
        b"-NAK " + deep_obj(3000),
        b'-NAK {"delay":' + b"9" * 500 + b"}",
        b"-NAK " + b"{" * 20000,
    ],
    ids=["delay_deep_array", "deep_object", "delay_huge_number", "unclosed"],
)
def test_nak_hostile_json(pair: dict[str, ServerProcess], nak: bytes) -> None:
    """A consumer's -NAK with hostile JSON on its ack subject: both servers go
    on, and the consumer still answers (the message stays pending)."""
    stream = f"NAK{zlib.crc32(nak)}"
    for kind, sp in pair.items():
        assert "error" not in api(
            sp, f"$JS.API.STREAM.CREATE.{stream}", b'{"name":"%s"}' % stream.encode()
        ), kind
        cfg = {"stream_name": stream, "config": {"durable_name": "C", "ack_policy": "explicit"}}
        created = api(sp, f"$JS.API.CONSUMER.CREATE.{stream}.C", json.dumps(cfg).encode())
        assert "error" not in created, (kind, created)
        with Observer(sp) as obs, api_client(sp) as c:
            c.send(b"PUB %s 2\r\nhi\r\n" % stream.encode())
            send_api(c, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.C", b'{"batch":1}')
            deadline = time.monotonic() + REPLY_S
            while b"\r\nhi\r\n" not in c.buf and c._recv(deadline):
                pass
            line = c.buf[c.buf.find(b"MSG ") :].split(b"\r\n", 1)[0].split()
            assert len(line) == 5 and line[3].startswith(b"$JS.ACK."), (kind, c.buf[:300])
            c.buf = b""
            c.send(b"PUB %s %d\r\n%s\r\n" % (line[3], len(nak), nak))
            obs.assert_serving()
            send_api(c, f"$JS.API.CONSUMER.INFO.{stream}.C", b"")
            info = read_msg(c)
            assert info is not None and b'"error"' not in info, (kind, info)
        assert sp.alive(), kind


@pytest.fixture(scope="module")
def long_line_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    """Control lines up to 1 MB: CONNECT JSON can nest past Go's 10,000 levels."""
    base = tmp_path_factory.mktemp("hostile-long-lines")
    p = start_pair(base, [], config="max_control_line: 1MB\n")
    try:
        yield p
    finally:
        stop_pair(p)


STARS_10K = b".".join([b"*"] * 10_001)
A_10K = b".".join([b"a"] * 10_001)
LONG_LINE_CASES: list[tuple[str, bytes]] = [
    ("connect_depth_5000", connect_with(b'"x":' + deep(5000))),
    ("connect_depth_at_limit", connect_with(b'"x":' + deep(9999))),
    ("connect_depth_past_limit", connect_with(b'"x":' + deep(10_000))),
    ("connect_depth_30000", connect_with(b'"x":' + deep(30_000))),
    ("connect_unknown_5000_digits", connect_with(b'"x":' + b"9" * 5000)),
    ("connect_protocol_5000_digits", connect_with(b'"protocol":' + b"1" * 5000)),
    ("connect_unknown_huge_float", connect_with(b'"x":-' + b"9" * 5000 + b".5e3")),
    (
        "sub_10001_stars_then_pub",
        CONNECT + b"SUB " + STARS_10K + b" 1\r\nPUB " + A_10K + b" 1\r\nx\r\n",
    ),
    ("pub_100k_tokens", CONNECT + b"SUB > 1\r\nPUB " + b"a." * 100_000 + b"a 1\r\nx\r\n"),
]


@pytest.mark.parametrize(("case_id", "data"), LONG_LINE_CASES, ids=[c[0] for c in LONG_LINE_CASES])
def test_long_line_input(
    long_line_pair: dict[str, ServerProcess], case_id: str, data: bytes
) -> None:
    got = {kind: run_case(sp, data) for kind, sp in long_line_pair.items()}
    ref, tj = got["reference"], got["trijet"]
    assert tj.normalised() == ref.normalised(), case_id
    assert tj.closed == ref.closed, case_id
