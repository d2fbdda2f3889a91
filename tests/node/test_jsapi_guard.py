"""Last resort for the JetStream API: an unexpected exception while handling
one request answers it with an error (500/10051), counts it in /varz
``trijet_internal_errors``, and the service goes on answering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from node.config import ServerConfig
from node.jetstream import service as service_mod
from node.protocol.connection import ProtocolConnection, Role
from node.protocol.events import Msg
from node.server import Server


async def _replies(stream: trio.abc.Stream, proto: ProtocolConnection, n: int) -> list[Msg]:
    got: list[Msg] = []
    with trio.fail_after(10):
        while len(got) < n:
            data = await stream.receive_some(65536)
            assert data, "closed"
            got.extend(e for e in proto.receive_data(data) if type(e) is Msg)
    return got


async def test_api_request_failure_is_answered_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = ServerConfig(host="127.0.0.1", port=-1)
    cfg.jetstream.enabled = True
    cfg.jetstream.store_dir = str(tmp_path)
    server = Server(cfg)

    async def broken(_svc: Any, _req: Any) -> str:
        raise RuntimeError("a bug")

    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        client_end, server_end = trio.testing.memory_stream_pair()
        nursery.start_soon(server.serve_stream, server_end, ("127.0.0.1", 1))
        proto = ProtocolConnection(Role.CLIENT)
        await client_end.send_all(b'CONNECT {"verbose":false}\r\nSUB r 1\r\n')
        monkeypatch.setattr(service_mod, "_account_info", broken)
        await client_end.send_all(b"PUB $JS.API.INFO r 0\r\n\r\n")
        (failed,) = await _replies(client_end, proto, 1)
        assert json.loads(failed.payload)["error"] == {
            "code": 500,
            "err_code": 10051,
            "description": "internal error",
        }
        assert server.stats.internal_errors == 1
        monkeypatch.undo()
        await client_end.send_all(b"PUB $JS.API.INFO r 0\r\n\r\n")
        (ok,) = await _replies(client_end, proto, 1)
        assert "error" not in json.loads(ok.payload)
        server.shutdown()
