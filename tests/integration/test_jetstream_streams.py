"""JetStream streams on one node, end to end with nats-py (issue #4 groundwork)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import BadRequestError, NotFoundError

from tests.support import start_server
from tests.support.aio import noop_cb, run, with_client


def _start(store: Path, workdir: Path) -> Any:
    return start_server("trijet", ["-js", "-sd", str(store)], workdir=workdir)


def test_create_publish_ack_dedupe_expectations_info_purge_delete(tmp_path: Path) -> None:
    server = _start(tmp_path / "store", tmp_path / "srv")

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        si = await js.add_stream(name="ORDERS", subjects=["orders.>"])
        assert si.config.subjects == ["orders.>"]
        # identical re-create is idempotent
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        acks = [await js.publish("orders.new", b"m%d" % i) for i in range(3)]
        assert [(a.stream, a.seq) for a in acks] == [
            ("ORDERS", 1),
            ("ORDERS", 2),
            ("ORDERS", 3),
        ]
        a = await js.publish("orders.x", b"d", headers={"Nats-Msg-Id": "id-1"})
        b = await js.publish("orders.x", b"d", headers={"Nats-Msg-Id": "id-1"})
        assert (a.seq, b.seq, b.duplicate) == (4, 4, True)
        with pytest.raises(BadRequestError) as exc:
            await js.publish("orders.x", b"x", headers={"Nats-Expected-Last-Sequence": "1"})
        assert exc.value.err_code == 10071
        info = await js.stream_info("ORDERS")
        assert (info.state.messages, info.state.last_seq) == (4, 4)
        assert [s.config.name for s in await js.streams_info()] == ["ORDERS"]
        with pytest.raises(BadRequestError) as exc:
            await js.add_stream(name="OTHER", subjects=["orders.new"])
        assert exc.value.err_code == 10065  # subjects overlap
        assert await js.purge_stream("ORDERS")
        info = await js.stream_info("ORDERS")
        assert (info.state.messages, info.state.first_seq) == (0, 5)
        assert await js.delete_stream("ORDERS")
        with pytest.raises(NotFoundError):
            await js.stream_info("ORDERS")
        # a subject no stream captures: no responders, fast
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await js.publish("nobody.home", b"x")

    with_client(server, main)


def test_streams_and_messages_survive_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = _start(store, tmp_path / "srv1")

    async def write() -> None:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.*"])
        for i in range(50):
            await js.publish("keep.a", b"v%d" % i, headers={"Nats-Msg-Id": f"id-{i}"})
        await nc.close()

    try:
        run(write)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(10)
    server = _start(store, tmp_path / "srv2")

    async def check() -> tuple[int, int, int, int, bool]:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        js = nc.jetstream()
        info = await js.stream_info("KEEP")
        # the dedupe state survived: a retry of a stored publish is a duplicate
        dup = await js.publish("keep.a", b"v7", headers={"Nats-Msg-Id": "id-7"})
        ack = await js.publish("keep.b", b"after")
        await nc.close()
        return info.state.messages, info.state.last_seq, ack.seq, dup.seq, bool(dup.duplicate)

    try:
        assert run(check) == (50, 50, 51, 8, True)
    finally:
        server.stop()


def test_a_standalone_server_rebuilds_its_meta_state_from_disk(tmp_path: Path) -> None:
    """A single server is a cluster of one: its creates, updates and deletes go
    through the meta state machine, whose state is the streams on its disk."""
    store = tmp_path / "store"
    first = _start(store, tmp_path / "a")

    async def before(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"])
        await js.add_stream(name="GONE", subjects=["gone"])
        await js.publish("keep.1", b"x")
        await js.delete_stream("GONE")

    try:
        with_client(first, before)
    finally:
        first.stop()
    second = _start(store, tmp_path / "b")

    async def after(nc: Any) -> None:
        js = nc.jetstream()
        assert (await js.stream_info("KEEP")).state.messages == 1
        with pytest.raises(BadRequestError) as exc:  # the name is taken: known to meta
            await js.add_stream(name="KEEP", subjects=["other"])
        assert exc.value.err_code == 10058
        with pytest.raises(BadRequestError) as exc:  # its subjects too
            await js.add_stream(name="NEW", subjects=["keep.*"])
        assert exc.value.err_code == 10065
        again = await js.add_stream(name="KEEP", subjects=["keep.>"])  # identical: fine
        assert again.state.messages == 1
        await js.add_stream(name="GONE", subjects=["gone"])  # deleted before: free
        await js.update_stream(name="KEEP", subjects=["keep.>"], max_msgs=5)
        names = await nc.request("$JS.API.STREAM.NAMES", b"", timeout=5)
        assert b'"streams":["GONE","KEEP"]' in names.data
        await js.delete_stream("KEEP")
        with pytest.raises(NotFoundError):
            await js.stream_info("KEEP")

    try:
        with_client(second, after)
    finally:
        second.stop()
