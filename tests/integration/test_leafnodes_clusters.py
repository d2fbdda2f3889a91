"""Leaf nodes, the cluster cases: a leaf that is itself a cluster (on a one-node and on a
three-node hub) delivers each message once, plain and JetStream push deliveries alike, and a
flapping leaf link leaves the hub's Raft groups alone.  Real processes, nats-py, trijet and
the reference; the shared topology helpers are in ``test_leafnodes``.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest

from tests.integration.leaf_support import (
    POLL_S,
    WAIT_S,
    hub_cluster,
    poll,
    requires_reference,
    start_leaf,
    wait_interest,
)
from tests.support import ServerProcess, start_server
from tests.support.aio import noop_cb, run
from tests.support.cluster import get_json, reserve_ports, start_cluster


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_leaf_cluster_delivers_once(kind: str, tmp_path: Path) -> None:
    """A leaf that is itself a cluster: both nodes of a two-node leaf cluster link to one
    hub; a message published on any of the three servers reaches each subscriber on every
    server exactly once (plain and queue), and requests cross both ways."""
    hub = start_server(
        kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=(
            'server_name: hub1\njetstream { store_dir: "{workdir}/js", domain: hub }\n'
            "leafnodes { host: 127.0.0.1, port: -1 }\n"
        ),
        workdir=tmp_path / "hub",
    )
    try:
        port = (get_json(f"{hub.monitoring_url}/varz") or {})["leaf"]["port"]
        lc = start_cluster(
            kind,  # type: ignore[arg-type]
            2,
            domain="leaf",
            workdir=tmp_path / "leaf",
            extra_conf=(
                f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{port}" }} ], '
                'reconnect: "250ms" }\n'
            ),
        )
        try:
            run(lambda: _leaf_cluster_scenario([hub.url, *lc.urls], [(hub, 2)]))
        finally:
            lc.stop()
    finally:
        hub.stop()


async def _leaf_cluster_scenario(urls: list[str], links: list[tuple[Any, int]]) -> None:
    """Every message published on any of ``urls`` reaches each subscriber once; ``links``:
    (hub server, its leaf link count) to wait for first."""

    def linked() -> bool:
        return all(
            (get_json(f"{sp.monitoring_url}/leafz") or {}).get("leafnodes") == n for sp, n in links
        )

    await poll(linked, "the leaf cluster's links")
    ncs = [await nats.connect(u, error_cb=noop_cb) for u in urls]
    got: list[list[bytes]] = [[] for _ in ncs]
    queued: list[bytes] = []
    try:
        for i, nc in enumerate(ncs):

            async def on_msg(msg: Any, i: int = i) -> None:
                got[i].append(msg.data)

            async def on_q(msg: Any) -> None:
                queued.append(msg.data)

            async def echo(msg: Any, i: int = i) -> None:
                await msg.respond(b"%d:" % i + msg.data)

            await nc.subscribe("x.>", cb=on_msg)
            await nc.subscribe("q.>", "g", cb=on_q)
            await nc.subscribe(f"svc.{i}", cb=echo)
        for p, pub in enumerate(ncs):
            for s, sub in enumerate(ncs):
                if p != s:
                    await wait_interest(pub, sub, f"{p}{s}")
        n = 20
        for round_ in ("m", "z"):  # the second round ends any late copy of the first
            for p, pub in enumerate(ncs):
                for k in range(n):
                    await pub.publish(f"x.{p}", b"%s%d.%d" % (round_.encode(), p, k))
                    await pub.publish(f"q.{p}", b"%s%d.%d" % (round_.encode(), p, k))
                await pub.publish(f"x.{p}", b"%s-end%d" % (round_.encode(), p))
                await pub.flush()
            for i in range(len(ncs)):
                ends = {b"%s-end%d" % (round_.encode(), p) for p in range(len(ncs))}
                await poll(lambda i=i, ends=ends: ends <= set(got[i]), f"round {round_} at {i}")
        firsts = [b"m%d.%d" % (p, k) for p in range(len(ncs)) for k in range(n)]
        firsts += [b"m-end%d" % p for p in range(len(ncs))]
        for i in range(len(ncs)):
            counts = {m: got[i].count(m) for m in firsts}
            assert counts == dict.fromkeys(firsts, 1), (i, [m for m, c in counts.items() if c != 1])
        qfirsts = [b"m%d.%d" % (p, k) for p in range(len(ncs)) for k in range(n)]
        assert {m: queued.count(m) for m in qfirsts} == dict.fromkeys(qfirsts, 1)
        for p, pub in enumerate(ncs):
            for s in range(len(ncs)):
                if p != s:
                    r = await pub.request(f"svc.{s}", b"hi%d" % p, timeout=WAIT_S)
                    assert r.data == b"%d:hi%d" % (s, p)
    finally:
        for nc in ncs:
            await nc.close()


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_leaf_cluster_on_a_hub_cluster_delivers_once(kind: str, tmp_path: Path) -> None:
    """A two-node leaf cluster whose nodes link to different nodes of a three-node hub:
    each message reaches each subscriber once, wherever it is published."""
    hub = start_cluster(
        kind,  # type: ignore[arg-type]
        3,
        domain="hub",
        workdir=tmp_path / "hub",
        extra_conf="leafnodes { host: 127.0.0.1, port: -1 }",
    )
    try:
        ports = [(get_json(f"{u}/varz") or {})["leaf"]["port"] for u in hub.monitoring_urls]
        lc = _leaf_cluster_on(kind, ports[:2], tmp_path / "leaf")
        try:
            servers = hub.servers
            links = [(servers[0], 1), (servers[1], 1)]
            run(lambda: _leaf_cluster_scenario([*hub.urls, *lc.urls], links))
        finally:
            lc.stop()
    finally:
        hub.stop()


def _leaf_cluster_on(kind: str, ports: list[int], base: Path) -> Any:
    """A leaf cluster of ``len(ports)`` nodes, node i linked to the hub's leaf port i."""
    import dataclasses

    from tests.support.cluster import (
        CLUSTER_NAME,
        DEFAULT_READY,
        FORM_TIMEOUT_S,
        Cluster,
        plan_cluster,
    )

    held = reserve_ports(3 * len(ports))
    specs = plan_cluster(
        len(ports),
        base,
        [h.getsockname()[1] for h in held],
        domain="leaf",
        extra_conf='leafnodes { remotes: [ { url: "nats://127.0.0.1:LEAFPORT" } ], '
        'reconnect: "250ms" }',
    )
    specs = [
        dataclasses.replace(
            sp,
            config=sp.config.replace("LEAFPORT", str(p)).replace(
                f"name: {CLUSTER_NAME}\n", "name: leafc\n"
            ),
        )
        for sp, p in zip(specs, ports, strict=True)
    ]
    c = Cluster(kind, specs, DEFAULT_READY[kind], [None] * len(specs))  # type: ignore[arg-type]
    for h in held:
        h.close()
    try:
        for i in range(len(specs)):
            c.start_node(i)
        c.wait_formed(FORM_TIMEOUT_S)
    except BaseException:
        c.stop()
        raise
    return c


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_leaf_cluster_push_deliveries_once(kind: str, tmp_path: Path) -> None:
    """JetStream push deliveries across a leaf cluster on a hub cluster (the leaf nodes
    linked to different hub nodes): a hub stream's consumer and a leaf stream's consumer
    each deliver every message once to a subscriber of its deliver subject on each of the
    five servers (a delivery from a leaf crosses the hub's routes with its origin)."""
    hub = start_cluster(
        kind,  # type: ignore[arg-type]
        3,
        domain="hub",
        workdir=tmp_path / "hub",
        extra_conf="leafnodes { host: 127.0.0.1, port: -1 }",
    )
    try:
        ports = [(get_json(f"{u}/varz") or {})["leaf"]["port"] for u in hub.monitoring_urls]
        lc = _leaf_cluster_on(kind, ports[:2], tmp_path / "leaf")
        try:
            servers = hub.servers
            links = [(servers[0], 1), (servers[1], 1)]
            run(lambda: _push_once_scenario(hub.urls, lc.urls, links))
        finally:
            lc.stop()
    finally:
        hub.stop()


async def _push_once_scenario(
    hub_urls: list[str], leaf_urls: list[str], links: list[tuple[Any, int]]
) -> None:
    def linked() -> bool:
        return all(
            (get_json(f"{sp.monitoring_url}/leafz") or {}).get("leafnodes") == n for sp, n in links
        )

    await poll(linked, "the leaf cluster's links")
    urls = [*hub_urls, *leaf_urls]
    ncs = [await nats.connect(u, error_cb=noop_cb) for u in urls]
    got: dict[tuple[str, int], list[bytes]] = {}
    try:
        for i, nc in enumerate(ncs):
            for d in ("dh", "dl"):
                got[(d, i)] = []

                async def on_msg(msg: Any, key: tuple[str, int] = (d, i)) -> None:
                    got[key].append(msg.data)

                await nc.subscribe(d, cb=on_msg)
        for p, pub in enumerate(ncs):
            for s, sub in enumerate(ncs):
                if p != s:
                    await wait_interest(pub, sub, f"{p}{s}")
        hjs, ljs = ncs[2].jetstream(), ncs[-1].jetstream()
        await hjs.add_stream(name="HS", subjects=["hs.>"])
        await ljs.add_stream(name="LS", subjects=["ls.>"])
        await hjs.add_consumer("HS", durable_name="h", deliver_subject="dh", ack_policy="none")
        await ljs.add_consumer("LS", durable_name="l", deliver_subject="dl", ack_policy="none")
        n = 20
        for round_ in (b"m", b"z"):  # the second round ends any late copy of the first
            for k in range(n):
                await hjs.publish("hs.1", round_ + b"%d" % k)
                await ljs.publish("ls.1", round_ + b"%d" % k)
            last = round_ + b"%d" % (n - 1)
            for key, msgs in got.items():
                await poll(lambda msgs=msgs, last=last: last in msgs, f"round {round_!r} at {key}")
        firsts = [b"m%d" % k for k in range(n)]
        for key, msgs in got.items():
            counts = {m: msgs.count(m) for m in firsts}
            assert counts == dict.fromkeys(firsts, 1), (
                key,
                [m for m, c in counts.items() if c != 1],
            )
    finally:
        for nc in ncs:
            await nc.close()


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_flapping_leaf_link_leaves_the_hub_raft_alone(kind: str, tmp_path: Path) -> None:
    """A leaf killed and started again three times while a client publishes on the hub into
    an R3 stream: the stream keeps its leader (no leader-elected advisory once its group
    settled) and every PubAck'd message is stored once.  Every wait is on a condition,
    bounded generously (a loaded machine is slow, not wrong)."""
    hub = start_cluster(
        kind,  # type: ignore[arg-type]
        3,
        domain="hub",
        workdir=tmp_path / "hub",
        extra_conf="leafnodes { host: 127.0.0.1, port: -1 }",
    )
    try:
        port = (get_json(f"{hub.monitoring_urls[0]}/varz") or {})["leaf"]["port"]
        run(lambda: _flapping_scenario(kind, hub, port, tmp_path))
    finally:
        hub.stop()


async def _flapping_scenario(kind: str, hub: Any, port: int, base: Path) -> None:
    linked_to = hub.servers[0]

    def links(n: int) -> Any:
        return lambda: (get_json(f"{linked_to.monitoring_url}/leafz") or {}).get("leafnodes") == n

    def start_leaf(i: int) -> ServerProcess:
        return start_server(
            kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=(
                f"server_name: leaf{i}\nleafnodes {{ reconnect: 250ms, remotes: [ "
                f'{{ url: "nats://127.0.0.1:{port}" }} ] }}\n'
            ),
            workdir=base / f"leaf{i}",
        )

    nc = await nats.connect(hub.urls[2], error_cb=noop_cb)
    leaf = start_leaf(0)
    try:
        elected: list[Any] = []

        async def on_elected(msg: Any) -> None:
            elected.append(msg)

        await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.FL", cb=on_elected)
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="FL", subjects=["fl.>"], num_replicas=3)
        deadline = time.monotonic() + SETTLE_S
        while not elected:  # the election at creation
            assert time.monotonic() < deadline, "no leader-elected advisory at creation"
            await asyncio.sleep(POLL_S)
        # the group settled (a leader, both followers current) before the first flap: an
        # election while it formed -- likelier under load -- is no flap's doing
        leader = await _settled_leader(js, "FL")
        settled = len(elected)
        await poll(links(1), "the leaf link")
        acked: list[bytes] = []
        failed: list[str] = []
        done = asyncio.Event()

        async def publisher() -> None:
            for k in range(100_000):
                if done.is_set():
                    return
                data = b"%d" % k
                try:
                    await js.publish("fl.1", data, timeout=2)
                    acked.append(data)
                except (nats.errors.TimeoutError, nats.js.errors.Error) as e:  # not acked
                    failed.append(repr(e))

        task = asyncio.ensure_future(publisher())
        try:
            for i in range(1, 4):
                n_before = len(acked)
                await poll(
                    lambda n=n_before: len(acked) >= n + PUBACKS_PER_PHASE,
                    f"PubAcks before flap {i}",
                    SETTLE_S,
                )
                leaf.send_signal(signal.SIGKILL)
                await asyncio.to_thread(leaf.wait, SETTLE_S)
                await poll(links(0), f"link {i} down", SETTLE_S)
                leaf = await asyncio.to_thread(start_leaf, i)  # publishing meanwhile
                await poll(links(1), f"link {i} up", SETTLE_S)
            n_before = len(acked)
            await poll(
                lambda: len(acked) >= n_before + PUBACKS_PER_PHASE,
                "PubAcks after the last restart",
                SETTLE_S,
            )
        finally:
            done.set()
            await task
        assert len(elected) == settled, ([m.data for m in elected], failed[:3])
        info = await js.stream_info("FL")
        assert info.cluster is not None and info.cluster.leader == leader
        assert info.state.messages >= len(acked) > 0
        sub = await js.pull_subscribe("fl.>", stream="FL", config=_ack_none())
        stored: list[bytes] = []
        while len(stored) < info.state.messages:
            stored += [m.data for m in await sub.fetch(1000, timeout=WAIT_S)]
        assert len(stored) == len(set(stored))
        assert set(acked) <= set(stored)
    finally:
        await nc.close()
        leaf.stop()


#: a bound, not a duration: how long a loaded machine may take to show progress
SETTLE_S = 30.0
#: PubAcks to see between flaps: publishing goes on across each
PUBACKS_PER_PHASE = 10


async def _settled_leader(js: Any, stream: str) -> str:
    """The stream's leader once every follower is current (bounded poll)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            cl = (await js.stream_info(stream)).cluster
        except nats.errors.TimeoutError:  # a slow answer: ask again
            cl = None
        if cl is not None and cl.leader and cl.replicas and all(r.current for r in cl.replicas):
            return str(cl.leader)
        assert time.monotonic() < deadline, f"{stream}'s group never settled: {cl}"
        await asyncio.sleep(POLL_S)


def _ack_none() -> Any:
    from nats.js.api import AckPolicy, ConsumerConfig

    return ConsumerConfig(ack_policy=AckPolicy.NONE)


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_queue_member_behind_a_route_before_a_leaf(kind: str, tmp_path: Path) -> None:
    """A hub server whose queue group has a member behind a leaf link and one behind a
    route (a client of the other hub server) hands every message from its own client, and
    from another leaf's (a message that came from a leaf), to the route's member; the
    leaf's member gets them only once the route's is gone (a leaf is the candidate of last
    resort)."""
    hub = hub_cluster(kind, 2, tmp_path / "hub", domain="hub")
    try:
        leaf = start_leaf(kind, "leafq", hub.monitoring_urls[0], tmp_path / "leaf")
        leaf_pub = start_leaf(kind, "leafp", hub.monitoring_urls[0], tmp_path / "leafp")
        try:
            got = run(lambda: _route_before_leaf(hub.urls, leaf.url, leaf_pub.url))
        finally:
            leaf.stop()
            leaf_pub.stop()
    finally:
        hub.stop()
    assert got == ({"route": 60, "leaf": 0}, {"route": 60, "leaf": 30})


async def _route_before_leaf(
    hub_urls: list[str], leaf_url: str, leaf_pub_url: str
) -> tuple[dict, dict]:
    pub = await nats.connect(hub_urls[0], error_cb=noop_cb)
    far = await nats.connect(hub_urls[1], error_cb=noop_cb)
    lc = await nats.connect(leaf_url, error_cb=noop_cb)
    lp = await nats.connect(leaf_pub_url, error_cb=noop_cb)  # a leaf's client publishing
    counts = {"route": 0, "leaf": 0}

    def member(key: str) -> Any:
        async def cb(msg: Any) -> None:
            counts[key] += 1

        return cb

    try:
        route_sub = await far.subscribe("work", queue="q", cb=member("route"))
        await lc.subscribe("work", queue="q", cb=member("leaf"))
        await wait_interest(pub, far, "r1")
        await wait_interest(pub, lc, "l1")
        await wait_interest(lp, far, "p1")  # the group reached the publishing leaf
        for _ in range(40):
            await pub.publish("work", b"x")
        await pub.flush()
        for _ in range(20):
            await lp.publish("work", b"x")
        await lp.flush()
        await poll(lambda: sum(counts.values()) >= 60, "60 queue messages")
        # whatever was sent had arrived before these markers, over the same paths
        await wait_interest(pub, far, "r2")
        await wait_interest(pub, lc, "l2")
        await wait_interest(lp, far, "p2")
        await wait_interest(lp, lc, "p3")
        first = dict(counts)
        await route_sub.unsubscribe()
        await wait_interest(pub, far, "r3")  # the withdrawal reached pub's server first
        for _ in range(20):
            await pub.publish("work", b"y")
        await pub.flush()
        for _ in range(10):
            await lp.publish("work", b"y")
        await lp.flush()
        await poll(lambda: sum(counts.values()) >= 90, "30 more queue messages")
        await wait_interest(pub, lc, "l3")
        await wait_interest(lp, far, "p4")
        return first, dict(counts)
    finally:
        for nc in (pub, far, lc, lp):
            await nc.close()


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_routez_lists_leaf_origin_interest(kind: str, tmp_path: Path) -> None:
    """``/routez?subs=1`` lists the interest a peer announced for its leaf cluster
    (``LS+ <origin>``) with the rest; ``subs=detail`` gives nats-server's sids: ``L <origin>
    <account> <subject> [<queue>]`` for it, ``R <account> <subject>`` for the peer's own."""
    hub = hub_cluster(kind, 2, tmp_path / "hub")
    try:
        leaf = start_leaf(kind, "leafr", hub.monitoring_urls[0], tmp_path / "leaf")
        try:
            far, near = run(lambda: _routez_with_interest(hub.urls, hub.monitoring_urls, leaf.url))
        finally:
            leaf.stop()
    finally:
        hub.stop()
    assert far == (
        ["leaf.plain", "leaf.q"],
        [
            {"subject": "leaf.plain", "sid": "L leafr $G leaf.plain", "msgs": 0},
            {"subject": "leaf.q", "qgroup": "g", "sid": "L leafr $G leaf.q g", "msgs": 0},
        ],
    )
    assert near == (
        ["hubb.plain"],
        [{"subject": "hubb.plain", "sid": "R $G hubb.plain", "msgs": 0}],
    )


_KEEP = ("leaf.", "hubb.")


async def _routez_with_interest(hub_urls: list[str], monitoring: list[str], leaf_url: str) -> Any:
    """Each hub server's view (``_routez_subs``), the far one's first, taken while the
    subscriptions live."""
    a = await nats.connect(hub_urls[0], error_cb=noop_cb)
    b = await nats.connect(hub_urls[1], error_cb=noop_cb)
    lc = await nats.connect(leaf_url, error_cb=noop_cb)
    try:
        await lc.subscribe("leaf.plain")
        for _ in range(2):
            await lc.subscribe("leaf.q", queue="g")
        await b.subscribe("hubb.plain")
        await wait_interest(b, lc, "l1")  # across the link and the route
        await wait_interest(a, b, "b1")
        return [await asyncio.to_thread(_routez_subs, u) for u in reversed(monitoring)]
    finally:
        for nc in (a, b, lc):
            await nc.close()


def _routez_subs(monitoring_url: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The test's subjects in ``/routez?subs=1`` and ``?subs=detail`` (every route to the
    peer: nats-server pools several), the details without their ``cid``."""
    plain = get_json(f"{monitoring_url}/routez?subs=1") or {}
    detail = get_json(f"{monitoring_url}/routez?subs=detail") or {}
    subjects = sorted(
        s
        for r in plain.get("routes", [])
        for s in r.get("subscriptions_list") or []
        if s.startswith(_KEEP)
    )
    details = sorted(
        (
            {k: v for k, v in d.items() if k != "cid"}
            for r in detail.get("routes", [])
            for d in r.get("subscriptions_list_detail") or []
            if d["subject"].startswith(_KEEP)
        ),
        key=lambda d: d["subject"],
    )
    return subjects, details
