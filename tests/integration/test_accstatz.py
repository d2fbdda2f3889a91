"""``/accstatz`` and the account STATZ requests: trijet and nats-server side by side.

Clients of A and B publish and receive; a second client of A publishes and leaves (what it
counted stays with A).  ``/accstatz`` lists the accounts with connections (``unused=1``:
every account), each as nats-server's ``AccountStat`` in its key order, with the same
message and byte counts on both servers; ``$SYS.REQ.ACCOUNT.<acc>.STATZ`` and
``$SYS.REQ.ACCOUNT.PING.STATZ`` answer the same document in the ``{server, data}`` envelope.
The system account's own figures are left out (its internal subscriptions differ).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.integration.test_accounts import (  # noqa: F401 (acc_cluster: a fixture)
    ACCOUNTS_CONF,
    WAIT_S,
    acc_cluster,
    connect,
    synced,
)
from tests.integration.test_cluster_core import Cluster, wait_interest
from tests.support import ServerProcess
from tests.support.aio import run
from tests.support.cluster import get_json

#: subscriptions the server holds in every account (nats-server's system imports)
INTERNAL_SUBS = 4
STAT_KEYS = [
    "acc",
    "name",
    "conns",
    "leafnodes",
    "total_conns",
    "num_subscriptions",
    "sent",
    "received",
    "slow_consumers",
]


def traffic(msgs: int, nbytes: int) -> dict[str, Any]:
    zero = {"msgs": 0, "bytes": 0}
    return {"msgs": msgs, "bytes": nbytes, "gateways": zero, "routes": zero, "leafs": zero}


def stat(name: str, conns: int, subs: int, sent: Any, received: Any) -> dict[str, Any]:
    return {
        "acc": name,
        "name": name,
        "conns": conns,
        "leafnodes": 0,
        "total_conns": conns,
        "num_subscriptions": subs,
        "sent": traffic(*sent),
        "received": traffic(*received),
        "slow_consumers": 0,
    }


def by_name(doc: dict[str, Any]) -> dict[str, Any]:
    return {s["acc"]: s for s in doc["account_statz"]}


def test_accstatz(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, args=["-m", "-1"], config=ACCOUNTS_CONF)
    base = sp.monitoring_url
    assert base is not None

    async def main() -> dict[str, Any]:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        sys_ = await connect(sp.url, "sys")
        try:
            foo1 = await a.subscribe("foo")
            foo2 = await a.subscribe("foo")
            bar = await b.subscribe("bar")
            await synced(a, b)
            for _ in range(5):
                await a.publish("foo", b"hello")
            await b.publish("bar", b"x" * 100)
            await b.publish("nobody", b"x" * 10)
            gone = await connect(sp.url, "a")
            await gone.publish("foo", b"bye!!")
            await synced(a, b, gone)
            await gone.close()
            for sub in (foo1, foo2):
                for _ in range(6):
                    await sub.next_msg(timeout=WAIT_S)
            await bar.next_msg(timeout=WAIT_S)
            # the departed client is gone from the server's count (bounded poll)
            async with asyncio.timeout(WAIT_S):
                while True:
                    doc = await asyncio.to_thread(get_json, f"{base}/accstatz")
                    if doc is not None and by_name(doc).get("A", {}).get("conns") == 1:
                        break
                    await asyncio.sleep(0.05)
            out: dict[str, Any] = {"http": doc}
            out["unused"] = await asyncio.to_thread(get_json, f"{base}/accstatz?unused=1")
            reqs = {
                "a_statz": ("$SYS.REQ.ACCOUNT.A.STATZ", b""),
                "nope_unused": ("$SYS.REQ.ACCOUNT.NOPE.STATZ", b'{"include_unused":true}'),
                "ping_b": ("$SYS.REQ.ACCOUNT.PING.STATZ", b'{"accounts":["B"]}'),
            }
            for key, (subject, body) in reqs.items():
                msg = await sys_.request(subject, body, timeout=WAIT_S)
                out[key] = json.loads(msg.data)
            msg = await a.request("$SYS.REQ.ACCOUNT.PING.STATZ", b"", timeout=WAIT_S)
            out["ping_from_a"] = json.loads(msg.data)
            return out
        finally:
            for nc in (a, b, sys_):
                await nc.close()

    out = run(main, timeout=4 * WAIT_S)
    a_stat = stat("A", 1, INTERNAL_SUBS + 2, (12, 60), (6, 30))
    b_stat = stat("B", 1, INTERNAL_SUBS + 1, (1, 100), (2, 110))
    g_stat = stat("$G", 0, INTERNAL_SUBS, (0, 0), (0, 0))

    doc = out["http"]
    assert list(doc) == ["server_id", "now", "account_statz"]
    assert sorted(by_name(doc)) == ["A", "B", "SYS"]  # accounts with connections
    for s in doc["account_statz"]:
        assert list(s) == STAT_KEYS
        assert list(s["sent"]) == ["msgs", "bytes", "gateways", "routes", "leafs"]
    assert by_name(doc)["A"] == a_stat
    assert by_name(doc)["B"] == b_stat
    unused = by_name(out["unused"])
    assert sorted(unused) == ["$G", "A", "B", "SYS"]
    assert (unused["A"], unused["B"], unused["$G"]) == (a_stat, b_stat, g_stat)

    a_statz = out["a_statz"]
    assert list(a_statz) == ["server", "data"]
    assert a_statz["data"]["account_statz"] == [a_stat]
    assert out["nope_unused"]["data"]["account_statz"] == []
    assert out["ping_b"]["data"]["account_statz"] == [b_stat]
    # a's own request: its reply inbox is a subscription; whether the request itself is
    # already in ``received`` is a race on nats-server (its read loop adds a batch to the
    # account after the STATZ handler, running elsewhere, may have answered)
    (pinged,) = out["ping_from_a"]["data"]["account_statz"]
    assert pinged["received"]["msgs"] in (6, 7)
    pinged["received"] = a_stat["received"]
    assert pinged == stat("A", 1, INTERNAL_SUBS + 3, (12, 60), (6, 30))


# -- three nodes: every server answers the ping ----------------------------------------------


def test_accstatz_ping_cluster(acc_cluster: Cluster) -> None:  # noqa: F811 (the fixture)
    """``$SYS.REQ.ACCOUNT.PING.STATZ`` from the system account is answered by every server
    (``include_unused``), else by those where the account has connections; a message that
    crossed a route counts where it was published (``sent``, ``routes``) and where it was
    delivered (``received``, ``routes``).  Counted as differences around the traffic."""
    c = acc_cluster

    async def main() -> dict[str, Any]:
        b1 = await connect(c.url(0), "b")
        b3 = await connect(c.url(2), "b")
        sys_ = await connect(c.url(1), "sys")
        try:
            bar = await b3.subscribe("bar")
            await wait_interest(b1, b3, "b13")

            async def ping(body: bytes, n: int) -> dict[str, Any]:
                inbox = sys_.new_inbox()
                sub = await sys_.subscribe(inbox)
                await synced(sys_)
                await sys_.publish("$SYS.REQ.ACCOUNT.PING.STATZ", body, reply=inbox)
                got = [json.loads((await sub.next_msg(timeout=WAIT_S)).data) for _ in range(n)]
                await sub.unsubscribe()
                return {m["server"]["name"]: m["data"]["account_statz"] for m in got}

            before = await ping(b'{"accounts":["B"],"include_unused":true}', 3)
            for _ in range(3):
                await b1.publish("bar", b"routed")
            for _ in range(3):
                await bar.next_msg(timeout=WAIT_S)
            after = await ping(b'{"accounts":["B"],"include_unused":true}', 3)
            used = await ping(b'{"accounts":["B"]}', 2)
            return {"before": before, "after": after, "used": used}
        finally:
            for nc in (b1, b3, sys_):
                await nc.close()

    out = run(main, timeout=6 * WAIT_S)
    names = sorted(p.name for p in c.plans)
    assert sorted(out["before"]) == sorted(out["after"]) == names
    assert sorted(out["used"]) == [names[0], names[2]]  # n2 has no connection of B

    def delta(node: str, way: str, part: str | None = None) -> tuple[int, int]:
        (b,), (a,) = out["before"][node], out["after"][node]
        x, y = (b[way], a[way]) if part is None else (b[way][part], a[way][part])
        return y["msgs"] - x["msgs"], y["bytes"] - x["bytes"]

    n1, n2, n3 = names
    assert [s["conns"] for (s,) in (out["after"][n] for n in names)] == [1, 0, 1]
    # n1: 3 published by its client, sent on the route
    assert (delta(n1, "received"), delta(n1, "sent"), delta(n1, "sent", "routes")) == (
        (3, 18),
        (3, 18),
        (3, 18),
    )
    # n3: 3 from the route, delivered to its client
    assert (delta(n3, "received", "routes"), delta(n3, "received"), delta(n3, "sent")) == (
        (3, 18),
        (3, 18),
        (3, 18),
    )
    assert (delta(n2, "received"), delta(n2, "sent")) == ((0, 0), (0, 0))
