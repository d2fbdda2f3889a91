"""Core NATS against a real trijet process, driven by nats-py (asyncio, run from sync tests).

One server per module for the plain pub/sub scenarios; tests that need their own
config or kill the server start their own.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections import Counter
from collections.abc import Iterator
from typing import Any

import nats
import nats.errors
import pytest

from tests.support import RawClient, ServerProcess, start_server
from tests.support.aio import ErrorLog, run
from tests.support.raw import connect_line


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    sp = start_server("trijet")
    try:
        yield sp
    finally:
        sp.stop()
        print(sp.log_text()[-3000:])


async def connect(sp: ServerProcess, **kw: Any) -> nats.NATS:
    kw.setdefault("allow_reconnect", False)
    kw.setdefault("connect_timeout", 5)
    kw.setdefault("error_cb", ErrorLog().cb)
    return await nats.connect(sp.url, **kw)


def test_pub_sub(server: ServerProcess) -> None:
    async def main() -> None:
        nc = await connect(server)
        try:
            sub = await nc.subscribe("greet.joe")
            await nc.publish("greet.joe", b"hello")
            await nc.publish("greet.sue", b"not for joe")
            await nc.publish("greet.joe", b"")
            msg = await sub.next_msg(timeout=5)
            assert (msg.subject, msg.data) == ("greet.joe", b"hello")
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b""
            await nc.flush()
            assert sub.pending_msgs == 0
            assert nc.connected_server_version.major == 2
        finally:
            await nc.close()

    run(main)


def test_wildcards(server: ServerProcess) -> None:
    async def main() -> None:
        nc = await connect(server)
        try:
            star = await nc.subscribe("a.*.c")
            full = await nc.subscribe("a.>")
            top = await nc.subscribe(">")
            subjects = ["a.b.c", "a.x.c", "a.b", "a.b.c.d", "b.c", "a"]
            for s in subjects:
                await nc.publish(s, s.encode())
            await nc.flush()

            async def drain(sub: Any, n: int) -> list[str]:
                return [(await sub.next_msg(timeout=5)).subject for _ in range(n)]

            assert await drain(star, 2) == ["a.b.c", "a.x.c"]
            assert await drain(full, 4) == ["a.b.c", "a.x.c", "a.b", "a.b.c.d"]
            assert await drain(top, 6) == subjects
            await nc.flush()
            assert star.pending_msgs == full.pending_msgs == top.pending_msgs == 0
        finally:
            await nc.close()

    run(main)


def test_queue_groups(server: ServerProcess) -> None:
    """Each message goes to exactly one member of a group; every member gets some."""

    async def main() -> None:
        n = 300
        ncs = [await connect(server) for _ in range(4)]
        try:
            got: Counter[str] = Counter()
            seen: list[bytes] = []

            def handler(name: str) -> Any:
                async def cb(msg: Any) -> None:
                    got[name] += 1
                    seen.append(msg.data)

                return cb

            for i, nc in enumerate(ncs[:3]):
                await nc.subscribe("work", queue="workers", cb=handler(f"w{i}"))
            plain = await ncs[3].subscribe("work")
            for nc in ncs[:3]:
                await nc.flush()
            pub = ncs[3]
            for i in range(n):
                await pub.publish("work", str(i).encode())
            await pub.flush()
            for _ in range(n):
                await plain.next_msg(timeout=5)
            for nc in ncs[:3]:
                await nc.flush()  # a round trip after the plain copies: queue copies delivered
            assert sorted(seen, key=int) == [str(i).encode() for i in range(n)], "exactly once"
            assert sum(got.values()) == n
            assert all(got[f"w{i}"] > 0 for i in range(3)), got
        finally:
            for nc in ncs:
                await nc.close()

    run(main)


def test_request_reply(server: ServerProcess) -> None:
    async def main() -> None:
        svc = await connect(server)
        cli = await connect(server)
        try:

            async def responder(msg: Any) -> None:
                await msg.respond(b"re:" + msg.data)

            await svc.subscribe("svc.echo", cb=responder)
            await svc.flush()
            for i in range(20):
                resp = await cli.request("svc.echo", b"%d" % i, timeout=5)
                assert resp.data == b"re:%d" % i
            # many in flight at once over the shared inbox
            resps = await asyncio.gather(
                *(cli.request("svc.echo", b"p%d" % i, timeout=5) for i in range(50))
            )
            assert [r.data for r in resps] == [b"re:p%d" % i for i in range(50)]
        finally:
            await svc.close()
            await cli.close()

    run(main)


def test_headers(server: ServerProcess) -> None:
    async def main() -> None:
        nc = await connect(server)
        try:
            sub = await nc.subscribe("hdr")
            await nc.publish("hdr", b"body", headers={"X-One": "1", "X-Two": "two words"})
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b"body"
            assert msg.headers == {"X-One": "1", "X-Two": "two words"}

            async def status_responder(m: Any) -> None:
                await nc.publish(m.reply, b"", headers={"Status": "404"})

            await nc.subscribe("hdr.status", cb=status_responder)
            await nc.publish("hdr", b"", headers={})
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b""
        finally:
            await nc.close()

    run(main)


def test_multi_value_headers_and_status_raw(server: ServerProcess) -> None:
    """Repeated header keys keep their order; status lines pass through untouched."""
    hdr = b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB:3\r\nA: 3\r\n\r\n"
    status = b"NATS/1.0 404 No Messages\r\nX: y\r\n\r\n"
    conn = connect_line(verbose=False, pedantic=False, headers=True, protocol=1)
    with RawClient(server.host, server.port) as sub, RawClient(server.host, server.port) as pub:
        sub.exchange(conn + b"SUB mv 1\r\n")
        pub.exchange(
            conn
            + b"HPUB mv %d %d\r\n%sxy\r\n" % (len(hdr), len(hdr) + 2, hdr)
            + b"HPUB mv r %d %d\r\n%s\r\n" % (len(status), len(status), status)
        )
        msgs = [op for op in sub.exchange().ops() if op.startswith(b"HMSG")]
    assert msgs == [
        b"HMSG mv 1 %d %d\r\n%sxy" % (len(hdr), len(hdr) + 2, hdr),
        b"HMSG mv 1 r %d %d\r\n%s" % (len(status), len(status), status),
    ]

    async def main() -> None:
        nc = await connect(server)
        try:
            s = await nc.subscribe("mv")
            await nc.flush()
            with RawClient(server.host, server.port) as p:
                p.exchange(conn + b"HPUB mv %d %d\r\n%sxy\r\n" % (len(hdr), len(hdr) + 2, hdr))
            msg = await s.next_msg(timeout=5)
            assert msg.data == b"xy" and msg.headers is not None
            assert msg.headers["A"] in ("1", "2", "3") and msg.headers["B"] == "3"
        finally:
            await nc.close()

    run(main)


def test_no_responders(server: ServerProcess) -> None:
    async def main() -> None:
        nc = await connect(server)
        try:
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request("nobody.home", b"?", timeout=5)
            # the connection is still fine afterwards
            sub = await nc.subscribe("after")
            await nc.publish("after", b"ok")
            assert (await sub.next_msg(timeout=5)).data == b"ok"
        finally:
            await nc.close()

    run(main)


def test_echo_off(server: ServerProcess) -> None:
    async def main() -> None:
        quiet = await connect(server, no_echo=True)
        other = await connect(server)
        try:
            mine = await quiet.subscribe("echo.t")
            theirs = await other.subscribe("echo.t")
            await quiet.flush()
            await other.flush()
            await quiet.publish("echo.t", b"from-quiet")
            await other.publish("echo.t", b"from-other")
            await quiet.flush()
            await other.flush()
            got = {(await theirs.next_msg(timeout=5)).data for _ in range(2)}
            assert got == {b"from-quiet", b"from-other"}
            assert (await mine.next_msg(timeout=5)).data == b"from-other"
            await quiet.flush()
            assert mine.pending_msgs == 0, "no echo of its own publish"
        finally:
            await quiet.close()
            await other.close()

    run(main)


def test_max_payload(start_server: Any) -> None:
    sp = start_server("trijet", config="max_payload: 2048\n")

    async def main() -> None:
        nc = await connect(sp)
        try:
            assert nc.max_payload == 2048
            sub = await nc.subscribe("big")
            await nc.publish("big", b"x" * 2048)
            assert len((await sub.next_msg(timeout=5)).data) == 2048
            with pytest.raises(nats.errors.MaxPayloadError):
                await nc.publish("big", b"x" * 2049)
            await nc.flush()
            assert nc.is_connected
        finally:
            await nc.close()

    run(main)
    with RawClient(sp.host, sp.port) as c:
        t = c.exchange(connect_line(verbose=False) + b"PUB big 2049\r\n")
    assert t.closed and t.errors() == [b"-ERR 'Maximum Payload Violation'"]


def test_sigterm_drains_and_exits(start_server: Any) -> None:
    """Everything published and flushed before SIGTERM reaches the subscriber; exit 0; then refused.

    The subscriber is a raw socket so that every byte the server writes before
    closing is observed (nats-py drops a closed subscription's queue).
    """
    sp = start_server("trijet")
    n = 2000
    sub = RawClient(sp.host, sp.port, timeout=10)
    try:
        t = sub.exchange(connect_line(verbose=False, pedantic=False) + b"SUB drain.> 1\r\n")
        assert not t.closed

        async def publish() -> None:
            nc = await connect(sp)
            try:
                for i in range(n):
                    await nc.publish(f"drain.{i % 7}", b"%d" % i)
                await nc.flush()  # the server has read (and routed) every publish
            finally:
                await nc.close()

        run(publish)
        sp.send_signal(signal.SIGTERM)
        rest = sub.read_until_closed(timeout=10)
    finally:
        sub.close()
    assert rest.closed, "server closed the subscriber"
    payloads = [op.split(b"\r\n", 1)[1] for op in rest.ops() if op.startswith(b"MSG ")]
    assert payloads == [b"%d" % i for i in range(n)]
    assert sp.wait(timeout=10) == 0
    with pytest.raises(OSError):
        socket.create_connection((sp.host, sp.port), timeout=2).close()
    assert "Server Exiting" in sp.log_text()
