"""Differential: JetStream advisories in a three-node cluster, reference vs trijet.

Theory of operation: one three-node reference cluster and one three-node
trijet cluster run for the module.  A nats-py client on **every** node of a
cluster subscribes ``$JS.EVENT.ADVISORY.>`` (API audits aside), so an
advisory published once reaches each of them once and one published by every
node would show as several distinct ids; each step's advisories are reduced
to the distinct ids' subjects (sorted: advisories from different servers
arrive in any order) and compared between the clusters,
and every advisory's keys (in order) are compared per type.  Creation and
deletion advisories, leader-elected ones at creation, and quorum-lost ones when
an R2 asset loses its follower are each published once cluster-wide.

Where trijet differs by design only what both promise is compared: a
consumer's leader is its stream's leader (its state rides in the stream's Raft
group), so a consumer stepdown moves the stream's lead too and trijet
announces both; the reference's advisories must be among trijet's.  The
reference announces a lost quorum after 10–17 s, trijet within about a second
(its leader steps down after an election timeout without a majority).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb
from tests.support.cluster import REFERENCE_TAGS, Cluster, start_cluster
from tests.support.servers import reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

#: how long a step waits for stragglers after its requests are answered
SETTLE_S = 1.0
QUORUM_LOST_WAIT_S = 30.0


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster]]:
    with start_cluster(
        "reference", tags=REFERENCE_TAGS, workdir=tmp_path_factory.mktemp("ref3")
    ) as ref:
        with start_cluster(
            "trijet", tags=REFERENCE_TAGS, workdir=tmp_path_factory.mktemp("tj3")
        ) as tj:
            for c in (ref, tj):  # for the quorum test, which needs a group older than 5 s
                asyncio.run(_request_all(c, QL_SETUP))
            yield ref, tj


QL_SETUP = [
    ("$JS.API.STREAM.CREATE.QL", {"name": "QL", "subjects": ["ql"], "num_replicas": 2}),
    (
        "$JS.API.CONSUMER.DURABLE.CREATE.QL.D",
        {"stream_name": "QL", "config": {"durable_name": "D", "ack_policy": "explicit"}},
    ),
]
#: the reference announces a lost quorum only for a group older than this
GROUP_AGE_S = 5.5


async def _request_all(c: Cluster, reqs: list[tuple[str, Any]]) -> None:
    nc = await nats.connect(c.urls[0], error_cb=noop_cb)
    try:
        for subject, b in reqs:
            await nc.request(subject, json.dumps(b).encode(), timeout=5)
    finally:
        await nc.close()


@dataclass
class Watch:
    """Advisories seen by one client per node: by id, in arrival order."""

    seen: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    copies: dict[str, int] = field(default_factory=dict)

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        out = list(self.seen.values())
        self.seen.clear()
        return out


async def _watch(c: Cluster) -> tuple[list[Any], Watch]:
    w = Watch()

    async def on_msg(m: Any) -> None:
        if m.subject == "$JS.EVENT.ADVISORY.API":
            return
        doc = json.loads(m.data)
        w.copies[doc["id"]] = w.copies.get(doc["id"], 0) + 1
        w.seen.setdefault(doc["id"], (m.subject, doc))

    ncs = []
    for url in c.urls:
        nc = await nats.connect(url, error_cb=noop_cb)
        await nc.subscribe("$JS.EVENT.ADVISORY.>", cb=on_msg)
        await nc.flush()
        ncs.append(nc)
    return ncs, w


async def _step(nc: Any, w: Watch, reqs: list[tuple[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    for subject, body in reqs:
        data = b"" if body is None else json.dumps(body).encode()
        await nc.request(subject, data, timeout=5)
    await asyncio.sleep(SETTLE_S)  # advisories after the answer: a bounded window
    return w.take()


STEPS: list[tuple[str, list[tuple[str, Any]]]] = [
    (
        "create R3",
        [("$JS.API.STREAM.CREATE.ADV", {"name": "ADV", "subjects": ["adv"], "num_replicas": 3})],
    ),
    (
        "durable",
        [
            (
                "$JS.API.CONSUMER.DURABLE.CREATE.ADV.D",
                {"stream_name": "ADV", "config": {"durable_name": "D", "ack_policy": "explicit"}},
            )
        ],
    ),
    (
        "durable R1",
        [
            (
                "$JS.API.CONSUMER.DURABLE.CREATE.ADV.D1",
                {
                    "stream_name": "ADV",
                    "config": {"durable_name": "D1", "ack_policy": "explicit", "num_replicas": 1},
                },
            )
        ],
    ),
    (
        "update",
        [
            (
                "$JS.API.STREAM.UPDATE.ADV",
                {"name": "ADV", "subjects": ["adv"], "num_replicas": 3, "max_msgs": 5},
            )
        ],
    ),
    ("delete consumer", [("$JS.API.CONSUMER.DELETE.ADV.D", None)]),
    ("delete stream", [("$JS.API.STREAM.DELETE.ADV", None)]),
    ("create R1", [("$JS.API.STREAM.CREATE.ONE", {"name": "ONE", "subjects": ["one"]})]),
    ("delete R1", [("$JS.API.STREAM.DELETE.ONE", None)]),
]


def test_lifecycle_advisories_once_each_with_the_reference_keys(
    clusters: tuple[Cluster, Cluster],
) -> None:
    ref, tj = clusters

    async def body() -> list[list[list[tuple[str, dict[str, Any]]]]]:
        sides = [await _watch(ref), await _watch(tj)]
        out: list[list[list[tuple[str, dict[str, Any]]]]] = [[], []]
        try:
            for _name, reqs in STEPS:
                for k, (ncs, w) in enumerate(sides):
                    out[k].append(await _step(ncs[0], w, reqs))
            for _ncs, w in sides:
                assert set(w.copies.values()) == {3}, w.copies  # one copy per watcher
            return out
        finally:
            for ncs, _ in sides:
                for nc in ncs:
                    await nc.close()

    r, t = asyncio.run(asyncio.wait_for(body(), 120))
    keys: list[dict[str, list[str]]] = [{}, {}]
    for (name, _), rs, ts in zip(STEPS, r, t, strict=True):
        rsub, tsub = sorted(s for s, _ in rs), sorted(s for s, _ in ts)
        if name == "delete stream":
            # the reference's CONSUMER.DELETED for the stream's remaining R1
            # consumer came in one run and not in another (its host may be
            # another server than the stream's leader); trijet sends it once
            assert len(tsub) == len(set(tsub))
            rsub = [x for x in rsub if ".CONSUMER.DELETED." not in x]
            tsub = [x for x in tsub if ".CONSUMER.DELETED." not in x]
        # arrival order across servers is not the publishing order: compared sorted
        assert tsub == rsub, f"{name}: {rs} vs {ts}"
        for k, events in enumerate((rs, ts)):
            for _, doc in events:
                keys[k][doc["type"]] = list(doc)
    assert "io.nats.jetstream.advisory.v1.consumer_leader_elected" in keys[0]
    assert keys[1] == keys[0]


def test_consumer_stepdown_announces_the_new_leader(clusters: tuple[Cluster, Cluster]) -> None:
    ref, tj = clusters

    async def body() -> list[list[str]]:
        out = []
        for c in (ref, tj):
            ncs, w = await _watch(c)
            try:
                await _step(ncs[0], w, STEPS[0][1] + STEPS[1][1])
                events = await _step(ncs[0], w, [("$JS.API.CONSUMER.LEADER.STEPDOWN.ADV.D", None)])
                out.append([s for s, _ in events])
                await _step(ncs[0], w, [("$JS.API.STREAM.DELETE.ADV", None)])
            finally:
                for nc in ncs:
                    await nc.close()
        return out

    r, t = asyncio.run(asyncio.wait_for(body(), 120))
    assert r == ["$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.ADV.D"]
    assert set(r) <= set(t) and len(t) == len(set(t))


def _created_ns(c: Cluster, stream: str) -> int:
    from node.jetstream.apireq import parse_rfc3339

    async def ask() -> int:
        nc = await nats.connect(c.urls[0], error_cb=noop_cb)
        try:
            r = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
            return parse_rfc3339(json.loads(r.data)["created"])
        finally:
            await nc.close()

    return asyncio.run(ask())


def _local_leader(c: Cluster, stream: str) -> str:
    async def ask() -> str:
        nc = await nats.connect(c.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=5)
            return str((await js.stream_info(stream)).cluster.leader)
        finally:
            await nc.close()

    return asyncio.run(ask())


def test_quorum_lost_when_an_r2_loses_its_follower(clusters: tuple[Cluster, Cluster]) -> None:
    """Last in the module: it kills a node (restarted at the end)."""
    ref, tj = clusters
    killed = []
    created_ns = _created_ns(ref, "QL")
    # QL was made when the module started; alone (-k) this test waits out the rest
    wait_s = GROUP_AGE_S - (time.time_ns() - created_ns) / 1e9
    if wait_s > 0:
        asyncio.run(asyncio.sleep(wait_s))  # the age the server measures
    leaders = [_local_leader(c, "QL") for c in (ref, tj)]

    async def watch_and_kill() -> list[dict[str, dict[str, Any]]]:
        out = []
        watchers = []
        for c, leader in zip((ref, tj), leaders, strict=True):
            nc = await nats.connect(c.urls[c.index(leader)], error_cb=noop_cb)
            got: dict[str, dict[str, Any]] = {}
            done = asyncio.Event()

            async def on_msg(m: Any, got: dict[str, Any] = got, done: asyncio.Event = done) -> None:
                got[m.subject] = json.loads(m.data)
                if len(got) == 2:
                    done.set()

            await nc.subscribe("$JS.EVENT.ADVISORY.*.QUORUM_LOST.>", cb=on_msg)
            await nc.flush()
            watchers.append((nc, got, done))
        for c, leader in zip((ref, tj), leaders, strict=True):
            info_members = {"n1", "n2", "n3"}
            follower = next(n for n in sorted(info_members - {leader}) if _hosts_stream(c, n, "QL"))
            c.kill(c.index(follower))
            killed.append((c, c.index(follower)))
        for nc, got, done in watchers:
            try:
                await asyncio.wait_for(done.wait(), QUORUM_LOST_WAIT_S)
            finally:
                await nc.close()
            out.append(got)
        return out

    try:
        r, t = asyncio.run(watch_and_kill())
    finally:
        for c, i in killed:
            c.restart(i, wait=False)
        for c, _ in killed:
            c.wait_formed()
    assert (
        set(r)
        == set(t)
        == {
            "$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.QL",
            "$JS.EVENT.ADVISORY.CONSUMER.QUORUM_LOST.QL.D",
        }
    )
    for subject in r:
        assert list(t[subject]) == list(r[subject]), subject
        for doc in (r[subject], t[subject]):
            reps = doc["replicas"]
            assert len(reps) == 2 and sum(x["current"] for x in reps) == 1
            # ``active``: the reference sent 0 in one run and real times in another


def _hosts_stream(c: Cluster, name: str, stream: str) -> bool:
    from tests.support.cluster import get_json

    doc = get_json(f"{c.monitoring_urls[c.index(name)]}/jsz?streams=true")
    for acc in (doc or {}).get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] == stream:
                return True
    return False
