"""Journal compaction and catch-up by streaming the store, on three trijet-server processes.

The stream groups' journal bound is lowered (``raft_journal_entries_max``) so that a
follower stopped while a few hundred messages are published comes back behind the
leader's snapshot: it must install the snapshot's state, fetch the messages from the
leader's store (``/raftz?acc=$G`` ``catchup`` counters say it did), end message for
message equal, and keep every consumer's ack state through compaction and a leader
change onto it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, get_json, start_cluster

REQUEST_TIMEOUT_S = 2.0
JOURNAL_ENTRIES_MAX = 60


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with start_cluster(
        "trijet",
        workdir=tmp_path,
        jetstream_conf=f"  raft_journal_entries_max: {JOURNAL_ENTRIES_MAX}",
    ) as c:
        yield c


def _raftz(c: Cluster, i: int) -> dict[str, Any]:
    doc = get_json(f"{c.monitoring_urls[i]}/raftz?acc=$G") or {}
    groups = doc.get("$G") or {}
    assert len(groups) <= 1
    return next(iter(groups.values()), {})


def _local_state(c: Cluster, i: int, stream: str) -> dict[str, Any] | None:
    doc = get_json(f"{c.monitoring_urls[i]}/jsz?streams=true")
    for acc in (doc or {}).get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] == stream:
                return dict(s["state"])
    return None


def test_follower_behind_the_snapshot_catches_up_from_the_store(cluster: Cluster) -> None:
    n_before, n_during = 20, 300

    async def setup() -> str:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            info = await js.add_stream(name="CP", subjects=["cp.>"], num_replicas=3)
            for i in range(n_before):
                await js.publish(f"cp.{i % 4}", b"m%d" % i)
            # a long ack wait: the pending ones must not come due during the test
            cfg = nats.js.api.ConsumerConfig(durable_name="D", ack_wait=600.0)
            await js.add_consumer("CP", cfg)
            sub = await js.pull_subscribe("cp.>", durable="D")
            msgs = await sub.fetch(10, timeout=5)
            for m in msgs[:5]:
                await m.ack_sync()
            return str(info.cluster.leader)
        finally:
            await nc.close()

    leader = run(setup, timeout=60)
    victim = next(i for i in range(3) if cluster.names[i] != leader)
    cluster.kill(victim)

    async def load() -> None:
        nc = await nats.connect(cluster.urls[cluster.index(leader)], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            for i in range(n_before, n_before + n_during):
                ack = await js.publish(f"cp.{i % 4}", b"m%d" % i)
                assert ack.seq == i + 1
        finally:
            await nc.close()

    run(load, timeout=120)
    li = cluster.index(leader)
    cluster.wait_until(
        lambda c: _raftz(c, li).get("first_index", 0) > n_before + JOURNAL_ENTRIES_MAX,
        timeout=20,
        what="the leader compacted its journal",
    )
    assert _raftz(cluster, li)["snapshots_taken"] >= 1
    cluster.restart(victim)
    total = n_before + n_during

    def caught_up(c: Cluster) -> bool:
        s = _local_state(c, victim, "CP")
        if s is None or s["messages"] != total or s["last_seq"] != total:
            return False
        # the store holds every message before the catch-up ends: its fsync
        # and durable mark come after the last batch is written
        cu = _raftz(c, victim)["catchup"]
        return bool(cu["current"]) and cu["done"] >= 1

    cluster.wait_until(caught_up, timeout=30, what="the restarted follower caught up")
    rz = _raftz(cluster, victim)
    cu = rz["catchup"]
    assert cu["msgs"] >= n_during - JOURNAL_ENTRIES_MAX, rz  # through the store, not the log
    assert rz["snapshots_installed"] >= 1

    async def move_and_check() -> None:
        nc = await nats.connect(cluster.urls[victim], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            target = cluster.names[victim]
            for _ in range(20):  # the lead moves onto the caught-up follower
                info = await js.stream_info("CP")  # (answered once a leader is known)
                if info.cluster is not None and info.cluster.leader == target:
                    break
                try:
                    r = await nc.request(
                        "$JS.API.STREAM.LEADER.STEPDOWN.CP",
                        json.dumps({"placement": {"preferred": target}}).encode(),
                        timeout=REQUEST_TIMEOUT_S,
                    )
                except nats.errors.TimeoutError:
                    # met the election of the previous stepdown: nobody acts on it
                    # (nats-server leaves a leaderless stream's requests unanswered)
                    continue
                assert b"error" not in r.data or b"10" in r.data
            else:
                raise AssertionError("the lead never moved to the caught-up follower")
            # message for message what was published, read from the new leader's store
            for seq in range(1, total + 1):
                m = await js.get_msg("CP", seq)
                assert (m.seq, m.subject, m.data) == (
                    seq,
                    f"cp.{(seq - 1) % 4}",
                    b"m%d" % (seq - 1),
                )
            # the consumer's ack state survived compaction and the leader change
            ci = await js.consumer_info("CP", "D")
            assert ci.delivered.stream_seq == 10
            assert ci.ack_floor.stream_seq == 5
            assert ci.num_ack_pending == 5
            # acknowledged messages never come back; the pending ones and then new ones do
            # (trijet redelivers the pending at once after a leader change, with or
            # without compaction)
            sub = await js.pull_subscribe("cp.>", durable="D")
            seen: list[int] = []
            for _ in range(10):
                for m in await sub.fetch(10 - len(seen), timeout=5):
                    seen.append(m.metadata.sequence.stream)
                    await m.ack_sync()
                if len(seen) >= 10:
                    break
            assert sorted(seen) == list(range(6, 16)), seen
        finally:
            await nc.close()

    run(move_and_check, timeout=90)

    # every node restarts from its snapshot + journal: nothing re-applied, nothing lost,
    # the consumer's state (acked up to 15 now) intact
    for i in range(3):
        cluster.restart(i, wait=False)
    cluster.wait_formed()

    def all_hold(c: Cluster) -> bool:
        states = [_local_state(c, i, "CP") for i in range(3)]
        return all(
            s is not None and (s["messages"], s["last_seq"]) == (total, total) for s in states
        )

    cluster.wait_until(
        all_hold, timeout=30, what="every replica holds every message after a restart"
    )

    async def after_restart() -> None:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            for _ in range(50):  # a leader is elected
                try:
                    ci = await js.consumer_info("CP", "D")
                    break
                except (nats.errors.TimeoutError, nats.js.errors.APIError):
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError("no consumer info after the restart")
            assert ci.ack_floor.stream_seq == 15 and ci.num_ack_pending == 0
            ack = await js.publish("cp.0", b"after")
            assert ack.seq == total + 1  # no sequence assigned twice, none skipped
        finally:
            await nc.close()

    run(after_restart, timeout=60)
