"""Leaf nodes, compatibility and the wire: a hub cluster of trijet and nats-server nodes
(a rolling upgrade, a mixed cluster) with a leaf cluster attached delivers each message once
both ways; a route peer that does not announce ``lnoc`` never hears a line with a leaf
origin (``LS+ <origin>``, ``LMSG <origin>``): it gets the plain ``RS+``/``RMSG`` forms, as
nats-server sends them; a standalone server's leaf INFO/CONNECT ``cluster`` field and a
queue group's ``LS+`` weights match nats-server's, read by raw sockets.  Real processes,
nats-py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from tests.integration.leaf_support import WAIT_S, poll, requests_both_ways, requires_reference
from tests.integration.test_leafnodes_clusters import _leaf_cluster_scenario
from tests.support import ServerProcess, start_server
from tests.support.aio import noop_cb, run
from tests.support.cluster import get_json, reserve_ports


def _routes_to(sp: ServerProcess, names: set[str]) -> bool:
    doc = get_json(f"{sp.monitoring_url}/routez") or {}
    return names <= {r.get("remote_name") for r in doc.get("routes") or []}


def _start_mesh(
    kinds: list[str],
    base: Path,
    prefix: str,
    cluster: str,
    per_node: list[str],
    in_cluster: list[str] | None = None,
) -> list[ServerProcess]:
    """A full mesh of len(kinds) servers (``per_node[i]`` added to node i's conf,
    ``in_cluster[i]`` to its cluster block); waits for every route."""
    held = reserve_ports(len(kinds))
    rports = [h.getsockname()[1] for h in held]
    for h in held:
        h.close()
    routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in rports)
    procs: list[ServerProcess] = []
    try:
        for i, kind in enumerate(kinds):
            conf = (
                f"server_name: {prefix}{i + 1}\n"
                f"cluster {{ name: {cluster}, listen: 127.0.0.1:{rports[i]}, "
                f"routes: [ {routes} ]\n{in_cluster[i] if in_cluster else ''} }}\n"
                f"{per_node[i]}\n"
            )
            procs.append(
                start_server(
                    kind,  # type: ignore[arg-type]
                    ["-m", "-1"],
                    config=conf,
                    workdir=base / f"{prefix}{i + 1}",
                )
            )
        names = {f"{prefix}{i + 1}" for i in range(len(kinds))}
        deadline = time.monotonic() + WAIT_S
        while not all(_routes_to(sp, names - {f"{prefix}{i + 1}"}) for i, sp in enumerate(procs)):
            assert time.monotonic() < deadline, f"{prefix} routes not formed"
            time.sleep(0.05)  # poll interval of a bounded condition
    except BaseException:
        for sp in procs:
            sp.stop()
        raise
    return procs


@requires_reference
def test_mixed_hub_cluster_with_a_leaf_cluster_delivers_once(tmp_path: Path) -> None:
    """Hub: two trijet nodes and one nats-server node, routed together; a two-node trijet
    leaf cluster links to the first trijet node and to the nats-server node.  A message
    published on any of the five servers reaches each subscriber once (plain and queue),
    requests cross both ways, and nothing a peer does not understand crosses a route (the
    nats-server node would close it)."""
    held = reserve_ports(3)
    lports = [h.getsockname()[1] for h in held]
    for h in held:
        h.close()
    hub = _start_mesh(
        ["trijet", "trijet", "reference"],
        tmp_path,
        "h",
        "hubc",
        [f"leafnodes {{ listen: 127.0.0.1:{p} }}" for p in lports],
    )
    try:
        edge = _start_mesh(
            ["trijet", "trijet"],
            tmp_path,
            "e",
            "edgec",
            [
                f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{p}" }} ], reconnect: "250ms" }}'
                for p in (lports[0], lports[2])
            ],
        )
        try:
            urls = [sp.url for sp in [*hub, *edge]]
            marks = [len(sp.log_text()) for sp in hub]
            run(lambda: _leaf_cluster_scenario(urls, [(hub[0], 1), (hub[2], 1)]))
            rids = _route_rids(hub[0])
            run(lambda: _withdrawn_across(hub[0].url, edge[1].url))
            assert _route_rids(hub[0]) == rids  # no route closed on a line it refused
            for sp, mark in zip(hub, marks, strict=True):
                assert "Parse Error" not in sp.log_text()[mark:], sp.log_text()[-3000:]
        finally:
            for sp in edge:
                sp.stop()
    finally:
        for sp in hub:
            sp.stop()


def _route_rids(sp: ServerProcess) -> dict[str, set[Any]]:
    doc = get_json(f"{sp.monitoring_url}/routez") or {}
    out: dict[str, set[Any]] = {}
    for r in doc.get("routes") or []:
        out.setdefault(r.get("remote_name"), set()).add(r.get("rid"))
    return out


async def _withdrawn_across(hub_url: str, edge_url: str) -> None:
    """A responder on the edge node linked to the nats-server hub node answers a requester
    on a trijet hub node; once it unsubscribes (``LS- <origin>`` between the hub nodes),
    the requester hears no responders."""
    hub_nc = await nats.connect(hub_url, error_cb=noop_cb)
    edge_nc = await nats.connect(edge_url, error_cb=noop_cb)
    try:

        async def respond(msg: Any) -> None:
            await msg.respond(b"here")

        sub = await edge_nc.subscribe("late.x", cb=respond)
        await edge_nc.flush()
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                assert (await hub_nc.request("late.x", b"", timeout=0.5)).data == b"here"
                break
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                assert time.monotonic() < deadline, "the responder's interest never crossed"
        await sub.unsubscribe()
        await edge_nc.flush()
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                await hub_nc.request("late.x", b"", timeout=0.5)
            except nats.errors.NoRespondersError:
                break
            except nats.errors.TimeoutError:
                pass
            assert time.monotonic() < deadline, "the responder's interest never went"
            await asyncio.sleep(0.05)  # poll interval of a bounded condition
    finally:
        await hub_nc.close()
        await edge_nc.close()


@pytest.mark.parametrize("announces", ["nothing", "lnoc"])
def test_route_peer_hears_the_forms_it_announced(announces: str, tmp_path: Path) -> None:
    """A raw route peer to a trijet hub node with a standalone leaf (its origin is its
    server name).  Announcing neither ``lnoc`` nor ``lnocu``, it hears the leaf's interest
    as ``RS+`` (a queue group's with its weight), its withdrawal as ``RS-`` and the leaf's
    message as ``RMSG`` -- never ``LS+``/``LS-``/``LMSG``; announcing ``lnoc`` alone (a
    server before ``lnocu``), ``LS+ <origin>`` and ``LMSG <origin>`` but ``LS-`` without the
    origin, and its own ``LS-`` without origin withdraws its leaf cluster's interest.  The
    node's route INFO announces both fields."""
    held = reserve_ports(2)
    rport, lport = (h.getsockname()[1] for h in held)
    for h in held:
        h.close()
    hub = start_server(
        "trijet",
        ["-m", "-1"],
        config=(
            f"server_name: hub1\ncluster {{ name: hubc, listen: 127.0.0.1:{rport} }}\n"
            f"leafnodes {{ listen: 127.0.0.1:{lport} }}\n"
        ),
        workdir=tmp_path / "hub",
    )
    try:
        leaf = start_server(
            "trijet",
            ["-m", "-1"],
            config=(
                "server_name: edge1\n"
                f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{lport}" }} ], '
                'reconnect: "250ms" }\n'
            ),
            workdir=tmp_path / "leaf",
        )
        try:
            run(lambda: _plain_peer_scenario(hub, leaf, rport, announces == "lnoc"))
        finally:
            leaf.stop()
    finally:
        hub.stop()


class _Lines:
    """The lines (and payloads) a raw route peer reads."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.seen: list[bytes] = []

    async def until(self, pred: Any, what: str) -> bytes:
        deadline = time.monotonic() + WAIT_S
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {what}; seen {self.seen!r}"
            try:
                line = await asyncio.wait_for(self.reader.readline(), left)
            except TimeoutError:
                raise AssertionError(f"timed out waiting for {what}; seen {self.seen!r}") from None
            assert line, f"route closed waiting for {what}; seen {self.seen!r}"
            self.seen.append(line)
            if pred(line):
                return line


async def _plain_peer_scenario(
    hub: ServerProcess, leaf: ServerProcess, rport: int, lnoc: bool
) -> None:
    await poll(
        lambda: (get_json(f"{hub.monitoring_url}/leafz") or {}).get("leafnodes") == 1, "link"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", rport)
    lines = _Lines(reader)
    info = json.loads((await lines.until(lambda ln: ln.startswith(b"INFO "), "INFO"))[5:])
    assert info.get("lnoc") is True and info.get("lnocu") is True
    connect = {"echo": True, "verbose": False, "pedantic": False, "tls_required": False}
    connect |= {"headers": True, "name": "NOLDPEER", "cluster": "hubc"}
    peer_info = {"server_id": "NOLDPEER", "server_name": "old1", "cluster": "hubc"}
    peer_info |= {"headers": True, "proto": 1, "max_payload": 1048576}
    if lnoc:
        connect["lnoc"] = peer_info["lnoc"] = True
    writer.write(
        b"CONNECT %s\r\nINFO %s\r\n"
        % (json.dumps(connect).encode(), json.dumps(peer_info).encode())
    )
    writer.write(b"RS+ $G to.peer\r\nRS+ $G marker\r\n")
    if lnoc:
        writer.write(b"LS+ oldleaf $G from.old\r\n")
    writer.write(b"PING\r\n")
    await writer.drain()
    await lines.until(lambda ln: ln == b"PONG\r\n", "the first PONG")
    plus = b"LS+ edge1 $G " if lnoc else b"RS+ $G "
    minus = b"LS- $G " if lnoc else b"RS- $G "  # no lnocu: no origin in LS-
    nc = await nats.connect(leaf.url, error_cb=noop_cb)
    hub_nc = await nats.connect(hub.url, error_cb=noop_cb)
    try:
        sub = await nc.subscribe("from.peer")
        qsub1 = await nc.subscribe("q.peer", "grp")
        qsub2 = await nc.subscribe("q.peer", "grp")
        await nc.flush()
        await lines.until(lambda ln: ln == plus + b"from.peer\r\n", "+ from.peer")
        await lines.until(lambda ln: ln == plus + b"q.peer grp 2\r\n", "+ q.peer grp 2")

        # the leaf's message to the peer's interest: an RMSG (LMSG <origin> with lnoc)
        def peer_interest_at_leaf() -> bool:
            doc = get_json(f"{leaf.monitoring_url}/leafz?subs=1") or {}
            return any("to.peer" in (lz.get("subscriptions_list") or []) for lz in doc["leafs"])

        await poll(peer_interest_at_leaf, "the peer's interest at the leaf")
        await nc.publish("to.peer", b"hello")
        await nc.flush()
        msg = b"LMSG edge1 $G to.peer 0 5\r\n" if lnoc else b"RMSG $G to.peer 5\r\n"
        await lines.until(lambda ln: ln == msg, "the leaf's message")
        await qsub2.unsubscribe()
        await lines.until(lambda ln: ln == plus + b"q.peer grp 1\r\n", "+ q.peer grp 1")
        await sub.unsubscribe()
        await qsub1.unsubscribe()
        await nc.flush()
        await lines.until(lambda ln: ln == minus + b"q.peer grp\r\n", "- q.peer grp")
        assert minus + b"from.peer\r\n" in lines.seen
        if lnoc:
            bad = [ln for ln in lines.seen if ln.startswith((b"RS+ $G from", b"LS- edge1"))]
            # the peer's own LS- without origin withdraws its leaf cluster's interest
            await hub_nc.publish("from.old", b"1")
            await hub_nc.flush()
            await lines.until(lambda ln: ln == b"RMSG $G from.old 1\r\n", "from.old")
            writer.write(b"LS- $G from.old\r\nPING\r\n")
            await writer.drain()
            await lines.until(lambda ln: ln == b"PONG\r\n", "PONG")
            mark = len(lines.seen)
            await hub_nc.publish("from.old", b"2")
            await hub_nc.publish("marker", b"m")
            await hub_nc.flush()
            await lines.until(lambda ln: ln == b"RMSG $G marker 1\r\n", "marker")
            assert not any(b"from.old" in ln for ln in lines.seen[mark:]), lines.seen[mark:]
        else:
            bad = [ln for ln in lines.seen if ln.startswith((b"LS+", b"LS-", b"LMSG"))]
        assert bad == []
    finally:
        await nc.close()
        await hub_nc.close()
        writer.close()


HUB_INFO = {
    "server_id": "NRAWHUB",
    "server_name": "rawhub",
    "version": "2.15.1",
    "proto": 3,
    "headers": True,
    "auth_required": True,
    "max_payload": 1048576,
    "client_id": 7,
    "info_on_connect": True,
}


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_standalone_leaf_on_the_wire(kind: str, tmp_path: Path) -> None:
    """A standalone server (no ``cluster`` block) as read by raw sockets: as a hub its leaf
    INFO has no ``cluster``; as a leaf its CONNECT names its server name as ``cluster``
    (nats-server 2.15.1 does both), and a queue group's ``LS+`` carries the number of its
    members, sent again at each change, then ``LS-``."""
    held = reserve_ports(1)
    lport = held[0].getsockname()[1]
    hub_listener = socket.create_server(("127.0.0.1", 0))
    raw_port = hub_listener.getsockname()[1]
    for h in held:
        h.close()
    hub = start_server(
        kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=f"server_name: solo\nleafnodes {{ listen: 127.0.0.1:{lport} }}\n",
        workdir=tmp_path / "hub",
    )
    try:
        with socket.create_connection(("127.0.0.1", lport), timeout=WAIT_S) as s:
            line = s.makefile("rb").readline()
        info = json.loads(line[5:])
        assert info["server_name"] == "solo" and "cluster" not in info
    finally:
        hub.stop()
    leaf = start_server(
        kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=(
            "server_name: edge1\n"
            f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{raw_port}" }} ] }}\n'
        ),
        workdir=tmp_path / "leaf",
    )
    try:
        hub_listener.settimeout(WAIT_S)
        conn, _ = hub_listener.accept()
        with conn:
            run(lambda: _raw_hub_scenario(conn, raw_port, leaf))
    finally:
        leaf.stop()
        hub_listener.close()


async def _raw_hub_scenario(conn: socket.socket, raw_port: int, leaf: ServerProcess) -> None:
    conn.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=conn)
    info = HUB_INFO | {"nonce": "abc", "leafnode_urls": [f"127.0.0.1:{raw_port}"]}
    writer.write(b"INFO %s\r\n" % json.dumps(info).encode())
    await writer.drain()
    lines = _Lines(reader)
    connect = json.loads((await lines.until(lambda ln: ln.startswith(b"CONNECT "), "CONNECT"))[8:])
    assert connect["name"] == "edge1" and connect["cluster"] == "edge1"
    info2 = HUB_INFO | {"connect_info": True, "remote_account": "$G"}
    info2 |= {"leafnode_urls": [f"127.0.0.1:{raw_port}"]}
    writer.write(b"INFO %s\r\nPING\r\n" % json.dumps(info2).encode())
    await writer.drain()

    nc = await nats.connect(leaf.url, error_cb=noop_cb)
    try:
        subs = [await nc.subscribe("q.w", "grp") for _ in range(3)]
        await nc.flush()
        for n in (1, 2, 3):
            await lines.until(lambda ln, n=n: ln == b"LS+ q.w grp %d\r\n" % n, f"grp {n}")
        await subs[0].unsubscribe()
        await nc.flush()
        await lines.until(lambda ln: ln == b"LS+ q.w grp 2\r\n", "grp 2 again")
        await subs[1].unsubscribe()
        await subs[2].unsubscribe()
        await nc.flush()
        await lines.until(lambda ln: ln == b"LS- q.w grp\r\n", "LS-")
        seen = [ln for ln in lines.seen if b"q.w" in ln]
        assert seen == [
            b"LS+ q.w grp 1\r\n",
            b"LS+ q.w grp 2\r\n",
            b"LS+ q.w grp 3\r\n",
            b"LS+ q.w grp 2\r\n",
            b"LS+ q.w grp 1\r\n",
            b"LS- q.w grp\r\n",
        ]
    finally:
        await nc.close()
        writer.close()


@requires_reference
@pytest.mark.parametrize("hub_kind,leaf_kind", [("reference", "trijet"), ("trijet", "reference")])
def test_default_compression_negotiates_off(hub_kind: str, leaf_kind: str, tmp_path: Path) -> None:
    """nats-server compresses leaf links by default (``s2_auto`` on both ends); with a
    trijet peer (no s2 codec) the link negotiates to uncompressed -- both ``/leafz`` say
    ``off`` -- and carries requests both ways."""
    held = reserve_ports(1)
    lport = held[0].getsockname()[1]
    held[0].close()
    hub = start_server(
        hub_kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=f"server_name: hub1\nleafnodes {{ listen: 127.0.0.1:{lport} }}\n",
        workdir=tmp_path / "hub",
    )
    try:
        leaf = start_server(
            leaf_kind,  # type: ignore[arg-type]
            ["-m", "-1"],
            config=(
                "server_name: leaf1\n"
                f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{lport}" }} ], '
                'reconnect: "250ms" }\n'
            ),
            workdir=tmp_path / "leaf",
        )
        try:
            run(lambda: _uncompressed_link(hub, leaf))
        finally:
            leaf.stop()
    finally:
        hub.stop()


async def _uncompressed_link(hub: ServerProcess, leaf: ServerProcess) -> None:
    def linked() -> bool:
        return all(
            (get_json(f"{sp.monitoring_url}/leafz") or {}).get("leafnodes") == 1
            for sp in (hub, leaf)
        )

    await poll(linked, "the link")
    for sp in (hub, leaf):
        leafs = (get_json(f"{sp.monitoring_url}/leafz") or {})["leafs"]
        assert [lz.get("compression") for lz in leafs] == ["off"], (sp.kind, leafs)
    await requests_both_ways(hub.url, leaf.url, "link")


@requires_reference
@pytest.mark.parametrize("mode", ["default", "s2_fast"])
def test_route_compression_negotiates_off(mode: str, tmp_path: Path) -> None:
    """A nats-server route peer with its default route compression (``accept``) or an s2
    mode, and trijet with ``compression: accept``: the routes form uncompressed (both
    ``/routez`` say ``off``: trijet's INFO announces off) and carry requests both ways."""
    ref_mode = "" if mode == "default" else f"compression: {mode}"
    trijet, ref = _start_mesh(
        ["trijet", "reference"], tmp_path, "c", "cmp", ["", ""], ["compression: accept", ref_mode]
    )
    try:

        def modes() -> list[set[Any]]:
            return [
                {
                    r.get("compression")
                    for r in (get_json(f"{sp.monitoring_url}/routez") or {}).get("routes") or []
                }
                for sp in (ref, trijet)
            ]

        # polled: at start both sides dial, and the duplicate route is replaced (a moment
        # with no route)
        deadline = time.monotonic() + WAIT_S
        while (got := modes()) != [{"off"}, {"off"}]:
            assert time.monotonic() < deadline, got
            time.sleep(0.05)  # poll interval of a bounded condition
        run(lambda: requests_both_ways(trijet.url, ref.url, "route"))
    finally:
        for sp in (trijet, ref):
            sp.stop()


@pytest.mark.parametrize("kind", ["trijet", pytest.param("reference", marks=requires_reference)])
def test_peer_without_lnocu_has_one_entry_per_subject(kind: str, tmp_path: Path) -> None:
    """A raw route peer announcing ``lnoc`` but not ``lnocu`` (its ``LS-`` names no leaf
    cluster): its ``LS+`` of one subject from two leaf clusters, and its own ``RS+`` of
    another, make one entry each (``/routez?subs=detail``, sid ``<account> <subject>
    [<queue>]``), and one ``LS-`` withdraws each whole (the weights: a unit test)."""
    held = reserve_ports(1)
    rport = held[0].getsockname()[1]
    held[0].close()
    server = start_server(
        kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=f"server_name: hub1\ncluster {{ name: hubc, listen: 127.0.0.1:{rport} }}\n",
        workdir=tmp_path / "hub",
    )
    try:
        got = run(lambda: _old_peer_entries(server, rport))
    finally:
        server.stop()
    assert got == (
        [("bar", None, "$G bar"), ("foo", None, "$G foo"), ("q.x", "grp", "$G q.x grp")],
        [],
    )


async def _old_peer_entries(server: ServerProcess, rport: int) -> tuple[list[Any], list[Any]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", rport)
    lines = _Lines(reader)
    await lines.until(lambda ln: ln.startswith(b"INFO "), "INFO")
    connect = {"echo": True, "verbose": False, "pedantic": False, "tls_required": False}
    connect |= {"headers": True, "name": "NOLDPEER", "cluster": "hubc", "lnoc": True}
    peer_info = {"server_id": "NOLDPEER", "server_name": "old1", "cluster": "hubc"}
    peer_info |= {"headers": True, "proto": 1, "max_payload": 1048576, "lnoc": True}

    def entries() -> list[Any]:
        doc = get_json(f"{server.monitoring_url}/routez?subs=detail") or {}
        return sorted(
            (d["subject"], d.get("qgroup"), d["sid"])
            for r in doc.get("routes") or []
            if r.get("remote_id") == "NOLDPEER"
            for d in r.get("subscriptions_list_detail") or []
        )

    async def pong() -> None:
        writer.write(b"PING\r\n")
        await writer.drain()
        await lines.until(lambda ln: ln == b"PONG\r\n", "PONG")

    try:
        writer.write(
            b"CONNECT %s\r\nINFO %s\r\n"
            % (json.dumps(connect).encode(), json.dumps(peer_info).encode())
        )
        writer.write(
            b"LS+ c1 $G foo\r\nLS+ c2 $G foo\r\nLS+ c1 $G q.x grp 2\r\nLS+ c2 $G q.x grp 3\r\n"
            b"RS+ $G bar\r\nLS+ c1 $G bar\r\n"
        )
        await pong()  # what came before the PING is in place
        plus = entries()
        writer.write(b"LS- $G foo\r\nLS- $G q.x grp\r\nLS- $G bar\r\n")
        await pong()
        return plus, entries()
    finally:
        writer.close()
