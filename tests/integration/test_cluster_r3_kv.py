"""KV compare-and-set racing a SIGKILL of the R3 bucket's leader (nats-py).

Several writers on a surviving node increment one key with ``kv.update``
(CAS on the revision they read).  Half-way the stream's leader is killed.
Afterwards the key's whole log (every message of the bucket's stream) must
read 1, 2, 3, ... with no value twice -- a CAS applied twice would write one
value twice, a lost one would leave a hole -- and every revision a writer
was told about must be in that log with the value it wrote.  An update
whose answer was lost (timeout, no responders) is allowed to have been
applied or not, but not twice.  ``TRIJET_REFERENCE=1`` runs it against
nats-server too.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
from nats.js.errors import KeyWrongLastSequenceError

from tests.integration.test_cluster_r3_push import (
    REQUEST_TIMEOUT_S,
    cluster,  # noqa: F401  (fixture)
    retrying,
    stream_leader,
)
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster

WRITERS = 3
BEFORE_KILL = 60  # acknowledged updates before the kill
AFTER_KILL = 60  # and after it


def test_kv_cas_racing_leader_kill(cluster: Cluster) -> None:  # noqa: F811
    async def body() -> dict[str, Any]:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        kv = await js.create_key_value(bucket="CAS", replicas=3, history=1)
        await kv.put("ctr", b"0")
        leader = await stream_leader(js, "KV_CAS")
        if leader == cluster.names[0]:
            body = json.dumps({"placement": {"preferred": cluster.names[1]}}).encode()
            await nc.request("$JS.API.STREAM.LEADER.STEPDOWN.KV_CAS", body, timeout=2)
            leader = await stream_leader(js, "KV_CAS", not_=leader)
        acked: dict[int, int] = {}  # revision -> value written
        unknown = [0]
        killed = asyncio.Event()
        enough = asyncio.Event()

        async def writer() -> None:
            while not enough.is_set():
                try:
                    e = await kv.get("ctr")
                except (nats.errors.Error, nats.js.errors.Error):
                    await asyncio.sleep(0.05)
                    continue
                n = int(e.value or b"0") + 1
                try:
                    rev = await kv.update("ctr", b"%d" % n, last=e.revision)
                except KeyWrongLastSequenceError:
                    continue  # another writer won this round
                except (nats.errors.Error, nats.js.errors.Error):
                    unknown[0] += 1  # the answer was lost: applied or not
                    await asyncio.sleep(0.05)
                    continue
                assert rev not in acked, f"revision {rev} acknowledged twice"
                acked[rev] = n
                done_before = len(acked) >= BEFORE_KILL
                if done_before and not killed.is_set():
                    killed.set()
                    cluster.kill(cluster.index(leader))
                after = len(acked) >= BEFORE_KILL + AFTER_KILL
                if killed.is_set() and after:
                    enough.set()

        await asyncio.gather(*(writer() for _ in range(WRITERS)))
        info = await retrying(lambda: js.stream_info("KV_CAS"))
        log: list[tuple[int, int]] = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            m = await retrying(lambda seq=seq: js.get_msg("KV_CAS", seq))
            log.append((seq, int(m.data or b"0")))
        await nc.close()
        return {"acked": acked, "log": log, "unknown": unknown[0], "state": info.state}

    out = run(body, timeout=240)
    log = out["log"]
    state = out["state"]
    # history=1 keeps only the last revision of the key in the stream: its
    # sequence must equal its value + 1 (put "0" was seq 1; each CAS added one)
    assert len(log) == 1, log
    seq, value = log[0]
    assert seq == value + 1, f"{value} increments in {seq - 1} revisions: a CAS applied twice"
    assert state.last_seq == seq
    acked = out["acked"]
    assert len(acked) >= BEFORE_KILL + AFTER_KILL
    for rev, n in acked.items():
        assert rev == n + 1, f"revision {rev} holds {n}: lost or doubled updates before it"
    assert max(acked) <= seq
