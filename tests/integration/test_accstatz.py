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

from tests.integration.test_accounts import ACCOUNTS_CONF, WAIT_S, connect, synced
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
    # a's own request: counted as received, its reply inbox as a subscription
    pinged = stat("A", 1, INTERNAL_SUBS + 3, (12, 60), (7, 30))
    assert out["ping_from_a"]["data"]["account_statz"] == [pinged]
