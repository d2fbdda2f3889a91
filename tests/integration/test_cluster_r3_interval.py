"""An R3 stream at the user's ``sync_interval`` (nats-server's default durability), on
three trijet-server processes.

With ``jetstream { sync_interval: 2m }`` a stream group's journal appends are written,
not fsynced, before a member answers (``raft.journal`` interval mode): ``/raftz`` shows
the writes made on the event loop and no fsync per publish.  What was acknowledged
survives a SIGKILL of any member (a process crash keeps the page cache) and the
restarted member's store holds every message again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors

from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, get_json, start_cluster

REQUEST_TIMEOUT_S = 5.0
N = 120


def _raftz(c: Cluster, i: int) -> dict[str, Any]:
    doc = get_json(f"{c.monitoring_urls[i]}/raftz?acc=$G") or {}
    groups = doc.get("$G") or {}
    return next(iter(groups.values()), {})


def _local_msgs(c: Cluster, i: int, stream: str) -> int | None:
    doc = get_json(f"{c.monitoring_urls[i]}/jsz?streams=true")
    for acc in (doc or {}).get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] == stream:
                return int(s["state"]["messages"])
    return None


def test_r3_at_sync_interval_writes_without_fsync_and_keeps_acked_through_sigkill(
    tmp_path: Path,
) -> None:
    with start_cluster("trijet", workdir=tmp_path, jetstream_conf="  sync_interval: 2m") as c:

        async def publish(lo: int, hi: int, via: int) -> str:
            nc = await nats.connect(c.urls[via], error_cb=noop_cb)
            try:
                js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
                if lo == 0:
                    await js.add_stream(name="IV", subjects=["iv.>"], num_replicas=3)
                for i in range(lo, hi):
                    # right after the kill no leader may be known yet: 503, retried
                    # with the same Nats-Msg-Id (no second copy either way)
                    for _ in range(200):
                        try:
                            ack = await js.publish(
                                f"iv.{i % 3}", b"m%d" % i, headers={"Nats-Msg-Id": f"iv-{i}"}
                            )
                            break
                        except (nats.js.errors.NoStreamResponseError, nats.errors.TimeoutError):
                            await asyncio.sleep(0.05)
                    else:
                        raise AssertionError(f"publish {i} never acknowledged")
                    assert ack.seq == i + 1
                info = await js.stream_info("IV")
                assert info.state.messages == hi
                return str(info.cluster.leader)
            finally:
                await nc.close()

        leader = run(lambda: publish(0, N, 0), timeout=60)
        li = c.index(leader)
        for i in range(3):
            rz = _raftz(c, i)
            assert rz["inline_writes"] > 0, rz  # written on the loop
            assert rz["fsyncs"] < N // 4, rz  # not one per publish (votes only)
        c.kill(li)  # acknowledged, written, never fsynced: the page cache keeps it
        survivor = next(i for i in range(3) if i != li)
        run(lambda: publish(N, 2 * N, survivor), timeout=60)
        c.restart(li)
        c.wait_until(
            lambda cl: _local_msgs(cl, li, "IV") == 2 * N,
            timeout=30,
            what="the restarted member holds every acknowledged message",
        )
