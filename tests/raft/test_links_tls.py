"""Raft peer links over TLS: handshake, authentication and frames inside TLS."""

from __future__ import annotations

import ssl
import warnings
from pathlib import Path

import pytest
import trio

from raft.links import TcpPeerLinks
from tests.support.certs import make_certs, openssl_available

pytestmark = pytest.mark.skipif(not openssl_available(), reason="openssl CLI not installed")


def _context(certs_dir: Path) -> ssl.SSLContext:
    certs = make_certs(certs_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS)  # one context for both directions
    ctx.load_cert_chain(str(certs.peer_cert), str(certs.peer_key))
    ctx.load_verify_locations(str(certs.ca_cert))
    ctx.verify_mode = ssl.CERT_REQUIRED  # mutual TLS between peers
    ctx.check_hostname = False
    return ctx


async def test_links_carry_frames_over_mutual_tls(tmp_path: Path) -> None:
    ctx = _context(tmp_path / "certs")
    got = trio.Event()
    received: list[tuple[str, bytes]] = []

    def on_frame(peer: str, payload: bytes) -> None:
        received.append((peer, payload))
        got.set()

    b = TcpPeerLinks("b", b"secret", {}, ssl_context=ctx)
    b.register("g", on_frame)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(b.serve, "127.0.0.1", 0)
        port = listeners[0].socket.getsockname()[1]
        await nursery.start(b.run)
        a = TcpPeerLinks("a", b"secret", {"b": ("127.0.0.1", port)}, ssl_context=ctx)
        a.register("g", lambda peer, payload: None)
        await nursery.start(a.run)
        with trio.fail_after(10):
            await a.wait_connected("b")
            assert a.send("b", "g", b"over tls")
            await got.wait()
        assert received == [("a", b"over tls")]
        nursery.cancel_scope.cancel()


async def test_plaintext_peer_is_refused_by_a_tls_node(tmp_path: Path) -> None:
    ctx = _context(tmp_path / "certs")
    b = TcpPeerLinks("b", b"secret", {}, ssl_context=ctx, handshake_timeout_s=1.0)
    b.register("g", lambda peer, payload: None)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(b.serve, "127.0.0.1", 0)
        port = listeners[0].socket.getsockname()[1]
        await nursery.start(b.run)
        a = TcpPeerLinks("a", b"secret", {"b": ("127.0.0.1", port)}, backoff_s_max=0.2)
        a.register("g", lambda peer, payload: None)
        await nursery.start(a.run)
        with trio.move_on_after(2):
            await a.wait_connected("b")
        assert not a.is_connected("b")
        assert not b.is_connected("a")
        nursery.cancel_scope.cancel()
