"""R3 catch-up through the store path, on three trijet-server processes and nats-py.

The stream groups' journal bound is made small (``TRIJET_STREAM_JOURNAL_ENTRIES_MAX``) so
that a follower stopped while more than the bound is published finds the leader's journal
compacted past it when it returns: it installs the leader's state snapshot and fetches the
missing messages from a peer's store (its log says ``event=catchup_done``), then ends
message-for-message equal to the others (their stores are opened and compared once the
servers are stopped).  A consumer's ack state survives the compaction and a leader change.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import nats
import pytest

from store.file import FileStreamStore
from tests.integration.test_cluster_r3 import _local_state, _wait_replicas_equal
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, start_cluster

REQUEST_TIMEOUT_S = 5.0  # a loaded machine
JOURNAL_ENTRIES_MAX = 100
PUBLISHED_WHILE_DOWN = 5 * JOURNAL_ENTRIES_MAX


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TRIJET_STREAM_JOURNAL_ENTRIES_MAX", str(JOURNAL_ENTRIES_MAX))
    with start_cluster("trijet", workdir=tmp_path) as c:
        yield c


def _contents(store_dir: Path) -> list[tuple[int, str, bytes]]:
    store = FileStreamStore(store_dir)
    try:
        out: list[tuple[int, str, bytes]] = []
        seq = store.state().first_seq
        while run_ := store.load_run(seq, 256):
            out += [(m.seq, m.subject, m.payload) for m in run_]
            seq = run_[-1].seq + 1
        return out
    finally:
        store.close()


def _stream_dir(c: Cluster, i: int, stream: str) -> Path:
    found = sorted(c.specs[i].workdir.glob(f"**/streams/{stream}"))
    assert found, f"no store of {stream} under {c.specs[i].workdir}"
    return found[0]


def _msgs_dir(c: Cluster, i: int, stream: str) -> Path:
    d = _stream_dir(c, i, stream)
    subdirs = [p for p in d.iterdir() if p.is_dir() and p.name != "raft"]
    return subdirs[0] if len(subdirs) == 1 and not list(d.glob("*.seg")) else d


async def _consumer_state(js: Any) -> tuple[int, int, int, int]:
    ci = await js.consumer_info("CU", "D")
    return (
        ci.delivered.stream_seq,
        ci.ack_floor.stream_seq,
        ci.num_ack_pending,
        ci.num_redelivered,
    )


def test_a_follower_behind_the_compacted_journal_catches_up_through_the_store(
    cluster: Cluster,
) -> None:
    async def setup() -> tuple[str, tuple[int, int, int, int]]:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            info = await js.add_stream(name="CU", subjects=["cu.>"], num_replicas=3)
            for i in range(20):
                await js.publish(f"cu.{i % 4}", b"early-%d" % i)
            sub = await js.pull_subscribe("cu.>", "D")
            msgs = await sub.fetch(10, timeout=5)
            for m in msgs[:5]:
                await m.ack_sync()
            await msgs[5].nak()
            return str(info.cluster.leader), await _consumer_state(js)
        finally:
            await nc.close()

    leader, cstate = run(setup, timeout=60)
    li = cluster.index(leader)
    fi = next(i for i in range(3) if i != li)
    _wait_replicas_equal(cluster, "CU", 20)
    cluster.kill(fi)
    other = next(i for i in range(3) if i not in (li, fi))

    async def while_down() -> tuple[str, tuple[int, int, int, int]]:
        nc = await nats.connect(cluster.urls[other], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            for i in range(PUBLISHED_WHILE_DOWN):  # one entry each: past the bound
                ack = await js.publish(f"cu.{i % 4}", b"late-%d" % i)
                assert ack.seq == 21 + i
            before = await _consumer_state(js)
            # a leader change after the compaction: the consumer's state is intact
            resp = await nc.request("$JS.API.STREAM.LEADER.STEPDOWN.CU", b"", timeout=5)
            assert json.loads(resp.data).get("success") is True, resp.data
            for _ in range(100):
                try:
                    si = await js.stream_info("CU")
                    if si.cluster.leader and si.cluster.leader != leader:
                        break
                except nats.errors.Error:
                    pass
                await asyncio.sleep(0.1)
            assert await _consumer_state(js) == before
            return str(si.cluster.leader), before
        finally:
            await nc.close()

    new_leader, after = run(while_down, timeout=120)
    assert new_leader != leader
    assert after == cstate  # publishes moved nothing of the consumer's
    cluster.restart(fi)
    total = 20 + PUBLISHED_WHILE_DOWN
    _wait_replicas_equal(cluster, "CU", total, timeout=60)
    log = cluster.servers[fi].log_text()  # type: ignore[union-attr]
    done = re.findall(r"event=catchup_done group=\S+ index=\d+ msgs_fetched=(\d+)", log)
    assert done and int(done[-1]) >= PUBLISHED_WHILE_DOWN - 2 * JOURNAL_ENTRIES_MAX, log[-3000:]
    st = _local_state(cluster, fi, "CU")
    assert st is not None and st["last_seq"] == total

    async def consumer_after() -> tuple[int, int, int, int]:
        nc = await nats.connect(cluster.urls[fi], error_cb=noop_cb)
        try:
            return await _consumer_state(nc.jetstream(timeout=REQUEST_TIMEOUT_S))
        finally:
            await nc.close()

    assert run(consumer_after, timeout=30) == cstate

    def synced(c: Cluster) -> bool:  # every store synced through the last message (the mark)
        marks = [_stream_dir(c, i, "CU") / "raft" / "applied.json" for i in range(3)]
        return all(m.exists() and json.loads(m.read_text())["last_seq"] == total for m in marks)

    cluster.wait_until(synced, timeout=30, what="every replica's applied mark at the last message")
    cluster.stop()
    contents = [_contents(_msgs_dir(cluster, i, "CU")) for i in range(3)]
    assert len(contents[fi]) == total
    assert contents[fi] == contents[li] == contents[other]
