"""Pull requests go to the consumer's leader only, and none is lost while the lead moves.

Three trijet processes, an R3 stream and a durable pull consumer
(``node.nextroute``).  While the lead is steady, ``MSG.NEXT`` requests sent
on a follower are answered by the leader and never reach the third server
as a request: its JetStream does not act on them, though a client subscribed to
``$JS.API.CONSUMER.MSG.NEXT.>`` there sees each one once, as on nats-server
where a pull is an ordinary message (``test_cluster_r3_pullkill``); nor do
requests sent on the leader reach a follower's JetStream.  Then the lead moves twice
(``STREAM.LEADER.STEPDOWN``); as soon as the old leader's ``/jsz`` says it no
longer leads -- the new one may not be elected yet, or its interest may not
have reached every server --, each server's connection sends pulls, and every
one of them is answered with a message (sent to the new leader's interest,
forwarded by the old leader, or parked through the election).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.integration.test_cluster_r3_pullkill import interest_everywhere
from tests.integration.test_cluster_r3_push import LeaderMoves, retrying, stream_leader
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, get_json, start_cluster

#: bound on a pull's answer (an election on a loaded machine included)
ANSWER_S = 20.0
PULLS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with start_cluster("trijet", workdir=tmp_path) as c:
        yield c


def _leads(c: Cluster, name: str) -> bool | None:
    """Whether server ``name`` reports itself the leader of stream NR (None: no answer)."""
    doc = get_json(f"{c.monitoring_urls[c.index(name)]}/jsz?streams=true")
    for acc in (doc or {}).get("account_details") or []:
        for sd in acc.get("stream_detail") or []:
            if sd.get("name") == "NR":
                return bool((sd.get("cluster") or {}).get("leader") == name)
    return None


async def pull_one(nc: Any) -> bytes:
    """One raw ``MSG.NEXT`` (batch 1): the message it is answered with."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        body = json.dumps({"batch": 1, "expires": int(ANSWER_S * 1e9)}).encode()
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.NR.D", body, reply=inbox)
        try:
            msg = await sub.next_msg(timeout=ANSWER_S)
        except nats.errors.TimeoutError:
            raise AssertionError(
                f"no answer to {inbox} via {nc._server_info['server_name']}"
            ) from None
        assert not (msg.headers or {}).get("Status"), msg.headers
        await msg.ack()
        return bytes(msg.data)
    finally:
        await sub.unsubscribe()


def test_pulls_reach_only_the_leader_and_survive_stepdowns(cluster: Cluster) -> None:
    moves = LeaderMoves(cluster, "NR", ["nr.>"])

    async def body() -> None:
        nc0 = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        leader, home, third = await moves.setup(nc0)
        await nc0.close()
        ncs = {
            n: await nats.connect(cluster.urls[cluster.index(n)], error_cb=noop_cb)
            for n in (leader, home, third)
        }
        try:
            js = ncs[home].jetstream(timeout=5.0)
            await retrying(lambda: js.add_consumer("NR", durable_name="D", ack_policy="explicit"))
            for i in range(40):
                await retrying(lambda i=i: js.publish("nr.a", b"%d" % i, timeout=2.0))
            seen: list[str] = []

            async def spy(msg: Any) -> None:
                seen.append(msg.subject)

            await ncs[third].subscribe("$JS.API.CONSUMER.MSG.NEXT.>", cb=spy)
            await ncs[third].flush()
            # the onlooker's server has told the others (its copies' subject)
            await interest_everywhere(cluster, "$TRIJET.SEEN.>", source=third)
            got = [await pull_one(ncs[home]) for _ in range(PULLS)]
            got += [await pull_one(ncs[leader]) for _ in range(PULLS)]
            assert len(set(got)) == 2 * PULLS
            # seen by the onlooker once each (its server's JetStream deaf to them);
            # the copies travel beside the answers: wait for them (bounded)
            for _ in range(200):
                await ncs[third].flush()
                if len(seen) >= 2 * PULLS:
                    break
                await asyncio.sleep(0.02)
            assert seen == ["$JS.API.CONSUMER.MSG.NEXT.NR.D"] * (2 * PULLS), seen

            for old, new in ((leader, third), (third, leader)):
                for _ in range(400):  # the old leader's own view first (bounded)
                    if _leads(cluster, old):
                        break
                    await asyncio.sleep(0.02)
                else:
                    raise AssertionError(f"{old} does not say it leads")
                body = json.dumps({"placement": {"preferred": new}}).encode()
                resp = await ncs[home].request(
                    "$JS.API.STREAM.LEADER.STEPDOWN.NR", body, timeout=5.0
                )
                assert json.loads(resp.data).get("success") is True, resp.data
                for _ in range(400):
                    if _leads(cluster, old) is False:
                        break
                    await asyncio.sleep(0.02)
                else:
                    raise AssertionError(f"{old} kept the lead")
                pulls = [pull_one(nc) for nc in ncs.values() for _ in range(PULLS)]
                answers = await asyncio.gather(*pulls)
                assert len(set(answers)) == len(answers)
                assert await stream_leader(js, "NR") == new
        finally:
            for nc in ncs.values():
                await nc.close()

    run(body, timeout=120)
