"""One JetStream per cluster: three trijet-server processes on loopback driven by nats-py.

Each API request gets exactly one reply (the meta leader's, or the stream
host's); names agree on every node; a stream lives on its assigned server
only and captures there; placement follows ``server_tags``; the meta leader
can be killed and restarted, and a node that was down comes back with its
streams.  "Exactly one reply" is checked by collecting replies on a wildcard
inbox for a bounded window after the first arrived (an absence cannot be
awaited as an event).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.cluster import REFERENCE_TAGS, Cluster, get_json, start_cluster

#: how long extra replies are waited for once the first one arrived
EXTRA_REPLY_WINDOW_S = 0.4
REQUEST_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with start_cluster("trijet", tags=REFERENCE_TAGS, workdir=tmp_path_factory.mktemp("c3")) as c:
        yield c


async def _replies(nc: Any, subject: str, body: bytes = b"") -> list[dict[str, Any]]:
    """Every reply to one request (JSON bodies)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, body, reply=inbox)
    out = [json.loads((await sub.next_msg(timeout=REQUEST_TIMEOUT_S)).data)]
    while True:
        try:
            m = await sub.next_msg(timeout=EXTRA_REPLY_WINDOW_S)
        except nats.errors.TimeoutError:
            break
        out.append(json.loads(m.data))
    await sub.unsubscribe()
    return out


async def _one(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    raw = b"" if body is None else json.dumps(body).encode()
    got = await _replies(nc, subject, raw)
    assert len(got) == 1, f"{subject}: {len(got)} replies: {got}"
    return got[0]


def test_each_request_gets_one_reply(cluster: Cluster) -> None:
    async def body() -> None:
        ncs = [await nats.connect(u, error_cb=noop_cb) for u in cluster.urls]
        try:
            nc = ncs[1]
            created = await _one(
                nc, "$JS.API.STREAM.CREATE.ONE", {"name": "ONE", "subjects": ["one.>"]}
            )
            assert created["did_create"] is True and created["config"]["name"] == "ONE"
            host = created["cluster"]["leader"]
            assert created["cluster"]["name"] == "C1"
            again = await _one(
                ncs[2], "$JS.API.STREAM.CREATE.ONE", {"name": "ONE", "subjects": ["one.>"]}
            )
            assert "did_create" not in again and again["cluster"]["leader"] == host
            other = await _one(
                ncs[0], "$JS.API.STREAM.CREATE.ONE", {"name": "ONE", "subjects": ["x.>"]}
            )
            assert other["error"]["err_code"] == 10058
            for c in ncs:  # every node: one PubAck, one INFO, one NAMES
                ack = await _one(c, "one.a", {"v": 1})
                assert ack["stream"] == "ONE"
                info = await _one(c, "$JS.API.STREAM.INFO.ONE")
                assert info["cluster"] == {"name": "C1", "leader": host}
                names = await _one(c, "$JS.API.STREAM.NAMES")
                assert names["streams"] == ["ONE"]
            info = await _one(ncs[0], "$JS.API.STREAM.INFO.ONE")
            assert info["state"]["messages"] == 3
            lst = await _one(ncs[2], "$JS.API.STREAM.LIST")
            assert [s["config"]["name"] for s in lst["streams"]] == ["ONE"]
            assert lst["streams"][0]["state"]["messages"] == 3
            missing = await _one(ncs[0], "$JS.API.STREAM.INFO.NOPE")
            assert missing["error"]["err_code"] == 10059
            cons = await _one(
                ncs[0],
                "$JS.API.CONSUMER.CREATE.ONE.C1",
                {"stream_name": "ONE", "config": {"durable_name": "C1", "ack_policy": "explicit"}},
            )
            assert cons["name"] == "C1" and cons["num_pending"] == 3
            cinfo = await _one(ncs[2], "$JS.API.CONSUMER.INFO.ONE.C1")
            assert cinfo["name"] == "C1"
            nostream = await _one(ncs[1], "$JS.API.CONSUMER.INFO.NOPE.C1")
            assert nostream["error"]["err_code"] == 10059
            acct = await _one(ncs[2], "$JS.API.INFO")
            assert acct["streams"] == 1 and acct["consumers"] == 1
            assert acct["storage"] == info["state"]["bytes"] > 0
            deleted = await _one(ncs[2], "$JS.API.STREAM.DELETE.ONE")
            assert deleted == {
                "type": "io.nats.jetstream.api.v1.stream_delete_response",
                "success": True,
            }
            gone = await _one(ncs[1], "$JS.API.STREAM.NAMES")
            assert gone["streams"] is None
            restore = await _one(
                ncs[0],
                "$JS.API.STREAM.RESTORE.RST",
                {"config": {"name": "RST", "subjects": ["rst"]}},
            )
            # one answer (the meta leader takes the upload); nothing made until it ends
            assert restore["deliver_subject"].startswith("$JS.SNAPSHOT.RESTORE.RST.")
            assert (await _one(ncs[2], "$JS.API.STREAM.NAMES"))["streams"] is None
        finally:
            for c in ncs:
                await c.close()

    run(body, timeout=60)


def test_streams_spread_agree_and_live_on_their_host(cluster: Cluster) -> None:
    async def body() -> dict[str, str]:
        ncs = [await nats.connect(u, error_cb=noop_cb) for u in cluster.urls]
        try:
            hosts = {}
            for i in range(6):
                js = ncs[i % 3].jetstream(timeout=REQUEST_TIMEOUT_S)
                info = await js.add_stream(name=f"SP{i}", subjects=[f"sp{i}.>"])
                hosts[f"SP{i}"] = info.cluster.leader
                for c in ncs:  # a publish from any node is stored once, by the host
                    await c.jetstream(timeout=REQUEST_TIMEOUT_S).publish(f"sp{i}.x", b"m")
            for c in ncs:
                names = await _one(c, "$JS.API.STREAM.NAMES")
                assert names["streams"] == sorted(hosts)
            for name in hosts:
                info = await ncs[0].jetstream().stream_info(name)
                assert info.state.messages == 3
            return hosts
        finally:
            for c in ncs:
                await c.close()

    hosts = run(body, timeout=90)
    assert len(set(hosts.values())) >= 2, hosts  # placement spreads
    for i, name in enumerate(cluster.names):  # each node runs exactly its streams
        jsz = get_json(f"{cluster.monitoring_urls[i]}/jsz?streams=true")
        assert jsz is not None
        local = {
            s["name"] for acc in jsz.get("account_details") or [] for s in acc["stream_detail"]
        }
        assert local == {s for s, h in hosts.items() if h == name and s.startswith("SP")}


def test_placement_follows_tags(cluster: Cluster) -> None:
    async def body() -> None:
        nc = await nats.connect(cluster.urls[2], error_cb=noop_cb)
        try:
            ok = await _one(
                nc,
                "$JS.API.STREAM.CREATE.TAGGED",
                {"name": "TAGGED", "subjects": ["tagged"], "placement": {"tags": ["SSD"]}},
            )
            assert ok["cluster"]["leader"] == "n1"
            assert ok["config"]["placement"] == {"tags": ["SSD"]}
            bad = await _one(
                nc,
                "$JS.API.STREAM.CREATE.NVME",
                {"name": "NVME", "subjects": ["nvme"], "placement": {"tags": ["nvme"]}},
            )
            assert bad["error"] == {
                "code": 400,
                "err_code": 10005,
                "description": "no suitable peers for placement, tags not matched ['nvme']",
            }
            names = await _one(nc, "$JS.API.STREAM.NAMES")
            assert "NVME" not in (names["streams"] or [])
        finally:
            await nc.close()

    run(body, timeout=30)


def test_meta_leader_killed_and_node_down_during_creates(tmp_path: Path) -> None:
    with start_cluster("trijet", workdir=tmp_path) as c:
        leader = c.meta_leader()
        assert leader is not None
        li = c.index(leader)
        survivor = next(i for i in range(3) if i != li)

        async def create_with_retry(url: str, name: str) -> str:
            nc = await nats.connect(url, error_cb=noop_cb)
            try:
                js = nc.jetstream(timeout=1.0)
                for _ in range(30):
                    try:
                        info = await js.add_stream(name=name, subjects=[name.lower() + ".>"])
                        return str(info.cluster.leader)
                    except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                        await asyncio.sleep(0.1)
                raise AssertionError(f"{name} not created")
            finally:
                await nc.close()

        async def publish(url: str, subject: str) -> int:
            nc = await nats.connect(url, error_cb=noop_cb)
            try:
                return (await nc.jetstream(timeout=REQUEST_TIMEOUT_S).publish(subject, b"x")).seq
            finally:
                await nc.close()

        before = run(lambda: create_with_retry(c.urls[survivor], "BEFORE"), timeout=30)
        for _ in range(3):
            run(lambda: publish(c.urls[survivor], "before.x"), timeout=10)
        c.kill(li)
        c.wait_new_meta_leader(leader, timeout=20)
        during = run(lambda: create_with_retry(c.urls[survivor], "DURING"), timeout=30)
        assert during != leader  # the dead server is not placed on
        c.restart(li)  # rejoins from its own disk
        assert c.meta_leader() is not None

        async def check() -> None:
            nc = await nats.connect(c.urls[li], error_cb=noop_cb)
            try:
                js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
                for _ in range(50):  # the restarted host reopens its streams
                    listed = await _one(nc, "$JS.API.STREAM.LIST")
                    if not listed.get("missing"):
                        break
                    await asyncio.sleep(0.1)
                assert [s["config"]["name"] for s in listed["streams"]] == ["BEFORE", "DURING"]
                info = await js.stream_info("BEFORE")
                assert info.cluster.leader == before and info.state.messages == 3
                assert (await js.publish("during.x", b"y")).seq == 1
            finally:
                await nc.close()

        run(check, timeout=30)


def test_kv_objects_sources_and_mirrors_across_nodes(cluster: Cluster) -> None:
    """An R1 stream on any node does what it does on one node, reached from any node."""
    from nats.js.api import StreamSource

    async def body() -> tuple[int, int]:
        ncs = [await nats.connect(u, error_cb=noop_cb) for u in cluster.urls]
        try:
            js = [nc.jetstream(timeout=REQUEST_TIMEOUT_S) for nc in ncs]
            kv = await js[0].create_key_value(bucket="XB")
            kv3 = await js[2].key_value("XB")
            rev = await kv3.put("k", b"v1")
            assert (await kv3.get("k")).value == b"v1"
            await kv3.update("k", b"v2", last=rev)
            assert (await kv.get("k")).value == b"v2"
            obs = await js[1].create_object_store("XO")
            await (await js[2].object_store("XO")).put("f", b"x" * 200_000)
            assert len((await obs.get("f")).data) == 200_000
            for i in range(3):
                await js[i].add_stream(name=f"XS{i}", subjects=[f"xs{i}.>"])
            await js[0].add_stream(
                name="XAGG", sources=[StreamSource(name=f"XS{i}") for i in range(3)]
            )
            await js[1].add_stream(name="XMIR", mirror=StreamSource(name="XS1"))
            for i in range(3):
                for k in range(4):
                    await js[k % 3].publish(f"xs{i}.x", b"m")
            agg = mir = 0
            for _ in range(100):  # the feeds copy asynchronously
                agg = (await js[1].stream_info("XAGG")).state.messages
                mir = (await js[2].stream_info("XMIR")).state.messages
                if (agg, mir) == (12, 4):
                    break
                await asyncio.sleep(0.05)
            return agg, mir
        finally:
            for c in ncs:
                await c.close()

    assert run(body, timeout=60) == (12, 4)


def test_restore_of_an_r1_stream_in_a_cluster(cluster: Cluster) -> None:
    """STREAM.SNAPSHOT of an R1 stream, delete, STREAM.RESTORE through another
    node: the meta leader takes the upload, the stream is assigned where its
    data landed, and every node agrees on it; an R3 restore is scaled up from there."""
    from tests.integration.test_jetstream_snapshot import restore, take_snapshot

    async def main() -> None:
        ncs = [await nats.connect(u, error_cb=noop_cb) for u in cluster.urls]
        try:
            nc = ncs[0]
            js = nc.jetstream()
            await js.add_stream(name="RST", subjects=["rst.>"])
            for i in range(50):
                await js.publish(f"rst.{i % 5}", f"m{i}".encode())
            await js.add_consumer("RST", durable_name="D", ack_policy="explicit")
            msgs = await js.pull_subscribe("rst.>", durable="D")
            for m in await msgs.fetch(10, timeout=5):
                await m.ack_sync()
            snap = await take_snapshot(nc, "RST")
            assert "error" not in snap.response, snap.response
            data, meta = snap.data, snap.meta
            await js.delete_stream("RST")
            done = await restore(ncs[1], "RST", meta, data)
            assert "error" not in done, done
            assert done["state"]["messages"] == 50
            again = await restore(ncs[2], "RST", meta, data)
            assert again["error"]["err_code"] == 10062 or again["error"]["code"] == 400, again
            for c in ncs:  # every node sees it, one answer each
                info = await c.jetstream().stream_info("RST")
                assert info.state.messages == 50 and info.cluster is not None
                ci = await c.jetstream().consumer_info("RST", "D")
                assert ci.ack_floor.stream_seq == 10
            ack = await ncs[2].jetstream().publish("rst.9", b"after")
            assert ack.seq == 51
            # a replicated restore: R1 where the upload landed, then scaled to R3
            await js.delete_stream("RST")
            r3 = dict(meta, config={**meta["config"], "num_replicas": 3})
            done = await restore(ncs[1], "RST", r3, data)
            assert "error" not in done, done
            assert done["config"]["num_replicas"] == 3 and done["state"]["messages"] == 50

            async def settled() -> bool:
                info = await ncs[2].jetstream().stream_info("RST")
                reps = info.cluster.replicas if info.cluster else None
                return (
                    info.config.num_replicas == 3
                    and info.state.messages == 50
                    and reps is not None
                    and len(reps) == 2
                    and all(r.current for r in reps)
                )

            for _ in range(150):  # bounded: the new members catch up from the holder
                if await settled():
                    break
                await asyncio.sleep(0.2)
            assert await settled()
            ci = await ncs[2].jetstream().consumer_info("RST", "D")
            assert ci.ack_floor.stream_seq == 10
        finally:
            for c in ncs:
                await c.close()

    run(main)
