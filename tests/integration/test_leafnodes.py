"""Leaf nodes: a hub and a leaf server joined by a leafnode link, real processes, nats-py.

Topology: the hub listens for leafs (``leafnodes { listen, authorization { user, password,
account: A } }``) and runs JetStream in domain ``hub``; the leaf solicits it
(``remotes: [{url, account: L}]``) and runs JetStream in domain ``leaf``.  The same scenario
runs on four pairings -- trijet/trijet, nats-server/nats-server, and both mixed ones -- and
every pairing must observe what the reference pairing observes: pub/sub and request/reply
across the link both ways (headers kept), one delivery per message to a queue group with
members on both sides, interest withdrawn on unsubscribe, the hub's other account seeing
nothing, each side's ``$JS.API`` staying local while ``$JS.<domain>.API`` crosses, PubAcks
naming the stream's domain, and ``/leafz``/``/varz`` in the same shapes.

"Arrived" is an event (a message, a reply); "did not arrive" is shown by order: a marker
published after the traffic by the same connection arrives behind it on the same path.
Interest that must have crossed is waited for with a bounded retry of a request
(``wait_interest``); interest that must have gone, by polling ``/leafz`` (bounded).
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest

from tests.integration.leaf_support import (
    POLL_S,
    WAIT_S,
    held,
    poll,
    requires_reference,
    wait_interest,
)
from tests.support import ServerProcess, start_server
from tests.support.aio import noop_cb, run
from tests.support.cluster import get_json, reserve_ports, start_cluster

#: a source whose consumer vanished with the hub notices the silence and recreates it
SOURCE_RESUME_S = 30.0

HUB_CONF = """
server_name: hub1
jetstream {{ store_dir: "{{workdir}}/js", domain: hub }}
accounts {{
  A: {{ users: [{{user: a, password: a}}], jetstream: enabled }}
  B: {{ users: [{{user: b, password: b}}] }}
}}
leafnodes {{
  listen: "127.0.0.1:{port}"
  authorization {{ user: leafu, password: leafp, account: A }}
}}
"""

LEAF_CONF = """
server_name: leaf1
jetstream {{ store_dir: "{{workdir}}/js", domain: leaf }}
accounts {{
  L: {{ users: [{{user: l, password: l}}], jetstream: enabled }}
}}
leafnodes {{
  remotes: [ {{ url: "nats://leafu:leafp@127.0.0.1:{port}", account: L }} ]
  reconnect: "250ms"
}}
"""

LEAFZ_KEYS = {
    "id",
    "name",
    "is_spoke",
    "account",
    "ip",
    "port",
    "rtt",
    "in_msgs",
    "out_msgs",
    "in_bytes",
    "out_bytes",
    "subscriptions",
    "compression",
}


class Pair:
    """A hub and a leaf server; the hub can be killed and started again on its ports."""

    def __init__(self, hub_kind: str, leaf_kind: str, base: Path) -> None:
        self.hub_kind, self.leaf_kind, self.base = hub_kind, leaf_kind, base
        held = reserve_ports(1)
        self.leaf_port = held[0].getsockname()[1]
        held[0].close()
        self.hub = self._start_hub()
        self.leaf = start_server(
            leaf_kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=LEAF_CONF.format(port=self.leaf_port),
            workdir=base / "leaf",
        )

    def _start_hub(self, port: int = -1) -> ServerProcess:
        return start_server(
            self.hub_kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=HUB_CONF.format(port=self.leaf_port),
            workdir=self.base / "hub",
            port=port,
        )

    def restart_hub(self) -> None:
        """SIGKILL the hub and start it again on the same client and leafnode ports."""
        port = self.hub.port
        self.hub.send_signal(signal.SIGKILL)
        self.hub.wait(10)
        self.hub = self._start_hub(port)

    def stop(self) -> None:
        for sp in (self.leaf, self.hub):
            if sp.alive():
                sp.stop()

    def leafz(self, sp: ServerProcess) -> dict[str, Any]:
        doc = get_json(f"{sp.monitoring_url}/leafz?subs=1")
        return doc or {}

    def varz(self, sp: ServerProcess) -> dict[str, Any]:
        return get_json(f"{sp.monitoring_url}/varz") or {}


def _pairs() -> list[Any]:
    ref = [requires_reference]
    return [
        pytest.param(("trijet", "trijet"), id="trijet"),
        pytest.param(("reference", "reference"), id="reference", marks=ref),
        pytest.param(("trijet", "reference"), id="trijet-hub", marks=ref),
        pytest.param(("reference", "trijet"), id="trijet-leaf", marks=ref),
    ]


@pytest.fixture
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    hub_kind, leaf_kind = request.param
    p = Pair(hub_kind, leaf_kind, tmp_path)
    try:
        yield p
    finally:
        p.stop()


async def connect(url: str, user: str) -> nats.NATS:
    return await nats.connect(
        url,
        user=user,
        password=user,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        connect_timeout=5,
        error_cb=noop_cb,
    )


def _linked(p: Pair) -> bool:
    return all(p.leafz(sp).get("leafnodes") == 1 for sp in (p.hub, p.leaf))


async def _api(nc: nats.NATS, subject: str) -> dict[str, Any]:
    reply = await nc.request(subject, b"", timeout=5)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


def _scenario(p: Pair) -> list[Any]:
    async def main() -> list[Any]:
        out: list[Any] = []
        await poll(lambda: _linked(p), "the leafnode link")
        h = await connect(p.hub.url, "a")
        hb = await connect(p.hub.url, "b")
        lf = await connect(p.leaf.url, "l")
        try:
            # interest on both sides
            async def echo(msg: Any) -> None:
                await msg.respond(b"re:" + msg.data)

            l_plain = await lf.subscribe("l.plain.*")
            h_plain = await h.subscribe("h.plain")
            await h.subscribe("hub.svc", cb=echo)
            await lf.subscribe("leaf.svc", cb=echo)
            h_q = await h.subscribe("svc.q", queue="work")
            l_q = await lf.subscribe("svc.q", queue="work")
            h_mark = await h.subscribe("mark")
            l_mark = await lf.subscribe("mark")
            b_all = await hb.subscribe(">")
            await wait_interest(h, lf, "l")
            await wait_interest(lf, h, "h")

            # pub/sub both ways
            await h.publish("l.plain.x", b"to-leaf", headers={"K": "v"})
            m = await l_plain.next_msg(timeout=WAIT_S)
            out.append(("hub->leaf", m.subject, m.data, dict(m.headers or {})))
            await lf.publish("h.plain", b"to-hub")
            m = await h_plain.next_msg(timeout=WAIT_S)
            out.append(("leaf->hub", m.subject, m.data))

            # request/reply both ways
            r = await lf.request("hub.svc", b"q1", timeout=WAIT_S)
            out.append(("leaf req", r.data))
            r = await h.request("leaf.svc", b"q2", timeout=WAIT_S, headers={"H": "1"})
            out.append(("hub req", r.data, dict(r.headers or {})))

            # a queue group with a member on each side: each message once
            for i in range(10):
                await h.publish("svc.q", b"h%d" % i)
                await lf.publish("svc.q", b"l%d" % i)
            await h.publish("mark", b"")
            await lf.publish("mark", b"")
            for s in (h_mark, l_mark):
                await s.next_msg(timeout=WAIT_S)
                await s.next_msg(timeout=WAIT_S)
            got = await held(h_q) + await held(l_q)
            out.append(("queue", sorted(m.data for m in got)))

            # the hub's other account sees nothing of it
            await hb.publish("b.mark", b"")
            m = await b_all.next_msg(timeout=WAIT_S)
            out.append(("account B first sees", m.subject))

            # unsubscribe: the hub forgets the interest, a request finds no responder
            await l_plain.unsubscribe()
            await lf.flush()
            await poll(
                lambda: "l.plain.*" not in _hub_view(p),
                "l.plain.* gone from the hub's /leafz",
            )
            try:
                await h.request("l.plain.y", b"", timeout=2)
                out.append(("after unsub", "answered"))
            except nats.errors.NoRespondersError:
                out.append(("after unsub", "no responders"))

            # JetStream: each side's $JS.API stays local, $JS.<domain>.API crosses
            out.append(("leaf $JS.API", (await _api(lf, "$JS.API.INFO")).get("domain")))
            out.append(("leaf $JS.hub.API", (await _api(lf, "$JS.hub.API.INFO")).get("domain")))
            out.append(("hub $JS.API", (await _api(h, "$JS.API.INFO")).get("domain")))
            out.append(("hub $JS.leaf.API", (await _api(h, "$JS.leaf.API.INFO")).get("domain")))
            hjs = lf.jetstream(domain="hub")
            await hjs.add_stream(name="HS", subjects=["hs.>"])
            await wait_interest(lf, h, "hs")
            ack = await lf.jetstream().publish("hs.1", b"x")
            out.append(("pub ack from the hub stream", ack.stream, ack.seq, ack.domain))
            await lf.jetstream().add_stream(name="LS", subjects=["ls.>"])
            ack = await lf.jetstream().publish("ls.1", b"y")
            out.append(("pub ack from the leaf stream", ack.stream, ack.seq, ack.domain))
            # a hub consumer read by a leaf client (push and pull)
            push = await hjs.subscribe("hs.1", durable="pd")
            m = await push.next_msg(timeout=WAIT_S)
            await m.ack()
            out.append(("push across", m.subject, m.data, m.metadata.sequence.stream))
            pull = await hjs.pull_subscribe("hs.1", durable="pl")
            msgs = await pull.fetch(1, timeout=WAIT_S)
            await msgs[0].ack()
            out.append(("pull across", msgs[0].subject, msgs[0].data))
            # a leaf stream sourcing the hub stream
            cfg = {
                "name": "LSRC",
                "sources": [{"name": "HS", "external": {"api": "$JS.hub.API", "deliver": ""}}],
            }
            r = await lf.request("$JS.API.STREAM.CREATE.LSRC", json.dumps(cfg).encode())
            assert "error" not in json.loads(r.data), r.data
            await _until_last(lf, "LSRC", 1)
            got = json.loads((await lf.request("$JS.API.STREAM.MSG.GET.LSRC", b'{"seq":1}')).data)[
                "message"
            ]
            out.append(("source across", got["subject"], base64.b64decode(got["data"])))

            # monitoring shapes
            for side, sp in (("hub", p.hub), ("leaf", p.leaf)):
                lz = p.leafz(sp)
                entry = lz["leafs"][0]
                out.append(
                    (
                        f"{side} leafz",
                        lz["leafnodes"],
                        sorted(set(entry) - {"subscriptions_list"}),
                        entry["is_spoke"],
                        entry["account"],
                        entry["name"],
                    )
                )
                vz = p.varz(sp)
                out.append((f"{side} varz", vz["leafnodes"], sorted(vz["leaf"])))
        finally:
            for nc in (h, hb, lf):
                await nc.close()
        return out

    return run(main)


async def _until_mark(sub: Any, mark: str) -> list[str]:
    """Subjects ``sub`` (on ``>``) receives up to ``mark``, the interest probes
    (``ready.*`` requests and their replies) left out."""
    out: list[str] = []
    while not out or out[-1] != mark:
        subject = (await sub.next_msg(timeout=WAIT_S)).subject
        if not subject.startswith(("ready.", "_INBOX.")):
            out.append(subject)
    return out


def _hub_view(p: Pair) -> list[str]:
    lz = p.leafz(p.hub)
    leafs = lz.get("leafs") or [{}]
    subs: list[str] = leafs[0].get("subscriptions_list") or []
    return subs


EXPECTED_QUEUE = sorted([b"h%d" % i for i in range(10)] + [b"l%d" % i for i in range(10)])


@pytest.mark.parametrize("pair", _pairs(), indirect=True)
def test_leaf_link_core_and_jetstream_domains(pair: Pair) -> None:
    out = _scenario(pair)
    got = dict((o[0], o[1:]) for o in out)
    assert got["hub->leaf"] == ("l.plain.x", b"to-leaf", {"K": "v"})
    assert got["leaf->hub"] == ("h.plain", b"to-hub")
    assert got["leaf req"] == (b"re:q1",)
    assert got["hub req"] == (b"re:q2", {"H": "1"})
    assert got["queue"] == (EXPECTED_QUEUE,)
    assert got["account B first sees"] == ("b.mark",)
    assert got["after unsub"] == ("no responders",)
    assert got["leaf $JS.API"] == ("leaf",)
    assert got["leaf $JS.hub.API"] == ("hub",)
    assert got["hub $JS.API"] == ("hub",)
    assert got["hub $JS.leaf.API"] == ("leaf",)
    assert got["pub ack from the hub stream"] == ("HS", 1, "hub")
    assert got["pub ack from the leaf stream"] == ("LS", 1, "leaf")
    assert got["push across"] == ("hs.1", b"x", 1)
    assert got["pull across"] == ("hs.1", b"x")
    assert got["source across"] == ("hs.1", b"x")
    assert got["hub leafz"] == (1, sorted(LEAFZ_KEYS), False, "A", "leaf1")
    assert got["leaf leafz"] == (1, sorted(LEAFZ_KEYS), True, "L", "hub1")
    assert got["hub varz"] == (1, ["auth_timeout", "host", "port", "tls_timeout"])
    assert got["leaf varz"] == (1, ["remotes"])


@pytest.mark.parametrize(
    "pair",
    [
        pytest.param(("trijet", "trijet"), id="trijet"),
        pytest.param(("reference", "reference"), id="reference", marks=requires_reference),
    ],
    indirect=True,
)
def test_leaf_link_killed_and_back(pair: Pair) -> None:
    """The hub dies (SIGKILL) and returns on its ports: the leaf keeps serving its own
    clients meanwhile, dials again and its clients' interest reaches the new hub; a leaf
    stream sourcing a hub stream resumes where it stopped (trijet: the reference does
    too, but after ~20 s of its retry backoff, too long for CI)."""

    async def before() -> None:
        await poll(lambda: _linked(pair), "the leafnode link")
        h = await connect(pair.hub.url, "a")
        lf = await connect(pair.leaf.url, "l")
        try:
            hjs = h.jetstream()
            await hjs.add_stream(name="O", subjects=["o.>"])
            for i in (1, 2, 3):
                await hjs.publish("o.x", b"%d" % i)
            cfg = {
                "name": "S",
                "sources": [{"name": "O", "external": {"api": "$JS.hub.API", "deliver": ""}}],
            }
            r = await lf.request("$JS.API.STREAM.CREATE.S", json.dumps(cfg).encode(), timeout=5)
            assert "error" not in json.loads(r.data), r.data
            await _until_last(lf, "S", 3)
        finally:
            await h.close()
            await lf.close()

    run(before)
    pair.hub.send_signal(signal.SIGKILL)
    pair.hub.wait(10)

    async def while_down() -> None:
        lf = await connect(pair.leaf.url, "l")
        try:
            s = await lf.subscribe("local.only")
            await lf.publish("local.only", b"still here")
            assert (await s.next_msg(timeout=WAIT_S)).data == b"still here"
        finally:
            await lf.close()

    run(while_down)
    port = pair.hub.port
    pair.hub = pair._start_hub(port)

    async def after() -> None:
        await poll(lambda: _linked(pair), "the leafnode link back")
        h = await connect(pair.hub.url, "a")
        lf = await connect(pair.leaf.url, "l")
        try:
            s = await lf.subscribe("back.>")
            await wait_interest(h, lf, "back")
            await h.publish("back.1", b"again")
            assert (await s.next_msg(timeout=WAIT_S)).data == b"again"
            r = await lf.request("$JS.hub.API.INFO", b"", timeout=WAIT_S)
            assert json.loads(r.data).get("domain") == "hub"
            if pair.hub_kind == "reference":
                return  # nats-server resumes too, but only after ~20 s (its retry backoff)
            # the leaf's source resumes where it stopped: nothing lost, nothing twice
            for i in (4, 5):
                await h.jetstream().publish("o.x", b"%d" % i)
            await _until_last(lf, "S", 5, SOURCE_RESUME_S)
            datas = []
            for seq in range(1, 6):
                doc = json.loads(
                    (
                        await lf.request(
                            "$JS.API.STREAM.MSG.GET.S", json.dumps({"seq": seq}).encode()
                        )
                    ).data
                )
                datas.append(base64.b64decode(doc["message"]["data"]))
            assert datas == [b"1", b"2", b"3", b"4", b"5"]
        finally:
            await h.close()
            await lf.close()

    run(after, timeout=SOURCE_RESUME_S + 30)


async def _until_last(nc: nats.NATS, stream: str, n: int, wait_s: float = WAIT_S) -> None:
    """Until ``stream`` (local JetStream of ``nc``) has ``last_seq >= n``; bounded."""
    deadline = time.monotonic() + wait_s
    while True:
        info = await _api(nc, f"$JS.API.STREAM.INFO.{stream}")
        if info.get("state", {}).get("last_seq", 0) >= n:
            return
        assert time.monotonic() < deadline, f"{stream} stuck at {info.get('state')}"
        await asyncio.sleep(POLL_S * 5)


LOOP_CONF = """
server_name: {name}
leafnodes {{
  listen: "127.0.0.1:{own}"
  remotes: [ {{ url: "nats://127.0.0.1:{other}" }} ]
  reconnect: "250ms"
}}
"""


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_leaf_loop_detected(kind: str, tmp_path: Path) -> None:
    """Two servers that solicit each other form a loop: one of them hears its own
    ``$LDS.`` subject back and says so, as nats-server does."""
    held = reserve_ports(2)
    p1, p2 = (s.getsockname()[1] for s in held)
    for s in held:
        s.close()
    a = start_server(
        kind, config=LOOP_CONF.format(name="a", own=p1, other=p2), workdir=tmp_path / "a"
    )  # type: ignore[arg-type]
    try:
        b = start_server(
            kind, config=LOOP_CONF.format(name="b", own=p2, other=p1), workdir=tmp_path / "b"
        )  # type: ignore[arg-type]
        try:

            async def main() -> None:
                await poll(lambda: "Loop detected" in a.log_text() + b.log_text(), "a loop report")

            run(main)
        finally:
            b.stop()
    finally:
        a.stop()


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_leaf_on_a_three_node_hub(kind: str, tmp_path: Path) -> None:
    """A leaf linked to one node of a three-node hub reaches the whole cluster: a publish
    on another node, a responder on a third, an R3 stream created and written through
    ``$JS.hub.API``, and a leaf stream sourcing it."""
    c = start_cluster(
        kind,  # type: ignore[arg-type]
        3,
        domain="hub",
        workdir=tmp_path / "hub",
        extra_conf="leafnodes { host: 127.0.0.1, port: -1 }",
    )
    try:
        varz = get_json(f"{c.monitoring_urls[1]}/varz") or {}
        port = varz["leaf"]["port"]
        leaf = start_server(
            kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=(
                'server_name: leaf1\njetstream { store_dir: "{workdir}/js", domain: leaf }\n'
                f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{port}" }} ], '
                'reconnect: "250ms" }\n'
            ),
            workdir=tmp_path / "leaf",
        )
        try:
            run(lambda: _three_node_scenario(c, leaf))
        finally:
            leaf.stop()
    finally:
        c.stop()


async def _three_node_scenario(c: Any, leaf: ServerProcess) -> None:
    def linked() -> bool:
        doc = get_json(f"{leaf.monitoring_url}/leafz") or {}
        return doc.get("leafnodes") == 1

    await poll(linked, "the leafnode link")
    h1 = await nats.connect(c.urls[0], error_cb=noop_cb)
    h3 = await nats.connect(c.urls[2], error_cb=noop_cb)
    lf = await nats.connect(leaf.url, error_cb=noop_cb)
    try:
        s = await lf.subscribe("c.>")
        await wait_interest(h3, lf, "c3")
        await h3.publish("c.1", b"from n3")
        assert (await s.next_msg(timeout=WAIT_S)).data == b"from n3"

        async def echo(msg: Any) -> None:
            await msg.respond(b"n1:" + msg.data)

        await h1.subscribe("svc.hub", cb=echo)
        await wait_interest(lf, h1, "h1")
        assert (await lf.request("svc.hub", b"x", timeout=WAIT_S)).data == b"n1:x"

        hjs = lf.jetstream(domain="hub")
        await hjs.add_stream(name="R3", subjects=["r3.>"], num_replicas=3)
        deadline = time.monotonic() + WAIT_S
        while True:  # the capture's interest travels leader -> route -> leaf
            try:  # (a retry is deduplicated by its message id)
                ack = await lf.jetstream().publish(
                    "r3.a", b"1", timeout=2, headers={"Nats-Msg-Id": "r3-1"}
                )
                break
            except (
                nats.errors.NoRespondersError,
                nats.errors.TimeoutError,
                nats.js.errors.NoStreamResponseError,
            ):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(POLL_S)
        assert (ack.stream, ack.seq, ack.domain) == ("R3", 1, "hub")
        for i in (2, 3):
            ack = await lf.jetstream().publish("r3.a", b"%d" % i)
            assert (ack.seq, ack.domain) == (i, "hub")

        cfg = {
            "name": "SRC",
            "sources": [{"name": "R3", "external": {"api": "$JS.hub.API", "deliver": ""}}],
        }
        r = await lf.request("$JS.API.STREAM.CREATE.SRC", json.dumps(cfg).encode(), timeout=5)
        assert "error" not in json.loads(r.data), r.data

        async def src_last() -> int:
            info = await _api(lf, "$JS.API.STREAM.INFO.SRC")
            last: int = info.get("state", {}).get("last_seq", 0)
            return last

        deadline = time.monotonic() + WAIT_S
        while await src_last() < 3:
            assert time.monotonic() < deadline, "SRC did not copy R3"
            await asyncio.sleep(POLL_S * 5)
    finally:
        for nc in (h1, h3, lf):
            await nc.close()


USERS_HUB_CONF = """
server_name: hub1
accounts {{
  A: {{ users: [{{user: a, password: a}}] }}
  B: {{ users: [{{user: b, password: b}}] }}
}}
leafnodes {{
  listen: "127.0.0.1:{port}"
  authorization {{ users: [
    {{user: la, password: pa, account: A}}
    {{user: lb, password: pb, account: B}}
  ] }}
}}
"""

USERS_LEAF_CONF = """
server_name: leaf1
accounts {{
  LA: {{ users: [{{user: l, password: l}}] }}
  LB: {{ users: [{{user: m, password: m}}] }}
}}
leafnodes {{
  remotes: [
    {{ url: "nats://la:pa@127.0.0.1:{port}", account: LA }}
    {{ url: "nats://lb:pb@127.0.0.1:{port}", account: LB }}
    {{ url: "nats://lb:wrong@127.0.0.1:{port}" }}
  ]
  reconnect: "250ms"
}}
"""


@pytest.mark.parametrize(
    "kinds",
    [
        pytest.param(("trijet", "trijet"), id="trijet"),
        pytest.param(("reference", "reference"), id="reference", marks=requires_reference),
        pytest.param(("trijet", "reference"), id="trijet-hub", marks=requires_reference),
        pytest.param(("reference", "trijet"), id="trijet-leaf", marks=requires_reference),
    ],
)
def test_accounts_bound_per_remote(kinds: tuple[str, str], tmp_path: Path) -> None:
    """Two remotes of one leaf, each bound to its own local account and, by its hub
    user, to its own hub account: LA reaches A only, LB reaches B only; a remote with a
    wrong password never links."""
    hub_kind, leaf_kind = kinds
    held = reserve_ports(1)
    port = held[0].getsockname()[1]
    held[0].close()
    hub = start_server(
        hub_kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=USERS_HUB_CONF.format(port=port),
        workdir=tmp_path / "hub",
    )
    try:
        leaf = start_server(
            leaf_kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=USERS_LEAF_CONF.format(port=port),
            workdir=tmp_path / "leaf",
        )
        try:
            run(lambda: _per_remote_scenario(hub, leaf))
        finally:
            leaf.stop()
    finally:
        hub.stop()


async def _per_remote_scenario(hub: ServerProcess, leaf: ServerProcess) -> None:
    def accounts() -> list[str]:
        doc = get_json(f"{hub.monitoring_url}/leafz") or {}
        return sorted(x.get("account", "") for x in doc.get("leafs") or [])

    await poll(lambda: accounts() == ["A", "B"], "two links bound to A and B")
    ha, hb = await connect(hub.url, "a"), await connect(hub.url, "b")
    la, lb = await connect(leaf.url, "l"), await connect(leaf.url, "m")
    try:
        sa, sb = await ha.subscribe(">"), await hb.subscribe(">")
        await wait_interest(la, ha, "a")
        await wait_interest(lb, hb, "b")
        await la.publish("from.la", b"1")
        await lb.publish("from.lb", b"2")
        await la.publish("mark.a", b"")  # behind from.la on the LA link
        await lb.publish("mark.b", b"")
        assert await _until_mark(sa, "mark.a") == ["from.la", "mark.a"]
        assert await _until_mark(sb, "mark.b") == ["from.lb", "mark.b"]
        assert accounts() == ["A", "B"]  # the wrong password never linked
    finally:
        for nc in (ha, hb, la, lb):
            await nc.close()


@pytest.mark.parametrize(
    "kinds",
    [
        ("trijet", "trijet"),
        pytest.param(("reference", "reference"), marks=requires_reference),
        pytest.param(("reference", "trijet"), marks=requires_reference),
        pytest.param(("trijet", "reference"), marks=requires_reference),
    ],
    ids=lambda k: f"{k[0]}-hub-{k[1]}-leaf",
)
def test_leaf_link_over_tls(kinds: tuple[str, str], tls_certs: Any, tmp_path: Path) -> None:
    """``tls {}`` in ``leafnodes`` (a server certificate, the leaf's verified) and in the
    remote (the CA, a client certificate): the link comes up over TLS and carries messages
    both ways, whichever server is on either end."""
    hub_kind, leaf_kind = kinds
    c = tls_certs
    hub = start_server(
        hub_kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=(
            "server_name: hub1\nleafnodes {\n  host: 127.0.0.1, port: -1\n"
            f'  tls {{ cert_file: "{c.server_cert}", key_file: "{c.server_key}", '
            f'ca_file: "{c.ca_cert}", verify: true }}\n}}\n'
        ),
        workdir=tmp_path / "hub",
    )
    try:
        port = (get_json(f"{hub.monitoring_url}/varz") or {})["leaf"]["port"]
        leaf = start_server(
            leaf_kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=(
                "server_name: leaf1\nleafnodes {\n  reconnect: 250ms\n"
                f'  remotes: [ {{ url: "nats://127.0.0.1:{port}", tls: {{ '
                f'ca_file: "{c.ca_cert}", cert_file: "{c.client_cert}", '
                f'key_file: "{c.client_key}" }} }} ]\n}}\n'
            ),
            workdir=tmp_path / "leaf",
        )
        try:
            run(lambda: _tls_scenario(hub, leaf))
        finally:
            leaf.stop()
    finally:
        hub.stop()


async def _tls_scenario(hub: ServerProcess, leaf: ServerProcess) -> None:
    def linked() -> bool:
        return all(
            (get_json(f"{sp.monitoring_url}/leafz") or {}).get("leafnodes") == 1
            for sp in (hub, leaf)
        )

    await poll(linked, "the leafnode link over TLS")
    h = await nats.connect(hub.url, error_cb=noop_cb)
    lf = await nats.connect(leaf.url, error_cb=noop_cb)
    try:
        sh = await h.subscribe("up.>")
        sl = await lf.subscribe("down.>")
        await wait_interest(lf, h, "h")
        await wait_interest(h, lf, "l")
        await lf.publish("up.1", b"from leaf")
        await h.publish("down.1", b"from hub")
        assert (await sh.next_msg(timeout=WAIT_S)).data == b"from leaf"
        assert (await sl.next_msg(timeout=WAIT_S)).data == b"from hub"
    finally:
        await h.close()
        await lf.close()


@pytest.mark.parametrize("pair", _pairs(), indirect=True)
def test_object_bucket_mirrored_on_the_leaf(pair: Pair) -> None:
    """A hub object bucket (a ~1 MB object in chunks) mirrored on the leaf through
    ``$JS.hub.API``: the leaf's copy of the bucket stream reads back the same object (its
    meta by subject, its chunks through an ordered consumer, the digest checked)."""
    import hashlib
    import os

    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    async def main() -> None:
        await poll(lambda: _linked(pair), "the leaf link")
        h = await connect(pair.hub.url, "a")
        lf = await connect(pair.leaf.url, "l")
        try:
            hjs, ljs = h.jetstream(timeout=5), lf.jetstream(timeout=5)
            obs = await hjs.create_object_store("OB")
            data = os.urandom(1024 * 1024 + 123)
            await obs.put("blob", data)
            want = (await hjs.stream_info("OBJ_OB")).state.messages
            src = StreamSource(name="OBJ_OB", external=ExternalStream(api="$JS.hub.API"))
            await ljs.add_stream(StreamConfig(name="OBJ_OB", mirror=src))
            deadline = time.monotonic() + WAIT_S
            while (await ljs.stream_info("OBJ_OB")).state.messages < want:
                assert time.monotonic() < deadline, "the mirror did not catch up"
                await asyncio.sleep(POLL_S)
            info = await (await ljs.object_store("OB")).get_info("blob")
            assert info.size == len(data)
            # the chunks by the mirror's name (a mirror has no subjects to look it up by)
            sub = await ljs.subscribe(
                f"$O.OB.C.{info.nuid}", stream="OBJ_OB", ordered_consumer=True
            )
            got = b""
            while len(got) < len(data):
                got += (await sub.next_msg(timeout=WAIT_S)).data
            await sub.unsubscribe()
            assert got == data
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
            assert info.digest.upper().endswith(digest.upper())
        finally:
            await h.close()
            await lf.close()

    run(main)
