"""Differential: auth, permissions and limits configured by conf file, raw transcripts.

Each test starts the reference nats-server and trijet with the same conf text and
sends both the same bytes; outputs (INFO normalised away) and close/open outcomes
must match, and the reference output is pinned where the wire reference documents it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.support import RawClient, ServerProcess, start_server
from tests.support.raw import connect_line, normalise

AUTH_VIOLATION = b"-ERR 'Authorization Violation'"


@contextlib.contextmanager
def pair(config: str) -> Iterator[dict[str, ServerProcess]]:
    servers: dict[str, ServerProcess] = {}
    try:
        for kind in ("reference", "trijet"):
            servers[kind] = start_server(kind, config=config)  # type: ignore[arg-type]
        yield servers
    finally:
        for sp in servers.values():
            sp.stop()
            print(f"--- {sp.kind} log tail ---\n{sp.log_text()[-1500:]}")


def both(servers: dict[str, ServerProcess], data: bytes) -> tuple[list[bytes], bool]:
    """Run ``data`` on both; assert equal; return the reference's (ops, closed)."""
    res = {}
    for kind, sp in servers.items():
        with RawClient(sp.host, sp.port) as c:
            t = c.exchange(data)
        assert not t.timed_out, (kind, t)
        res[kind] = ([op for op in normalise(t.ops()) if op != b"INFO"], t.closed)
    print(res)
    assert res["trijet"] == res["reference"]
    return res["reference"]


USERPASS = "authorization { user: alice, password: s3cret, timeout: 1 }\n"
TOKEN = "authorization { token: tok3n }\n"
PERMS = """
authorization {
  users: [
    { user: limited, password: pw, permissions: {
        publish: { allow: ["allowed.>", "_INBOX.>"], deny: ["allowed.secret"] },
        subscribe: { allow: ["ok.>", "nope.>", "_INBOX.>"], deny: ["nope.>"] } } },
    { user: admin, password: pw }
  ]
}
"""


@pytest.fixture(scope="module")
def userpass() -> Iterator[dict[str, ServerProcess]]:
    with pair(USERPASS) as s:
        yield s


@pytest.mark.parametrize(
    ("data", "expected", "closed"),
    [
        (connect_line(verbose=False, user="alice", **{"pass": "s3cret"}), [b"PONG"], False),
        (connect_line(verbose=True, user="alice", **{"pass": "s3cret"}), [b"+OK", b"PONG"], False),
        (connect_line(verbose=False, user="alice", **{"pass": "wrong"}), [AUTH_VIOLATION], True),
        (connect_line(verbose=False, user="bob", **{"pass": "s3cret"}), [AUTH_VIOLATION], True),
        (connect_line(verbose=False), [AUTH_VIOLATION], True),
        (connect_line(verbose=False, auth_token="s3cret"), [AUTH_VIOLATION], True),
        (b"SUB foo 1\r\n", [AUTH_VIOLATION], True),
        (b"PUB foo 1\r\nx\r\n", [AUTH_VIOLATION], True),
        (b"", [AUTH_VIOLATION], True),  # PING before CONNECT
        (b"FOO\r\n", [AUTH_VIOLATION], True),
    ],
    ids=[
        "ok",
        "ok_verbose",
        "bad_password",
        "unknown_user",
        "no_credentials",
        "token_instead",
        "sub_before_connect",
        "pub_before_connect",
        "ping_before_connect",
        "garbage_before_connect",
    ],
)
def test_user_password(
    userpass: dict[str, ServerProcess], data: bytes, expected: list[bytes], closed: bool
) -> None:
    ops, was_closed = both(userpass, data)
    assert (ops, was_closed) == (expected, closed)


def test_auth_timeout(userpass: dict[str, ServerProcess]) -> None:
    """No CONNECT within authorization.timeout (1 s): -ERR 'Authentication Timeout', closed."""
    clients = {k: RawClient(sp.host, sp.port) for k, sp in userpass.items()}
    try:
        outs = {k: c.read_until_closed(timeout=5) for k, c in clients.items()}
    finally:
        for c in clients.values():
            c.close()
    for kind, t in outs.items():
        assert t.closed, kind
        assert normalise(t.ops()) == [b"-ERR 'Authentication Timeout'"], (kind, t)


def test_info_auth_required(userpass: dict[str, ServerProcess]) -> None:
    for kind, sp in userpass.items():
        with RawClient(sp.host, sp.port) as c:
            assert c.info.get("auth_required") is True, kind
            assert "nonce" not in c.info, kind


def test_token() -> None:
    with pair(TOKEN) as s:
        assert both(s, connect_line(verbose=False, auth_token="tok3n")) == ([b"PONG"], False)
        assert both(s, connect_line(verbose=False, auth_token="nope")) == ([AUTH_VIOLATION], True)
        assert both(s, connect_line(verbose=False, user="tok3n")) == ([AUTH_VIOLATION], True)


def test_permissions() -> None:
    login = connect_line(verbose=True, pedantic=False, user="limited", **{"pass": "pw"})
    with pair(PERMS) as s:
        ops, closed = both(
            s,
            login
            + b"SUB ok.> 1\r\n"
            + b"PUB allowed.x 1\r\na\r\n"
            + b"PUB denied.x 1\r\nb\r\n"
            + b"PUB allowed.secret 1\r\nc\r\n"
            + b"SUB nope.x 2\r\n"
            + b"SUB nope.x q 3\r\n"
            + b"SUB other 4\r\n"
            + b"PUB ok.1 0\r\n\r\n",
        )
        assert not closed
        assert ops == [
            b"+OK",
            b"+OK",
            b"+OK",
            b"-ERR 'Permissions Violation for Publish to \"denied.x\"'",
            b"-ERR 'Permissions Violation for Publish to \"allowed.secret\"'",
            b"-ERR 'Permissions Violation for Subscription to \"nope.x\"'",
            b'-ERR \'Permissions Violation for Subscription to "nope.x" using queue "q"\'',
            b"-ERR 'Permissions Violation for Subscription to \"other\"'",
            b"-ERR 'Permissions Violation for Publish to \"ok.1\"'",
            b"PONG",
        ]
        # an unrestricted user's publish reaches the limited user's allowed subscription
        with RawClient(s["trijet"].host, s["trijet"].port) as lim:
            lim.exchange(
                connect_line(verbose=False, user="limited", **{"pass": "pw"}) + b"SUB ok.> 1\r\n"
            )
            with RawClient(s["trijet"].host, s["trijet"].port) as adm:
                adm.exchange(
                    connect_line(verbose=False, user="admin", **{"pass": "pw"})
                    + b"PUB ok.z 2\r\nhi\r\n"
                )
            assert [op for op in lim.exchange().ops() if op.startswith(b"MSG")] == [
                b"MSG ok.z 1 2\r\nhi"
            ]


def test_max_payload_config() -> None:
    with pair("max_payload: 1024\n") as s:
        for kind, sp in s.items():
            with RawClient(sp.host, sp.port) as c:
                assert c.info["max_payload"] == 1024, kind
        conn = connect_line(verbose=False, pedantic=False)
        ok = both(s, conn + b"SUB foo 1\r\nPUB foo 1024\r\n" + b"x" * 1024 + b"\r\n")
        assert ok == ([b"MSG foo 1 1024\r\n" + b"x" * 1024, b"PONG"], False)
        bad = both(s, conn + b"PUB foo 1025\r\n")
        assert bad == ([b"-ERR 'Maximum Payload Violation'"], True)


def test_max_control_line_config() -> None:
    with pair("max_control_line: 64\n") as s:
        conn = connect_line(verbose=False, pedantic=False)
        assert both(s, conn + b"SUB " + b"a" * 50 + b" 1\r\n") == ([b"PONG"], False)
        assert both(s, conn + b"SUB " + b"a" * 70 + b" 1\r\n") == (
            [b"-ERR 'maximum control line exceeded'"],
            True,
        )
