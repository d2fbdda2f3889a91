"""Differential: raw protocol transcripts against the reference nats-server and trijet.

Each case sends the same bytes to both servers on a fresh connection, then a
PING, and compares what came back (INFO lines and server-initiated PINGs
normalised away, see ``tests.support.raw.normalise``) and whether the server
closed the connection.  Where the reference behaviour is pinned by the wire
reference (``jetstream-wire.md`` §1) the expected output is also asserted, so a
change in either server shows up.

Documented, intentional differences:
* INFO: trijet advertises nats-server 2.10.24, so it omits the 2.11+ keys in
  ``INFO_KEYS_ONLY_REFERENCE``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support import RawClient, ServerProcess, start_server
from tests.support.raw import Transcript, normalise

# keys the reference (2.15.1) sends that trijet (advertising 2.10.24) leaves out on purpose
INFO_KEYS_ONLY_REFERENCE = {"api_lvl", "xkey"}

C = b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true}\r\n'
CP = b'CONNECT {"verbose":false,"pedantic":true,"protocol":1,"headers":true,"no_responders":true}\r\n'
ERR_UNKNOWN = b"-ERR 'Unknown Protocol Operation'"
CLOSED = "closed"
OPEN = "open"

# (id, input, expected normalised ops or None, expected outcome)
CASES: list[tuple[str, bytes, list[bytes] | None, str]] = [
    ("unknown_verb", C + b"FOO bar\r\n", [ERR_UNKNOWN], CLOSED),
    ("sub_no_args", C + b"SUB\r\n", [ERR_UNKNOWN], CLOSED),
    ("sub_space_no_args", C + b"SUB \r\n", [], CLOSED),
    ("unsub_no_args", C + b"UNSUB\r\n", [ERR_UNKNOWN], CLOSED),
    ("pub_no_args", C + b"PUB\r\n", [ERR_UNKNOWN], CLOSED),
    ("pub_missing_size", C + b"PUB foo\r\n", [], CLOSED),
    ("pub_bad_size", C + b"PUB foo abc\r\n", [], CLOSED),
    ("pub_negative_size", C + b"PUB foo -1\r\n", [], CLOSED),
    ("pub_plus_size", C + b"PUB foo +1\r\na\r\n", [], CLOSED),
    ("pub_too_many_args", C + b"PUB foo a b 3\r\nabc\r\n", [], CLOSED),
    ("pub_only_spaces", C + b"PUB foo  \r\n", [], CLOSED),
    (
        "pub_size_9_digits",
        C + b"PUB foo 999999999\r\n",
        [b"-ERR 'Maximum Payload Violation'"],
        CLOSED,
    ),
    ("pub_size_10_digits", C + b"PUB foo 1000000000\r\n", [], CLOSED),
    ("hpub_size_10_digits", C + b"HPUB foo 12 1000000000\r\n", [], CLOSED),
    ("plus_ok_suffix", C + b"+OKCONNECT {}\r\n", [b"PONG"], OPEN),
    ("connect_glued_json", b'CONNECT{"verbose":false}\r\n', [b"PONG"], OPEN),
    # invalid UTF-8 inside a JSON string is taken (Go decodes it as U+FFFD);
    # outside a string it is bad JSON (silent close)
    ("connect_bad_utf8_in_key", C + b'CONNECT {"\xf6erbose":true}\r\n', [b"PONG"], OPEN),
    ("connect_bad_utf8_outside", C + b'CONNECT {"verbose":\xf6}\r\n', [], CLOSED),
    ("connect_verb_suffix", b'CONNECTX {"verbose":false}\r\n', [], CLOSED),
    ("info_glued_json", C + b"INFO{}\r\n", [b"PONG"], OPEN),
    ("info_verb_suffix", C + b"INFOX {}\r\n", [], CLOSED),
    ("payload_overrun", C + b"PUB foo 3\r\nabcdef\r\n", [ERR_UNKNOWN], CLOSED),
    ("max_payload", C + b"PUB foo 2000000\r\n", [b"-ERR 'Maximum Payload Violation'"], CLOSED),
    ("hpub_hdr_gt_total", C + b"HPUB foo 30 10\r\n", [], CLOSED),
    (
        "hpub_max_payload",
        C + b"HPUB foo 12 2000000\r\n",
        [b"-ERR 'Maximum Payload Violation'"],
        CLOSED,
    ),
    (
        "max_control_line",
        C + b"SUB " + b"a" * 5000 + b" 1\r\n",
        [b"-ERR 'maximum control line exceeded'"],
        CLOSED,
    ),
    (
        "max_control_line_no_newline",
        C + b"SUB " + b"a" * 5000,
        [b"-ERR 'maximum control line exceeded'"],
        CLOSED,
    ),
    (
        "sub_invalid_empty_token",
        C + b"SUB foo..bar 1\r\n",
        [b"-ERR 'Invalid Subject'", b"PONG"],
        OPEN,
    ),
    (
        "sub_invalid_fwc_middle",
        C + b"SUB foo.>.bar 1\r\n",
        [b"-ERR 'Invalid Subject'", b"PONG"],
        OPEN,
    ),
    (
        "pub_wildcard_pedantic",
        CP + b"PUB foo.* 2\r\nhi\r\n",
        [b"-ERR 'Invalid Publish Subject'", b"PONG"],
        OPEN,
    ),
    ("pub_wildcard_not_pedantic", C + b"PUB foo.* 2\r\nhi\r\n", [b"PONG"], OPEN),
    (
        "pub_invalid_pedantic",
        CP + b"PUB foo..bar 2\r\nhi\r\n",
        [b"-ERR 'Invalid Publish Subject'", b"PONG"],
        OPEN,
    ),
    ("pub_invalid_not_pedantic", C + b"PUB foo..bar 2\r\nhi\r\n", [b"PONG"], OPEN),
    (
        "no_responders_without_headers",
        b'CONNECT {"verbose":false,"no_responders":true}\r\n',
        [b"-ERR 'no responders requires headers support'"],
        CLOSED,
    ),
    ("connect_bad_json", b"CONNECT {bad\r\n", [], CLOSED),
    ("connect_array", b"CONNECT []\r\n", [], CLOSED),
    ("connect_no_json", b"CONNECT\r\n", [], CLOSED),
    ("connect_bad_type", b'CONNECT {"verbose":"yes"}\r\n', [], CLOSED),
    (
        "verbose_default_true",
        b"CONNECT {}\r\nSUB foo 1\r\nPUB foo 1\r\nx\r\nUNSUB 1\r\n",
        [b"+OK", b"+OK", b"+OK", b"MSG foo 1 1\r\nx", b"+OK", b"PONG"],
        OPEN,
    ),
    (
        "ops_before_connect",
        b"SUB foo 1\r\nPUB foo 1\r\nx\r\n",
        [b"+OK", b"+OK", b"MSG foo 1 1\r\nx", b"PONG"],
        OPEN,
    ),
    (
        "verbose_pedantic_sequence",
        b'CONNECT {"verbose":true,"pedantic":true}\r\nSUB foo.* 1\r\nPUB foo.* 1\r\nx\r\nSUB a..b 2\r\n',
        [
            b"+OK",
            b"+OK",
            b"-ERR 'Invalid Publish Subject'",
            b"+OK",
            b"MSG foo.* 1 1\r\nx",
            b"-ERR 'Invalid Subject'",
            b"PONG",
        ],
        OPEN,
    ),
    (
        "hpub_without_headers",
        b'CONNECT {"verbose":false}\r\nHPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n',
        [],
        CLOSED,
    ),
    (
        "hpub_same_chunk_as_connect",
        C + b"SUB foo 1\r\nHPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n",
        [b"HMSG foo 1 12 12\r\nNATS/1.0\r\n\r\n", b"PONG"],
        OPEN,
    ),
    (
        "headers_enabled_by_second_connect",
        b'CONNECT {"verbose":false}\r\nCONNECT {"verbose":false,"headers":true}\r\n'
        b"SUB foo 1\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [b"HMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi", b"PONG"],
        OPEN,
    ),
    (
        "no_responders_503",
        C + b"SUB inbox 1\r\nPUB nobody inbox 0\r\n\r\n",
        [b"HMSG inbox 1 38 38\r\nNATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n", b"PONG"],
        OPEN,
    ),
    (
        "no_responders_503_hpub",
        C + b"SUB inbox 1\r\nHPUB nobody inbox 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [b"HMSG inbox 1 38 38\r\nNATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n", b"PONG"],
        OPEN,
    ),
    (
        "no_responders_off",
        b'CONNECT {"verbose":false,"headers":true}\r\nSUB inbox 1\r\nPUB nobody inbox 0\r\n\r\n',
        [b"PONG"],
        OPEN,
    ),
    (
        "second_connect_keeps_headers",
        C
        + b"PING\r\n"
        + b'CONNECT {"verbose":false}\r\n'  # omitted keys keep their values
        + b"SUB foo 1\r\nHPUB foo 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n",
        [b"PONG", b"HMSG foo 1 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi", b"PONG"],
        OPEN,
    ),
    (
        "unsub_max",
        C + b"SUB foo 1\r\nUNSUB 1 2\r\nPUB foo 1\r\na\r\nPUB foo 1\r\nb\r\nPUB foo 1\r\nc\r\n",
        [b"MSG foo 1 1\r\na", b"MSG foo 1 1\r\nb", b"PONG"],
        OPEN,
    ),
    (
        "unsub_max_already_reached",
        C + b"SUB foo 1\r\nPUB foo 1\r\na\r\nUNSUB 1 1\r\nPUB foo 1\r\nb\r\n",
        [b"MSG foo 1 1\r\na", b"PONG"],
        OPEN,
    ),
    ("unsub_unknown_sid", C + b"UNSUB 99\r\n", [b"PONG"], OPEN),
    ("unsub_bad_max", C + b"SUB foo 1\r\nUNSUB 1 x\r\nPUB foo 1\r\na\r\n", [b"PONG"], OPEN),
    ("sub_too_many_args", C + b"SUB a b c d\r\n", [], CLOSED),
    (
        "lowercase_verbs",
        b'connect {"verbose":false}\r\nsub foo 1\r\npub foo 1\r\na\r\n',
        [b"MSG foo 1 1\r\na", b"PONG"],
        OPEN,
    ),
    ("tabs", C + b"SUB\tfoo\t1\r\nPUB\tfoo\t1\r\na\r\n", [b"MSG foo 1 1\r\na", b"PONG"], OPEN),
    ("lf_only", C + b"SUB foo 1\nPUB foo 1\na\r\n", [b"MSG foo 1 1\r\na", b"PONG"], OPEN),
    ("empty_line", C + b"\r\n", [ERR_UNKNOWN], CLOSED),
    ("leading_space", C + b" PING\r\n", [ERR_UNKNOWN], CLOSED),
    ("ping_suffix", C + b"PINGX\r\n", [b"PONG", b"PONG"], OPEN),
    ("msg_from_client", C + b"MSG foo 1 1\r\na\r\n", [ERR_UNKNOWN], CLOSED),
    ("info_from_client", C + b"INFO {}\r\n", [b"PONG"], OPEN),
    ("info_from_client_bad_json", C + b"INFO {bad\r\n", [], CLOSED),
    ("info_from_client_no_args", C + b"INFO\r\n", [], CLOSED),
    ("plus_ok_from_client", C + b"+OK\r\n", [b"PONG"], OPEN),
    ("minus_err_from_client", C + b"-ERR 'x'\r\n", [], CLOSED),
    (
        "queue_and_plain",
        C + b"SUB foo q 1\r\nSUB foo q 2\r\nSUB foo 3\r\nPUB foo 1\r\na\r\n",
        None,  # which queue member gets it is random
        OPEN,
    ),
    (
        "reply_subject_delivered",
        C
        + b"SUB foo 1\r\nPUB foo bar 2\r\nhi\r\nHPUB foo baz 16 18\r\nNATS/1.0\r\nA:\r\n\r\nhi\r\n",
        [b"MSG foo 1 bar 2\r\nhi", b"HMSG foo 1 baz 16 18\r\nNATS/1.0\r\nA:\r\n\r\nhi", b"PONG"],
        OPEN,
    ),
    (
        "wildcards",
        C
        + b"SUB a.* 1\r\nSUB a.> 2\r\nSUB *.b.> 3\r\nSUB > 4\r\n"
        + b"PUB a.b 0\r\n\r\nPUB a.b.c 0\r\n\r\nPUB x 0\r\n\r\n",
        None,  # per-publish order of subscriptions is not specified; compared as multisets
        OPEN,
    ),
    (
        # a subject with an empty token matches no subscription, not even a
        # wildcard one; a request to it gets no-responders
        "empty_tokens_match_nothing",
        C
        + b"SUB a.*.c 1\r\nSUB b.> 2\r\nSUB inbox 4\r\n"
        + b"PUB a..c 1\r\n1\r\nPUB b..x 1\r\n2\r\nPUB b.x. 1\r\n3\r\n"
        + b"PUB .b 1\r\n4\r\nPUB a.b.c 1\r\n5\r\nPUB q..r inbox 0\r\n\r\n",
        [
            b"MSG a.b.c 1 1\r\n5",
            b"HMSG inbox 4 36 36\r\nNATS/1.0 503\r\nNats-Subject: q..r\r\n\r\n",
            b"PONG",
        ],
        OPEN,
    ),
]


def _outcome(t: Transcript) -> str:
    return CLOSED if t.closed else OPEN


@pytest.fixture(scope="module")
def pair() -> Iterator[dict[str, ServerProcess]]:
    servers: dict[str, ServerProcess] = {}
    try:
        for kind in ("reference", "trijet"):
            servers[kind] = start_server(kind)  # type: ignore[arg-type]
        yield servers
    finally:
        for sp in servers.values():
            sp.stop()


def run_case(sp: ServerProcess, data: bytes) -> tuple[list[bytes], str]:
    with RawClient(sp.host, sp.port, timeout=5) as c:
        t = c.exchange(data, timeout=5)
    assert not t.timed_out, (sp.kind, t)
    ops = [op for op in normalise(t.ops()) if op != b"INFO"]
    return ops, _outcome(t)


@pytest.mark.parametrize(
    ("data", "expected", "outcome"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_transcript(
    pair: dict[str, ServerProcess], data: bytes, expected: list[bytes] | None, outcome: str
) -> None:
    ref_ops, ref_outcome = run_case(pair["reference"], data)
    tj_ops, tj_outcome = run_case(pair["trijet"], data)
    print("reference:", ref_ops, ref_outcome)
    print("trijet:   ", tj_ops, tj_outcome)
    assert ref_outcome == outcome
    assert tj_outcome == ref_outcome
    if expected is not None:
        assert ref_ops == expected
        assert tj_ops == ref_ops
    else:
        assert sorted(tj_ops) == sorted(ref_ops) or len(tj_ops) == len(ref_ops)


def test_wildcard_fanout_multiset(pair: dict[str, ServerProcess]) -> None:
    data = dict((c[0], c[1]) for c in CASES)["wildcards"]
    ref_ops, _ = run_case(pair["reference"], data)
    tj_ops, _ = run_case(pair["trijet"], data)
    assert sorted(tj_ops) == sorted(ref_ops)
    assert sorted(ref_ops) == sorted(
        [
            b"MSG a.b 1 0\r\n",
            b"MSG a.b 2 0\r\n",
            b"MSG a.b 4 0\r\n",
            b"MSG a.b.c 2 0\r\n",
            b"MSG a.b.c 3 0\r\n",
            b"MSG a.b.c 4 0\r\n",
            b"MSG x 4 0\r\n",
            b"PONG",
        ]
    )


def test_info_keys(pair: dict[str, ServerProcess]) -> None:
    infos = {}
    for kind, sp in pair.items():
        with RawClient(sp.host, sp.port) as c:
            infos[kind] = c.info
            assert c.info_line.endswith(b"} "), "INFO ends with a space before CRLF"
    ref, tj = infos["reference"], infos["trijet"]
    assert set(tj) == set(ref) - INFO_KEYS_ONLY_REFERENCE, (sorted(ref), sorted(tj))
    for key in ("proto", "headers", "max_payload", "host", "client_ip"):
        assert tj[key] == ref[key], key
    assert tj["port"] == pair["trijet"].port
    major, minor, _ = (int(x) for x in str(tj["version"]).split("."))
    assert (major, minor) >= (2, 10)


def test_connect_info_async_info(pair: dict[str, ServerProcess]) -> None:
    """protocol>=1: first PING gets PONG, then an INFO with connect_info (2.10+)."""
    infos = {}
    for kind, sp in pair.items():
        with RawClient(sp.host, sp.port) as c:
            c.send(C + b"PING\r\n")
            assert c.read_line() == b"PONG"
            line = c.read_line()
            assert line.startswith(b"INFO "), line

            infos[kind] = json.loads(line[5:])
    ref, tj = infos["reference"], infos["trijet"]
    assert ref["connect_info"] is True and tj["connect_info"] is True
    assert tj["remote_account"] == ref["remote_account"] == "$G"
    assert set(tj) == set(ref) - INFO_KEYS_ONLY_REFERENCE


def test_queue_delivery_counts(pair: dict[str, ServerProcess]) -> None:
    """Two queue members + one plain sub on one connection: N plain copies, N queue copies."""
    n = 200
    pubs = b"".join(b"PUB foo 1\r\nx\r\n" for _ in range(n))
    for kind, sp in pair.items():
        with RawClient(sp.host, sp.port) as c:
            t = c.exchange(C + b"SUB foo q 1\r\nSUB foo q 2\r\nSUB foo 3\r\n" + pubs)
        msgs = [op.split(b"\r\n")[0] for op in t.ops() if op.startswith(b"MSG")]
        by_sid = {s: sum(1 for m in msgs if m.split()[2] == s) for s in (b"1", b"2", b"3")}
        print(kind, by_sid)
        assert by_sid[b"3"] == n, kind
        assert by_sid[b"1"] + by_sid[b"2"] == n, kind
        assert by_sid[b"1"] > 0 and by_sid[b"2"] > 0, (kind, by_sid)


def test_delivery_order(pair: dict[str, ServerProcess]) -> None:
    """One publisher, one subscriber on another connection: order preserved."""
    n = 500
    results = {}
    for kind, sp in pair.items():
        with RawClient(sp.host, sp.port) as sub, RawClient(sp.host, sp.port) as pub:
            assert not sub.exchange(C + b"SUB ord.* 7\r\n").closed
            pub.exchange(
                C + b"".join(b"PUB ord.%d %d\r\n%d\r\n" % (i, len(b"%d" % i), i) for i in range(n))
            )
            t = sub.exchange(b"")
        payloads = [op.split(b"\r\n", 1)[1] for op in t.ops() if op.startswith(b"MSG")]
        results[kind] = payloads
        assert payloads == [b"%d" % i for i in range(n)], kind
    assert results["trijet"] == results["reference"]


def test_close_after_err_is_prompt(pair: dict[str, ServerProcess]) -> None:
    """After a fatal -ERR the server closes at once (it does not linger until a flush bound).

    Not a benchmark: the bound (0.5 s) is half of trijet's close-flush limit, so a
    writer that forgets to notice the close shows up, while a busy machine does not.
    """
    import time

    for kind, sp in pair.items():
        with RawClient(sp.host, sp.port) as c:
            t0 = time.monotonic()
            t = c.exchange(b"FOO\r\n")
            elapsed = time.monotonic() - t0
        assert t.closed and t.errors() == [ERR_UNKNOWN], kind
        assert elapsed < 0.5, (kind, elapsed)
