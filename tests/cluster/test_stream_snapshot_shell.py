"""Snapshot and restore in the stream shell: ``Stream.snapshot`` is taken at
one applied point while publishes go on; ``StreamRegistry.restore`` installs a
document before the stream runs, applies a changed policy through the group,
and leaves nothing behind when the document is bad."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest
import trio

from cluster.model import Storage, StreamConfig
from cluster.stream_fsm import PubResult, StreamSnapshotError, StreamStateMachine
from cluster.stream_registry import StreamExists, StreamRegistry
from cluster.streams import Stream, policy_of
from store.memory import MemoryStreamStore


def _cfg(**kw: object) -> StreamConfig:
    return StreamConfig(name="S", subjects=("s.>",), **kw)  # type: ignore[arg-type]


def _hdr(msg_id: str) -> bytes:
    return f"NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode()


async def _publish_all(stream: Stream, n: int, prefix: str) -> list[object]:
    results: list[object] = []
    done = trio.Event()

    def on_result(r: object) -> None:
        results.append(r)
        if len(results) == n:
            done.set()

    for i in range(n):
        assert stream.offer(f"s.{i % 4}", _hdr(f"{prefix}-{i}"), b"x" * (i % 50), on_result)
        if i % 97 == 0:
            await trio.lowlevel.checkpoint()
    await done.wait()
    return results


async def test_snapshots_taken_while_publishing_are_consistent() -> None:
    cfg = _cfg()
    stream = Stream(cfg, MemoryStreamStore(cfg.limits()), created_ns=1)
    snaps: list[tuple[bytes, object]] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)

            async def snapshotter() -> None:
                for _ in range(10):
                    snaps.append(await stream.snapshot())
                    await trio.lowlevel.checkpoint()

            nursery.start_soon(snapshotter)
            results = await _publish_all(stream, 3000, "a")
            snaps.append(await stream.snapshot())
            nursery.cancel_scope.cancel()
    assert all(isinstance(r, PubResult) for r in results)
    assert len(snaps) == 11
    for doc, state in snaps:
        fsm = StreamStateMachine(MemoryStreamStore(cfg.limits()), policy_of(cfg))
        fsm.restore(io.BytesIO(doc))
        assert fsm.store.state() == state  # document and state: the same applied point
        got = list(fsm.dedupe_entries())
        assert [seq for _, seq, _ in got] == list(range(1, fsm.store.state().last_seq + 1))
    assert snaps[-1][1].msgs == 3000  # type: ignore[attr-defined]


async def _source_document(cfg: StreamConfig, n: int) -> tuple[bytes, object]:
    stream = Stream(cfg, MemoryStreamStore(cfg.limits()), created_ns=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        await _publish_all(stream, n, "src")
        await stream.delete_msg(3, erase=False)
        doc, state = await stream.snapshot()
        nursery.cancel_scope.cancel()
    return doc, state


async def test_registry_restores_a_file_stream_that_survives_reopen(tmp_path: Path) -> None:
    cfg = _cfg()
    doc, state = await _source_document(cfg, 40)
    async with trio.open_nursery() as nursery:
        reg = StreamRegistry(str(tmp_path), nursery)
        stream = await reg.restore(cfg, 777, doc)
        restored = stream.store.state()
        # a file store accounts bytes as nats-server's file store does (more than memory)
        assert replace(restored, bytes=0) == replace(state, bytes=0)  # type: ignore[type-var]
        assert stream.fsm.snapshot() == doc
        assert stream.created_ns == 777
        with pytest.raises(StreamExists):
            await reg.restore(cfg, 777, doc)
        # the restored stream takes publishes on top, dedupe included
        dup = await _publish_all(stream, 1, "src")  # id src-0 is still in the window
        assert isinstance(dup[0], PubResult) and dup[0].duplicate and dup[0].seq == 1
        nursery.cancel_scope.cancel()
    stream.store.close()
    async with trio.open_nursery() as nursery:
        reg = StreamRegistry(str(tmp_path), nursery)
        [(saved_cfg, created)] = reg.saved()
        assert (saved_cfg, created) == (cfg, 777)
        again = await reg.create(saved_cfg, created)
        assert again.store.state() == restored  # the duplicate added nothing
        nursery.cancel_scope.cancel()
    again.store.close()


async def test_a_changed_policy_is_applied_after_the_restore() -> None:
    doc, _ = await _source_document(_cfg(), 20)
    smaller = _cfg(max_msgs=5, storage=Storage.MEMORY)
    async with trio.open_nursery() as nursery:
        reg = StreamRegistry(None, nursery)
        stream = await reg.restore(smaller, 1, doc)
        st = stream.store.state()
        assert (st.msgs, st.first_seq, st.last_seq) == (5, 16, 20)
        assert stream.fsm.policy == policy_of(smaller)
        nursery.cancel_scope.cancel()


async def test_a_bad_document_creates_nothing(tmp_path: Path) -> None:
    doc, _ = await _source_document(_cfg(), 10)
    async with trio.open_nursery() as nursery:
        reg = StreamRegistry(str(tmp_path), nursery)
        with pytest.raises(StreamSnapshotError):
            await reg.restore(_cfg(), 1, doc[:-7])
        assert reg.streams == {}
        assert not (tmp_path / "streams" / "S").exists()
        assert reg.saved() == []
        # the name is free again
        stream = await reg.restore(_cfg(), 1, doc)
        assert stream.store.state().msgs == 9
        nursery.cancel_scope.cancel()
    stream.store.close()
