"""Requests at the edges of the sequence space and store failures must not take
the server down: huge purge sequences behave as on nats-server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from tests.support import start_server
from tests.support.aio import noop_cb, run


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_purge_to_a_huge_sequence_then_publish(kind: str, storage: str, tmp_path: Path) -> None:
    server = start_server(kind, ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path)
    big = 1 << 63

    async def main() -> tuple[object, ...]:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        try:
            cfg = {"name": "BIG", "subjects": ["big.>"], "storage": storage}
            await nc.request("$JS.API.STREAM.CREATE.BIG", json.dumps(cfg).encode(), timeout=5)
            await nc.request("big.a", b"1", timeout=5)
            purge = await nc.request(
                "$JS.API.STREAM.PURGE.BIG", json.dumps({"seq": big}).encode(), timeout=5
            )
            ack = json.loads((await nc.request("big.b", b"2", timeout=5)).data)
            info = json.loads((await nc.request("$JS.API.STREAM.INFO.BIG", b"", timeout=5)).data)
            # the server is still alive and answering
            alive = json.loads((await nc.request("$JS.API.INFO", b"", timeout=5)).data)
            return json.loads(purge.data), ack, info["state"], alive["streams"]
        finally:
            await nc.close()

    try:
        purge, ack, state, streams = run(main)
    finally:
        server.stop()
    assert purge["success"] is True and purge["purged"] == 1
    assert ack == {"stream": "BIG", "seq": big}
    assert (state["messages"], state["first_seq"], state["last_seq"]) == (1, big, big)
    assert streams == 1


def test_deleting_a_stream_with_a_bound_push_consumer(tmp_path: Path) -> None:
    server = start_server("trijet", ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path)

    async def main() -> int:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        try:
            js = nc.jetstream()
            await js.add_stream(name="P", subjects=["p.>"])
            for i in range(3):
                await js.publish("p.x", b"%d" % i)
            got = asyncio.Queue[object]()

            async def cb(msg: object) -> None:
                await got.put(msg)

            await js.subscribe("p.>", durable="d", cb=cb, idle_heartbeat=0.5, flow_control=True)
            for _ in range(3):
                await asyncio.wait_for(got.get(), 5)
            await js.delete_stream("P")
            # the server keeps serving
            info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=5)).data)
            return int(info["streams"])
        finally:
            await nc.close()

    try:
        assert run(main) == 0
    finally:
        code = server.stop()
    assert code == 0  # a clean exit on SIGTERM, not a crash
