"""JetStream in two accounts across a three-node cluster, trijet and nats-server alike.

Accounts A (with limits) and B each create a stream ``ORDERS`` on the same cluster: A's
replicated on three servers, B's on one.  Each account publishes into, consumes from,
lists and asks about its own stream only; ``$JS.API.INFO`` counts the account's own
streams and shows its limits on any node; A's limits answer with the reference's codes
(the meta leader checks them, reservations counted once per replica); a restarted node
comes back with both accounts' streams; ``ACCOUNT.PURGE`` of B from the system account
removes B's streams cluster-wide and leaves A's.  The same conf files start both kinds
(``tests.support.cluster``), and every assertion holds for both.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.cluster import get_json, start_cluster

ACCOUNTS_CONF = """
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: {
    users: [{user: a, password: a}]
    jetstream: {max_streams: 2, max_consumers: 1, max_mem: 1M, max_file: 10M}
  }
  B: { users: [{user: b, password: b}], jetstream: enabled }
}
system_account: SYS
"""
REQUEST_TIMEOUT_S = 5.0
#: bound on waiting for a restarted node's streams to answer again
RECOVER_S = 15.0
RETRY_S = 0.1
MB = 1024 * 1024


async def _req(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    raw = b"" if body is None else json.dumps(body).encode()
    msg = await nc.request(subject, raw, timeout=REQUEST_TIMEOUT_S)
    doc: dict[str, Any] = json.loads(msg.data)
    return doc


def _err(doc: dict[str, Any]) -> tuple[int, int] | None:
    e = doc.get("error")
    return None if e is None else (e["code"], e["err_code"])


async def _create(nc: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    return await _req(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)


async def _create_placed(nc: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """STREAM.CREATE, again while a just-formed cluster's meta leader sees a peer
    offline (10005; both kinds, bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECOVER_S
    while True:
        got = await _create(nc, cfg)
        if _err(got) != (400, 10005) or loop.time() > deadline:
            return got
        await asyncio.sleep(RETRY_S)


async def _until_info(nc: Any, stream: str, messages: int) -> dict[str, Any]:
    """STREAM.INFO once the stream answers with ``messages`` (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECOVER_S
    last: Any = None
    while loop.time() < deadline:
        try:
            last = await _req(nc, f"$JS.API.STREAM.INFO.{stream}")
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as e:
            last = e
        else:
            if last.get("state", {}).get("messages") == messages:
                return last
        await asyncio.sleep(RETRY_S)
    raise AssertionError(f"{stream}: not back with {messages} messages: {last}")


async def _until_names(nc: Any, want: list[str]) -> dict[str, Any]:
    """STREAM.NAMES once it lists ``want`` (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECOVER_S
    last: dict[str, Any] = {}
    while loop.time() < deadline:
        last = await _req(nc, "$JS.API.STREAM.NAMES")
        if (last.get("streams") or []) == want:
            return last
        await asyncio.sleep(RETRY_S)
    raise AssertionError(f"names not {want}: {last}")


@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_two_accounts_same_stream_name(kind: str, tmp_path: Path) -> None:
    with start_cluster(kind, 3, workdir=tmp_path, extra_conf=ACCOUNTS_CONF) as c:  # type: ignore[arg-type]
        urls = c.urls

        async def scenario() -> str:
            a = await nats.connect(urls[0], user="a", password="a", error_cb=noop_cb)
            b = await nats.connect(urls[1], user="b", password="b", error_cb=noop_cb)
            a2 = await nats.connect(urls[2], user="a", password="a", error_cb=noop_cb)
            try:
                orders = {"name": "ORDERS", "subjects": ["orders.>"]}
                ca = await _create_placed(a, {**orders, "num_replicas": 3})
                cb = await _create(b, {**orders, "num_replicas": 1})
                assert _err(ca) is None and _err(cb) is None, (ca, cb)
                # publish: each account's ORDERS captures its own account's messages
                ja, jb = a.jetstream(timeout=REQUEST_TIMEOUT_S), b.jetstream(timeout=5)
                assert [(await ja.publish("orders.1", b"a")).seq for _ in range(2)] == [1, 2]
                assert (await jb.publish("orders.1", b"b")).seq == 1
                ia = await _req(a2, "$JS.API.STREAM.INFO.ORDERS")
                ib = await _req(b, "$JS.API.STREAM.INFO.ORDERS")
                assert ia["state"]["messages"] == 2 and ib["state"]["messages"] == 1
                assert ia["config"]["num_replicas"] == 3 and ib["config"]["num_replicas"] == 1
                group_a = ia["cluster"]["raft_group"]
                assert group_a.startswith("S-R3F-") and len(ia["cluster"]["replicas"]) == 2
                assert "replicas" not in ib["cluster"]  # R1: no peers to show
                # list and names: one ORDERS each, its own
                for nc, replicas in ((a, 3), (b, 1)):
                    names = await _req(nc, "$JS.API.STREAM.NAMES")
                    assert names["streams"] == ["ORDERS"], names
                    listed = await _req(nc, "$JS.API.STREAM.LIST")
                    assert [s["config"]["num_replicas"] for s in listed["streams"]] == [replicas]
                # consume: B's consumer sees B's one message only
                psub = await jb.pull_subscribe("orders.>", durable="D", stream="ORDERS")
                got = await psub.fetch(1, timeout=REQUEST_TIMEOUT_S)
                assert [m.data for m in got] == [b"b"]
                await got[0].ack()
                ci = await _req(b, "$JS.API.CONSUMER.INFO.ORDERS.D")
                assert ci["num_pending"] == 0 and ci["delivered"]["stream_seq"] == 1
                # B cannot reach A's consumer or a stream only A has
                c1 = await _req(
                    a,
                    "$JS.API.CONSUMER.CREATE.ORDERS.C1",
                    {
                        "stream_name": "ORDERS",
                        "config": {"durable_name": "C1", "ack_policy": "explicit"},
                    },
                )
                assert _err(c1) is None, c1
                assert _err(await _req(b, "$JS.API.CONSUMER.INFO.ORDERS.C1")) == (404, 10014)
                # A's limits, decided by the meta leader: 1M memory, 10M file, 2 streams,
                # 1 consumer per stream; an R3 reservation counts three times
                mem = {"name": "M", "subjects": ["m"], "storage": "memory", "max_bytes": 2 * MB}
                assert _err(await _create(a2, mem)) == (500, 10028)
                r3 = {"name": "F", "subjects": ["f"], "num_replicas": 3, "max_bytes": 4 * MB}
                assert _err(await _create(a2, r3)) == (500, 10047)
                r1 = {"name": "F", "subjects": ["f"], "num_replicas": 1, "max_bytes": 4 * MB}
                assert _err(await _create(a2, r1)) is None
                assert _err(await _create(a, {"name": "G", "subjects": ["g"]})) == (400, 10027)
                assert _err(await _create(b, {"name": "G", "subjects": ["g"]})) is None
                c2 = await _req(
                    a,
                    "$JS.API.CONSUMER.CREATE.ORDERS.C2",
                    {
                        "stream_name": "ORDERS",
                        "config": {"durable_name": "C2", "ack_policy": "explicit"},
                    },
                )
                assert _err(c2) == (400, 10026)
                assert _err(await _req(b, "$JS.API.STREAM.DELETE.F")) == (404, 10059)
                # account info: each account's own streams and limits, on any node
                for nc, streams, limits in ((a2, 2, (1000000, 10000000, 2, 1)), (b, 2, None)):
                    info = await _req(nc, "$JS.API.INFO")
                    assert info["streams"] == streams, info
                    lim = info["limits"]
                    got_limits = tuple(
                        lim[k]
                        for k in ("max_memory", "max_storage", "max_streams", "max_consumers")
                    )
                    assert got_limits == (limits or (-1, -1, -1, -1)), info
                info_a = await _req(a2, "$JS.API.INFO")
                assert info_a["reserved_storage"] == 4 * MB and info_a["consumers"] == 1
                return f"{ib['cluster']['leader']} {group_a}"
            finally:
                for nc in (a, b, a2):
                    await nc.close()

        b_host, group_a = run(scenario, timeout=60).split()
        # /raftz per account: A's R3 group under A, and not under B
        raftz_a = get_json(c.monitoring_urls[0] + "/raftz?acc=A") or {}
        assert group_a in raftz_a.get("A", {}), raftz_a
        assert group_a not in (get_json(c.monitoring_urls[0] + "/raftz?acc=B") or {}).get("B", {})
        # a restart of B's R1 host (a member of A's R3 group too) keeps both streams
        c.restart(c.index(b_host))

        async def after_restart() -> None:
            i = c.index(b_host)
            a = await nats.connect(urls[i], user="a", password="a", error_cb=noop_cb)
            b = await nats.connect(urls[i], user="b", password="b", error_cb=noop_cb)
            try:
                ia = await _until_info(a, "ORDERS", 2)
                ib = await _until_info(b, "ORDERS", 1)
                assert ia["config"]["num_replicas"] == 3 and ib["config"]["num_replicas"] == 1
                jb = b.jetstream(timeout=REQUEST_TIMEOUT_S)
                assert (await jb.publish("orders.2", b"b2")).seq == 2
                assert (await _req(a, "$JS.API.STREAM.NAMES"))["streams"] == ["F", "ORDERS"]
                assert (await _req(b, "$JS.API.STREAM.NAMES"))["streams"] == ["G", "ORDERS"]
                # ACCOUNT.PURGE of B from the system account: B's streams go, A's stay
                sys = await nats.connect(urls[i], user="sys", password="sys", error_cb=noop_cb)
                try:
                    purged = await _req(sys, "$JS.API.ACCOUNT.PURGE.B")
                finally:
                    await sys.close()
                assert purged.get("initiated") is True and "error" not in purged, purged
                names = await _until_names(b, [])
                assert names["total"] == 0
                assert (await _req(a, "$JS.API.STREAM.NAMES"))["streams"] == ["F", "ORDERS"]
                assert (await _until_info(a, "ORDERS", 2))["config"]["num_replicas"] == 3
            finally:
                await a.close()
                await b.close()

        run(after_restart, timeout=40)
