"""API requests about an R3 stream across leader changes are answered (issue 13).

Every server gets a copy of each ``$JS.API`` request and decides on its own
view whether it answers; across a leader change a request could fall between
the old leader (it arrived after the hand-over) and the new one (it arrived
while the old one still led), and nobody answered it; nats-server 2.15.1
leaves such requests unanswered as well (reference/jetstream-cluster.md 6.1),
so this is trijet's own promise, with no differential twin.  The old leader
now hands what it declines to the new one (``node.jetstream.handover``).

Three trijet-server processes; nats-py clients on every node keep
``STREAM.INFO`` and ``STREAM.MSG.GET`` requests going while the stream's
leader is stepped down several times: every request is answered, once.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.aio import answers_to, noop_cb, run
from tests.support.cluster import Cluster, start_cluster

#: generous: a request the hand-over saves is answered within a second or two
REQUEST_TIMEOUT_S = 6.0
#: a bounded look for a second answer to a request already answered
AFTER_S = 0.05
STEPDOWNS = 6
WORKERS_PER_NODE = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with start_cluster("trijet", workdir=tmp_path) as c:
        yield c


def test_requests_across_stepdowns_are_each_answered(cluster: Cluster) -> None:
    async def body() -> tuple[int, int, int, set[str]]:
        conns = [await nats.connect(u, error_cb=noop_cb) for u in cluster.urls]
        try:
            js = conns[0].jetstream(timeout=REQUEST_TIMEOUT_S)
            info = await js.add_stream(name="HO", subjects=["ho.>"], num_replicas=3)
            leaders = {str(info.cluster.leader)}
            await js.publish("ho.a", b"one")
            stop = asyncio.Event()
            answered = 0
            unanswered: list[str] = []
            dup = 0

            async def worker(nc: Any, k: int) -> None:
                nonlocal answered, dup
                for i in range(100_000):  # bounded; stopped after the stepdowns
                    if stop.is_set():
                        return
                    if i % 2:
                        subject, payload = "$JS.API.STREAM.INFO.HO", b""
                    else:
                        subject, payload = "$JS.API.STREAM.MSG.GET.HO", b'{"seq":1}'
                    got, _ = await answers_to(nc, subject, payload, REQUEST_TIMEOUT_S, AFTER_S)
                    if not got:
                        unanswered.append(f"{subject} on node {k}, #{i}")
                        continue
                    answered += 1
                    dup += len(got) - 1
                    doc = json.loads(got[0])
                    assert "error" not in doc or doc["error"]["code"] == 503, doc

            tasks = [
                asyncio.ensure_future(worker(nc, k))
                for k, nc in enumerate(conns)
                for _ in range(WORKERS_PER_NODE)
            ]
            try:
                for _ in range(STEPDOWNS):
                    before = str((await js.stream_info("HO")).cluster.leader)
                    await conns[0].request(
                        "$JS.API.STREAM.LEADER.STEPDOWN.HO", b"", timeout=REQUEST_TIMEOUT_S
                    )
                    for _ in range(200):  # bounded: a new leader within a second or so
                        try:
                            now = str((await js.stream_info("HO")).cluster.leader)
                        except nats.errors.TimeoutError:
                            raise AssertionError("STREAM.INFO unanswered") from None
                        if now not in (before, "None"):
                            leaders.add(now)
                            break
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(0.3)
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*tasks), 60)
            assert not unanswered, unanswered[:5]
            return answered, dup, len(unanswered), leaders
        finally:
            for nc in conns:
                await nc.close()

    answered, dup, lost, leaders = run(body, timeout=180)
    assert len(leaders) >= 2
    assert lost == 0
    assert dup == 0
    assert answered > STEPDOWNS * 10
