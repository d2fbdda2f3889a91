"""Internal clients answer requests from real clients, locally and across routes."""

from __future__ import annotations

import trio

from node.config import ServerConfig
from node.internal import InternalClient
from node.server import Server
from node.session import Subscription
from node.sysreq import SUBS_PER_ACCOUNT


async def test_internal_service_answers_a_real_client() -> None:
    cfg = ServerConfig(host="127.0.0.1", port=-1)
    server = Server(cfg)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        svc = InternalClient(server, "echo")

        def on_req(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
        ) -> None:
            if reply:
                svc.publish(reply, b"echo:" + data)

        svc.subscribe(b"svc.echo", on_req)
        s = await trio.open_tcp_stream("127.0.0.1", server.client_port)
        await s.send_all(
            b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\n'
            b"SUB _INBOX.1 1\r\nPUB svc.echo _INBOX.1 2\r\nhi\r\n"
        )
        data = b""
        with trio.fail_after(5):
            while b"echo:hi" not in data:
                data += await s.receive_some(4096)
        assert b"MSG _INBOX.1 1 7\r\necho:hi\r\n" in data
        assert svc.in_msgs == 1
        svc.close()
        # only the client's inbox is left (and the server's own $SYS.REQ services)
        assert server.sublist.count == 1 + SUBS_PER_ACCOUNT
        await s.aclose()
        server.shutdown()
