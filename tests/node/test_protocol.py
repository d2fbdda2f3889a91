"""The sans-IO protocol parser: every op, every error path, fed whole and byte by byte."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.protocol.connection import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    ProtocolConnection,
    ProtocolViolation,
    Role,
)
from node.protocol.events import (
    OK,
    PING,
    PONG,
    Connect,
    Err,
    HMsg,
    HPub,
    Info,
    Msg,
    Pub,
    RMsg,
    RSub,
    RUnsub,
    Sub,
    Unsub,
)
from node.protocol.wire import hmsg_bytes, info_bytes, msg_bytes, serialize


def feed_whole(role: Role, data: bytes, **kw: object) -> list[object]:
    return list(ProtocolConnection(role, **kw).receive_data(data))  # type: ignore[arg-type]


def feed_bytewise(role: Role, data: bytes, **kw: object) -> list[object]:
    conn = ProtocolConnection(role, **kw)  # type: ignore[arg-type]
    out: list[object] = []
    for i in range(len(data)):
        out.extend(conn.receive_data(data[i : i + 1]))
    return out


def both(role: Role, data: bytes, **kw: object) -> list[object]:
    whole = feed_whole(role, data, **kw)
    assert feed_bytewise(role, data, **kw) == whole
    # and in two uneven pieces
    for cut in (1, len(data) // 3, len(data) - 1):
        conn = ProtocolConnection(role, **kw)  # type: ignore[arg-type]
        pieces = conn.receive_data(data[:cut]) + conn.receive_data(data[cut:])
        assert pieces == whole
    return whole


SERVER_CASES: list[tuple[bytes, list[object]]] = [
    (b"PUB foo 3\r\nabc\r\n", [Pub(b"foo", None, b"abc")]),
    (b"PUB foo bar 3\r\nabc\r\n", [Pub(b"foo", b"bar", b"abc")]),
    (b"PUB foo 0\r\n\r\n", [Pub(b"foo", None, b"")]),
    (b"pub\tfoo\t\t1\r\nx\r\n", [Pub(b"foo", None, b"x")]),
    (b"PUB  foo   1\nx\r\n", [Pub(b"foo", None, b"x")]),
    (b"PUB foo 2\r\n\r\n\r\n", [Pub(b"foo", None, b"\r\n")]),
    (
        b"HPUB foo r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [HPub(b"foo", b"r", b"NATS/1.0\r\n\r\n", b"hi")],
    ),
    (b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", [HPub(b"foo", None, b"NATS/1.0\r\n\r\n", b"")]),
    (b"SUB foo 1\r\n", [Sub(b"foo", None, b"1")]),
    (b"SUB foo.* q 22\r\n", [Sub(b"foo.*", b"q", b"22")]),
    (b"UNSUB 1\r\n", [Unsub(b"1", None)]),
    (b"UNSUB 1 5\r\n", [Unsub(b"1", 5)]),
    (b"UNSUB 1 x\r\n", [Unsub(b"1", 0)]),
    (b"UNSUB 1 -3\r\n", [Unsub(b"1", 0)]),
    (b"PING\r\nPONG\r\n", [PING, PONG]),
    (b"ping\r\nPINGxyz\r\nPONGabc\r\n", [PING, PING, PONG]),
    (b"+OK\r\n", [OK]),
    (b"-ERR 'boom'\r\n", [Err("boom")]),
    (b'CONNECT {"verbose":false}\r\n', [Connect({"verbose": False})]),
    (b'CONNECT {"name":"a b"}\r\nPING\r\n', [Connect({"name": "a b"}), PING]),
    # fatal errors
    (b"XYZ\r\n", [ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")]),
    (b"PIN\r\n", [ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")]),
    (b"PUBX foo 1\r\nx\r\n", [ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")]),
    (b"SUB\r\n", [ProtocolViolation(ERR_UNKNOWN_OP, "missing arguments")]),
    (b"PUB\r\n", [ProtocolViolation(ERR_UNKNOWN_OP, "missing arguments")]),
    (b"SUB \r\n", [ProtocolViolation(None, "missing arguments")]),
    (b"SUB foo\r\n", [ProtocolViolation(None, "SUB arguments")]),
    (b"SUB foo q 1 x\r\n", [ProtocolViolation(None, "SUB arguments")]),
    (b"UNSUB 1 2 3\r\n", [ProtocolViolation(None, "UNSUB arguments")]),
    (b"PUB foo\r\n", [ProtocolViolation(None, "PUB arguments")]),
    (b"PUB foo x\r\n", [ProtocolViolation(None, "PUB size")]),
    (b"PUB foo -1\r\n", [ProtocolViolation(None, "PUB size")]),
    (b"PUB foo 1 2 3\r\n", [ProtocolViolation(None, "PUB arguments")]),
    (
        b"PUB foo 3\r\nabcdef\r\n",
        [ProtocolViolation(ERR_UNKNOWN_OP, "payload not followed by CRLF")],
    ),
    (b"PUB foo 1\nx\n", [ProtocolViolation(ERR_UNKNOWN_OP, "payload not followed by CRLF")]),
    (b"PUB foo 2000000\r\n", [ProtocolViolation(ERR_MAX_PAYLOAD, "payload size")]),
    (b"CONNECT {bad\r\n", [ProtocolViolation(None, "bad JSON")]),
    (b"CONNECT []\r\n", [ProtocolViolation(None, "JSON is not an object")]),
    (b"MSG foo 1 1\r\nx\r\n", [ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")]),
    (b"HPUB foo 12 12\r\n", [ProtocolViolation(None, "HPUB without headers support")]),
    (
        b"PING\r\nXYZ\r\nPING\r\n",
        [PING, ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")],
    ),
]


@pytest.mark.parametrize(("data", "expected"), SERVER_CASES)
def test_server_role(data: bytes, expected: list[object]) -> None:
    headers = not data.startswith(b"HPUB foo 12 12\r\n") or b"NATS" in data
    got = both(Role.SERVER, data, headers=headers)
    assert got == expected


def test_hpub_sizes_checked() -> None:
    assert both(Role.SERVER, b"HPUB foo 30 10\r\n", headers=True) == [
        ProtocolViolation(None, "HPUB header size larger than total")
    ]
    assert both(Role.SERVER, b"HPUB foo 10 3000000\r\n", headers=True) == [
        ProtocolViolation(ERR_MAX_PAYLOAD, "payload size")
    ]


def test_max_control_line() -> None:
    line = b"SUB " + b"a" * 5000 + b" 1\r\n"
    assert both(Role.SERVER, line) == [ProtocolViolation(ERR_MAX_CONTROL_LINE, "control line")]
    # detected before the line ends
    conn = ProtocolConnection(Role.SERVER, max_control_line=64)
    assert conn.receive_data(b"SUB " + b"a" * 100) == [
        ProtocolViolation(ERR_MAX_CONTROL_LINE, "control line")
    ]
    # exactly at the limit is fine
    conn = ProtocolConnection(Role.SERVER, max_control_line=10)
    assert conn.receive_data(b"SUB abc 12\r\n") == [Sub(b"abc", None, b"12")]


def test_dead_after_violation() -> None:
    conn = ProtocolConnection(Role.SERVER)
    assert conn.receive_data(b"XYZ\r\n")
    assert conn.dead
    assert conn.receive_data(b"PING\r\n") == []


def test_large_payload_in_chunks() -> None:
    payload = bytes(range(256)) * 2000
    data = b"PUB big %d\r\n" % len(payload) + payload + b"\r\nPING\r\n"
    conn = ProtocolConnection(Role.SERVER)
    out: list[object] = []
    for i in range(0, len(data), 4096):
        out.extend(conn.receive_data(data[i : i + 4096]))
    assert out == [Pub(b"big", None, payload), PING]
    assert conn.buffered_bytes() == 0


CLIENT_CASES: list[tuple[bytes, list[object]]] = [
    (b'INFO {"server_id":"x"} \r\n', [Info({"server_id": "x"})]),
    (b"MSG foo 1 3\r\nabc\r\n", [Msg(b"foo", b"1", None, b"abc")]),
    (b"MSG foo 1 bar 3\r\nabc\r\n", [Msg(b"foo", b"1", b"bar", b"abc")]),
    (b"MSG inb 1  0\r\n\r\n", [Msg(b"inb", b"1", None, b"")]),
    (
        b"HMSG foo 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [HMsg(b"foo", b"1", b"r", b"NATS/1.0\r\n\r\n", b"hi")],
    ),
    (b"+OK\r\nPING\r\nPONG\r\n", [OK, PING, PONG]),
    (b"-ERR 'Stale Connection'\r\n", [Err("Stale Connection")]),
    # only spaces and tabs separate arguments: VT and FF belong to the token
    (b"MSG \x0bfoo 1 3\r\nabc\r\n", [Msg(b"\x0bfoo", b"1", None, b"abc")]),
]


@pytest.mark.parametrize(("data", "expected"), CLIENT_CASES)
def test_client_role(data: bytes, expected: list[object]) -> None:
    assert both(Role.CLIENT, data) == expected


ROUTE_CASES: list[tuple[bytes, list[object]]] = [
    (b"RS+ $G foo\r\n", [RSub(b"$G", b"foo", None, 0)]),
    (b"RS+ $G foo q 3\r\n", [RSub(b"$G", b"foo", b"q", 3)]),
    (b"RS- $G foo q\r\n", [RUnsub(b"$G", b"foo", b"q")]),
    (b"RMSG $G foo 2\r\nhi\r\n", [RMsg(b"$G", b"foo", None, (), None, b"hi")]),
    (b"RMSG $G foo r 2\r\nhi\r\n", [RMsg(b"$G", b"foo", b"r", (), None, b"hi")]),
    (
        b"RMSG $G foo + r q1 q2 2\r\nhi\r\n",
        [RMsg(b"$G", b"foo", b"r", (b"q1", b"q2"), None, b"hi")],
    ),
    (b"RMSG $G foo | q1 2\r\nhi\r\n", [RMsg(b"$G", b"foo", None, (b"q1",), None, b"hi")]),
    (
        b"HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [RMsg(b"$G", b"foo", None, (), b"NATS/1.0\r\n\r\n", b"hi")],
    ),
    (b'CONNECT {"cluster":"c"}\r\n', [Connect({"cluster": "c"})]),
    # only spaces and tabs separate arguments, on the fast and the careful path alike
    # (found by the fuzzer: a chunked RMSG split b"\x0bfoo" into b"foo")
    (
        b"RMSG $G \x0bfoo reply 5\r\nhello\r\n",
        [RMsg(b"$G", b"\x0bfoo", b"reply", (), None, b"hello")],
    ),
    (b"RS+ $G f\x0coo\r\n", [RSub(b"$G", b"f\x0coo", None, 0)]),
    (b"LMSG LC $G \x0bfoo 0 2\r\nhi\r\n", [RMsg(b"$G", b"\x0bfoo", None, (), None, b"hi", b"LC")]),
    # leaf-origin forms (nats-server's lnoc): the leaf cluster first, always two sizes
    (b"LS+ LC $G foo\r\n", [RSub(b"$G", b"foo", None, 0, b"LC")]),
    (b"LS+ LC $G foo q 2\r\n", [RSub(b"$G", b"foo", b"q", 2, b"LC")]),
    (b"LS- LC $G foo q\r\n", [RUnsub(b"$G", b"foo", b"q", b"LC")]),
    (b"LMSG LC $G foo 0 2\r\nhi\r\n", [RMsg(b"$G", b"foo", None, (), None, b"hi", b"LC")]),
    (
        b"LMSG LC $G foo + r q1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [RMsg(b"$G", b"foo", b"r", (b"q1",), b"NATS/1.0\r\n\r\n", b"hi", b"LC")],
    ),
]


@pytest.mark.parametrize(("data", "expected"), ROUTE_CASES)
def test_route_role(data: bytes, expected: list[object]) -> None:
    assert both(Role.ROUTE, data) == expected


# a leaf link carries no account (the link is bound to one); bytes as nats-server 2.15.1 sends
LEAF_CASES: list[tuple[bytes, list[object]]] = [
    (b"LS+ $JS.hub.API.STREAM.>\r\n", [RSub(b"", b"$JS.hub.API.STREAM.>", None, 0)]),
    (b"LS+ leaf.q workers 1\r\n", [RSub(b"", b"leaf.q", b"workers", 1)]),
    (b"LS- leaf.q workers\r\n", [RUnsub(b"", b"leaf.q", b"workers")]),
    (b"LS- leaf.plain.*\r\n", [RUnsub(b"", b"leaf.plain.*", None)]),
    (b"LMSG leaf.plain.x 3\r\nabc\r\n", [RMsg(b"", b"leaf.plain.x", None, (), None, b"abc")]),
    (
        b"LMSG hub.svc _INBOX.a.b 2\r\nhi\r\n",
        [RMsg(b"", b"hub.svc", b"_INBOX.a.b", (), None, b"hi")],
    ),
    (
        b"HMSG leaf.q + _INBOX.f.g workers 18 20\r\nNATS/1.0\r\nX: 1\r\n\r\nyo\r\n",
        [RMsg(b"", b"leaf.q", b"_INBOX.f.g", (b"workers",), b"NATS/1.0\r\nX: 1\r\n\r\n", b"yo")],
    ),
    (b"LMSG q.x | w1 w2 2\r\nhi\r\n", [RMsg(b"", b"q.x", None, (b"w1", b"w2"), None, b"hi")]),
    (b'CONNECT {"remote_account":"$G"}\r\n', [Connect({"remote_account": "$G"})]),
]


@pytest.mark.parametrize(("data", "expected"), LEAF_CASES)
def test_leaf_role(data: bytes, expected: list[object]) -> None:
    assert both(Role.LEAF, data) == expected


def test_serialize_round_trips() -> None:
    events = [
        Pub(b"a", None, b"x"),
        Pub(b"a", b"r", b""),
        HPub(b"a", b"r", b"NATS/1.0\r\nK: v\r\n\r\n", b"body"),
        Sub(b"a.*", b"q", b"7"),
        Sub(b"a", None, b"8"),
        Unsub(b"7", None),
        Unsub(b"7", 3),
        PING,
        PONG,
    ]
    data = b"".join(serialize(e) for e in events)
    conn = ProtocolConnection(Role.SERVER, headers=True)
    conn.receive_data(b"")
    got = conn.receive_data(data)
    assert [e for e in got if type(e) is not type(OK)] == events
    route = [
        RSub(b"$G", b"x", None, 0),
        RSub(b"$G", b"x", b"q", 2),
        RUnsub(b"$G", b"x", b"q"),
        RMsg(b"$G", b"x", b"r", (b"q",), None, b"p"),
        RMsg(b"$G", b"x", None, (), b"NATS/1.0\r\n\r\n", b"p"),
    ]
    rconn = ProtocolConnection(Role.ROUTE)
    assert rconn.receive_data(b"".join(serialize(e) for e in route)) == route


def test_server_output_helpers() -> None:
    assert info_bytes({"a": 1}) == b'INFO {"a":1} \r\n'
    assert msg_bytes(b"s", b"1", None, b"hi") == b"MSG s 1 2\r\nhi\r\n"
    assert msg_bytes(b"s", b"1", b"r", b"hi") == b"MSG s 1 r 2\r\nhi\r\n"
    assert hmsg_bytes(b"s", b"1", None, b"NATS/1.0\r\n\r\n", b"hi") == (
        b"HMSG s 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    )
    conn = ProtocolConnection(Role.CLIENT)
    assert conn.receive_data(hmsg_bytes(b"s", b"1", b"r", b"H", b"p")) == [
        HMsg(b"s", b"1", b"r", b"H", b"p")
    ]


ops = st.one_of(
    st.builds(
        lambda s, r, p: Pub(s, r, p),
        st.sampled_from([b"a", b"a.b", b"x.y.z"]),
        st.one_of(st.none(), st.just(b"_INBOX.1")),
        st.binary(max_size=300),
    ),
    st.builds(
        lambda s, r, p: HPub(s, r, b"NATS/1.0\r\nA: b\r\n\r\n", p),
        st.sampled_from([b"a", b"h.x"]),
        st.one_of(st.none(), st.just(b"_INBOX.1"), st.just(b"7")),
        st.binary(max_size=100),
    ),
    st.builds(
        lambda s, sid: Sub(s, None, sid),
        st.sampled_from([b"a", b"a.*", b">"]),
        st.sampled_from([b"1", b"22"]),
    ),
    st.just(PING),
    st.just(PONG),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ops, max_size=20), st.lists(st.integers(1, 64), min_size=1, max_size=50))
def test_any_split_yields_same_events(events: list[object], cuts: list[int]) -> None:
    data = b"".join(serialize(e) for e in events)  # type: ignore[arg-type]
    conn = ProtocolConnection(Role.SERVER, headers=True)
    out: list[object] = []
    pos = 0
    i = 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        out.extend(conn.receive_data(data[pos : pos + step]))
        pos += step
        i += 1
    assert out == events


pubs = st.lists(
    st.builds(
        lambda s, r, p: Pub(s, r, p),
        st.sampled_from([b"a", b"b.c"]),
        st.one_of(st.none(), st.just(b"_INBOX.9")),
        st.sampled_from([b"", b"x", b"hello", b"PUB a 1\r\nz\r\n", bytes(range(40))]),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(pubs, st.lists(st.integers(1, 200), min_size=1, max_size=20), st.booleans())
def test_runs_and_repeated_lines_preserve_every_message(
    events: list[Pub], cuts: list[int], with_other_ops: bool
) -> None:
    """``feed`` with a run callback yields the same messages, in order."""
    stream: list[object] = []
    for i, e in enumerate(events):
        stream.append(e)
        if with_other_ops and i % 7 == 3:
            stream.append(PING)
    data = b"".join(serialize(e) for e in stream)  # type: ignore[arg-type]
    _, got = _feed_in_cuts(data, cuts)
    assert got == stream


ack_like = st.lists(
    st.one_of(
        st.builds(
            lambda s, r, p: Pub(s, r, p),
            st.sampled_from(
                [b"$JS.ACK.S.C.1.%d.%d.17.0" % (i, i) for i in range(1, 6)] + [b"a", b"b.c"]
            ),
            st.one_of(st.none(), st.none(), st.just(b"_INBOX.9")),
            st.sampled_from([b"+ACK", b"+ACK", b"", b"-NAK", b"PUB a 1\r\nz\r\n", b"PUB "]),
        ),
        st.sampled_from([PING, b"PUB  two.spaces 4\r\n+ACK\r\n", b"PUB\ttab 4\r\n+ACK\r\n"]),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ack_like, st.lists(st.integers(1, 300), min_size=1, max_size=20))
def test_many_subject_runs_preserve_every_message(stream: list[object], cuts: list[int]) -> None:
    """With ``on_pubs``, runs of reply-less small messages to differing
    subjects (acks) arrive as lists; every message still arrives once, in order."""
    data = b"".join(e if type(e) is bytes else serialize(e) for e in stream)  # type: ignore[arg-type]
    expect = []
    for e in stream:
        if type(e) is bytes:  # odd separators: the careful path still sees a PUB
            subject = e.split()[1]
            expect.append(Pub(subject, None, b"+ACK"))
        else:
            expect.append(e)
    conn = ProtocolConnection(Role.SERVER)
    got: list[object] = []
    many_calls = []

    def on_pub(s: bytes, r: bytes | None, p: bytes) -> None:
        got.append(Pub(s, r, p))

    def on_run(s: bytes, rs: list[bytes | None], ps: list[bytes]) -> None:
        got.extend(Pub(s, r, p) for r, p in zip(rs, ps, strict=True))

    def on_pubs(subjects: list[bytes], p: bytes) -> None:
        assert len(subjects) >= 2 and len(p) <= 8
        many_calls.append(len(subjects))
        got.extend(Pub(s, None, p) for s in subjects)

    pos = 0
    i = 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        conn.feed(data[pos : pos + step], on_pub, got.append, on_run, on_pubs)
        pos += step
        i += 1
    assert got == expect
    assert not conn.dead


def test_many_subject_run_is_one_call_and_halt_stops_after_it() -> None:
    acks = [b"$JS.ACK.S.C.1.%d.%d.17.0" % (i, i) for i in range(1, 51)]
    data = b"".join(b"PUB %s 4\r\n+ACK\r\n" % a for a in acks) + b"PUB x 1\r\ny\r\n"
    conn = ProtocolConnection(Role.SERVER)
    calls: list[tuple[str, object]] = []
    conn.feed(
        data,
        lambda s, r, p: calls.append(("one", s)),
        lambda e: calls.append(("ev", e)),
        lambda s, rs, ps: calls.append(("run", s)),
        lambda subs, p: (calls.append(("many", list(subs))), conn.halt()),
    )
    # the run in one call (its last op too: another PUB follows); parsing
    # stops at the halt
    assert calls == [("many", acks)]


class _Sink:
    def __init__(self, got: list[object]) -> None:
        self.got = got

    def one(self, s: bytes, r: bytes | None, p: bytes) -> None:
        self.got.append(Pub(s, r, p))

    def run(self, s: bytes, rs: list[bytes | None], ps: list[bytes]) -> None:
        self.got.extend(Pub(s, r, p) for r, p in zip(rs, ps, strict=True))

    def many(self, subs: list[bytes], p: bytes) -> None:
        self.got.extend(Pub(s, None, p) for s in subs)


def test_many_subject_run_respects_the_control_line_limit() -> None:
    """A subject too long for the control line never reaches ``on_pubs``:
    the careful path reports the violation as without the callback."""
    long_subject = b"$JS.ACK." + b"x" * 120
    data = b"PUB a 4\r\n+ACK\r\nPUB b 4\r\n+ACK\r\n" + b"PUB %s 4\r\n+ACK\r\n" % long_subject * 3
    results = []
    for with_many in (False, True):
        conn = ProtocolConnection(Role.SERVER, max_control_line=64)
        got: list[object] = []
        sink = _Sink(got)
        conn.feed(data, sink.one, got.append, sink.run, sink.many if with_many else None)
        results.append(got)
    assert results[0] == results[1]
    assert type(results[1][-1]) is ProtocolViolation


mixed_like = st.lists(
    st.one_of(
        st.builds(
            lambda s, r, p: Pub(s, r, p),
            st.sampled_from([b"rot.%d" % i for i in range(6)] + [b"$JS.ACK.S.C.1.2.3.4.0"]),
            st.one_of(st.none(), st.none(), st.none(), st.just(b"_INBOX.9")),
            st.sampled_from([b"x" * 16, b"y" * 16, b"+ACK", b"", b"z" * 40, b"PUB a 1\r\n"]),
        ),
        st.just(PING),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(mixed_like, st.lists(st.integers(1, 400), min_size=1, max_size=20), st.booleans())
def test_mixed_subject_batches_preserve_every_message(
    stream: list[object], cuts: list[int], with_pubs: bool
) -> None:
    """With ``on_mixed``, reply-less singles to changing subjects arrive as
    lists beside runs, acks and other ops: every message once, in order."""
    data = b"".join(serialize(e) for e in stream)  # type: ignore[arg-type]
    conn = ProtocolConnection(Role.SERVER)
    got: list[object] = []
    sink = _Sink(got)

    def on_mixed(subjects: list[bytes], payloads: list[bytes]) -> None:
        assert subjects and len(subjects) == len(payloads)
        got.extend(Pub(s, None, p) for s, p in zip(subjects, payloads, strict=True))

    pos = 0
    i = 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        conn.feed(
            data[pos : pos + step],
            sink.one,
            got.append,
            sink.run,
            sink.many if with_pubs else None,
            on_mixed,
        )
        pos += step
        i += 1
    assert got == stream
    assert not conn.dead


def test_mixed_batch_is_one_call_and_halt_stops_after_it() -> None:
    subjects = [b"rot.%d" % (i % 7) for i in range(40)]
    data = b"".join(b"PUB %s 3\r\nabc\r\n" % s for s in subjects) + b"PUB x 1\r\ny\r\n"
    conn = ProtocolConnection(Role.SERVER)
    calls: list[tuple[str, object]] = []
    conn.feed(
        data,
        lambda s, r, p: calls.append(("one", s)),
        lambda e: calls.append(("ev", e)),
        lambda s, rs, ps: calls.append(("run", s)),
        None,
        lambda subs, ps: (calls.append(("mixed", list(subs))), conn.halt()),
    )
    assert calls == [("mixed", [*subjects, b"x"])]


def test_mixed_singles_of_one_size_are_parsed_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting test: reply-less PUBs of one size to rotating subjects cost a
    few line matches per window, not one per message (``node.protocol.bulk``), and
    every message arrives once, in order, with its payload."""
    from node.protocol import connection as conn_mod

    calls = 0
    real = conn_mod._FAST_LINE[Role.SERVER]

    def counted(buf: bytes, pos: int) -> Any:
        nonlocal calls
        calls += 1
        return real(buf, pos)

    monkeypatch.setitem(conn_mod._FAST_LINE, Role.SERVER, counted)
    for n in (10, 1000):
        calls = 0
        subjects = [b"bench.rot.%04d" % (i % 997) for i in range(n)]
        payloads = [b"%08d" % i + b"PUB a 1\r\n" * 3 for i in range(n)]  # size 35
        data = b"".join(
            b"PUB %s 35\r\n%s\r\n" % (s, p) for s, p in zip(subjects, payloads, strict=True)
        )
        got: list[tuple[bytes, bytes]] = []

        def on_mixed(
            subs: list[bytes], pays: list[bytes], got: list[tuple[bytes, bytes]] = got
        ) -> None:
            got.extend(zip(subs, pays, strict=True))

        conn = ProtocolConnection(Role.SERVER)
        sink = _Sink([])
        conn.feed(data, sink.one, lambda e: None, sink.run, sink.many, on_mixed)
        assert got == list(zip(subjects, payloads, strict=True))
        assert calls <= 4 + len(data) // conn_mod.MIXED_WINDOW * 2


def test_route_ls_minus_without_origin_from_a_peer_without_lnocu() -> None:
    """A peer that did not announce ``lnocu`` sends ``LS- <account> <subject> [<queue>]``;
    the route sets ``ls_minus_origin`` False and the event names ``ANY_ORIGIN``."""
    from node.protocol.events import ANY_ORIGIN

    p = ProtocolConnection(Role.ROUTE)
    p.ls_minus_origin = False
    evs = p.receive_data(b"LS- $G foo\r\nLS- $G q.x grp\r\nLS+ lc $G foo\r\n")
    assert evs[0] == RUnsub(b"$G", b"foo", None, ANY_ORIGIN)
    assert evs[0].origin is ANY_ORIGIN
    assert evs[1] == RUnsub(b"$G", b"q.x", b"grp", ANY_ORIGIN)
    assert evs[2] == RSub(b"$G", b"foo", None, 0, b"lc")


reply_runs = st.lists(
    st.one_of(
        st.builds(
            lambda s, r, p: Pub(s, r, p),
            st.sampled_from([b"bench.js", b"bench.js", b"b"]),
            st.one_of(st.none(), st.integers(0, 10**12).map(lambda i: b"_INBOX.lg7.%d" % i)),
            st.sampled_from([b"x" * 40, b"x" * 40, b"PUB bench.js _I 40\r\n" + b"y" * 20, b""]),
        ),
        st.sampled_from([PING, b"PUB  bench.js  _INBOX.2 40\r\n" + b"z" * 40 + b"\r\n"]),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(reply_runs, st.lists(st.integers(1, 700), min_size=1, max_size=20))
def test_reply_runs_preserve_every_message(stream: list[object], cuts: list[int]) -> None:
    """Runs to one subject with a reply each (a JetStream publisher's window)
    are taken in bulk; every message still arrives once, in order, whatever
    the chunking."""
    data = b"".join(e if type(e) is bytes else serialize(e) for e in stream)  # type: ignore[arg-type]
    expect = [Pub(b"bench.js", b"_INBOX.2", b"z" * 40) if type(e) is bytes else e for e in stream]
    conn, got = _feed_in_cuts(data, cuts)
    assert got == expect
    assert not conn.dead


def test_reply_runs_are_parsed_in_bulk_and_keep_the_line_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counting test: a publisher's window (one subject, a reply each, one
    size) costs a few line matches per window, not one per message; a reply
    that makes its line longer than the control line limit still fails as it
    did without the bulk path."""
    from node.protocol import connection as conn_mod

    calls = 0
    real = conn_mod._FAST_LINE[Role.SERVER]

    def counted(buf: bytes, pos: int) -> Any:
        nonlocal calls
        calls += 1
        return real(buf, pos)

    monkeypatch.setitem(conn_mod._FAST_LINE, Role.SERVER, counted)
    for n in (10, 1000):
        calls = 0
        replies = [b"_INBOX.lg42.%d" % i for i in range(n)]
        payloads = [b"%08d" % i + b"PUB a 1\r\n" * 3 for i in range(n)]  # size 35
        data = b"".join(
            b"PUB bench.js %s 35\r\n%s\r\n" % (r, p) for r, p in zip(replies, payloads, strict=True)
        )
        got: list[tuple[bytes | None, bytes]] = []

        def on_run(
            s: bytes,
            rs: list[bytes | None],
            ps: list[bytes],
            got: list[tuple[bytes | None, bytes]] = got,
        ) -> None:
            assert s == b"bench.js"
            got.extend(zip(rs, ps, strict=True))

        conn = ProtocolConnection(Role.SERVER)
        conn.feed(data, lambda s, r, p, got=got: got.append((r, p)), lambda e: None, on_run)
        assert got == list(zip(replies, payloads, strict=True))
        assert calls <= 4 + len(data) // conn_mod.MIXED_WINDOW * 2
    # a reply too long for the line limit, inside a stretch: the same violation as before
    conn = ProtocolConnection(Role.SERVER, max_control_line=64)
    ok = b"PUB bench.js _INBOX.1 3\r\nabc\r\n" * 40
    data = ok + b"PUB bench.js _INBOX.%s 3\r\nabc\r\n" % (b"x" * 60) + ok
    events: list[object] = []
    seen: list[bytes | None] = []
    conn.feed(
        data,
        lambda s, r, p: seen.append(r),
        events.append,
        lambda s, rs, ps: seen.extend(rs),
    )
    assert seen == [b"_INBOX.1"] * 40
    assert len(events) == 1 and isinstance(events[0], ProtocolViolation)


def _feed_in_cuts(data: bytes, cuts: list[int]) -> tuple[ProtocolConnection, list[object]]:
    """Feed ``data`` to a server-role parser in pieces of the sizes ``cuts``
    (cycled); runs come back as their publishes, in order."""
    conn = ProtocolConnection(Role.SERVER)
    got: list[object] = []

    def on_pub(s: bytes, r: bytes | None, p: bytes) -> None:
        got.append(Pub(s, r, p))

    def on_run(s: bytes, rs: list[bytes | None], ps: list[bytes]) -> None:
        assert len(ps) >= 2
        got.extend(Pub(s, r, p) for r, p in zip(rs, ps, strict=True))

    pos = 0
    i = 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        conn.feed(data[pos : pos + step], on_pub, got.append, on_run)
        pos += step
        i += 1
    return conn, got
