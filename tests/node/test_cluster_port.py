"""The single cluster port tells Raft links from routes by their first bytes."""

from __future__ import annotations

import trio

from node.config import ClusterConfig, ServerConfig
from node.server import Server


class FakeLinks:
    def __init__(self) -> None:
        self.got = trio.Event()
        self.first = b""

    async def serve_stream(self, stream: trio.abc.Stream, already_read: bytes = b"") -> None:
        self.first = already_read
        self.got.set()
        await trio.aclose_forcefully(stream)


async def test_raft_magic_goes_to_raft_links_and_text_to_routes() -> None:
    cfg = ServerConfig(host="127.0.0.1", port=-1)
    cfg.cluster = ClusterConfig(name="C1", host="127.0.0.1", port=-1)
    server = Server(cfg)
    links = FakeLinks()
    server.raft_links = links
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        port = server.cluster_port
        assert port
        s = await trio.open_tcp_stream("127.0.0.1", port)
        await s.send_all(b"TJRAFT1\nhello")
        with trio.fail_after(5):
            await links.got.wait()
        assert links.first.startswith(b"TJRAFT1\n")
        await s.aclose()

        r = await trio.open_tcp_stream("127.0.0.1", port)
        await r.send_all(b"GARBAGE\r\n")
        data = b""
        with trio.fail_after(5):
            while True:
                chunk = await r.receive_some(65536)
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"INFO ")
        assert data.endswith(b"-ERR 'Authorization Violation'\r\n")
        await r.aclose()
        server.shutdown()
