"""System events: account connection counts and server stats, trijet and nats-server alike.

A system user watches ``$SYS.>`` while users of A and ``$G`` connect and leave.  Each
connect and disconnect of an A client is preceded by A's ``account_connections`` event on
both CONNS subjects (one event, one id); ``$G`` gets none.  The server's STATSZ arrives on
its own (nats-server's schedule: 250 ms, doubling to 10 s), in the ping's shape.
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration.test_accounts import ACCOUNTS_CONF, WAIT_S, connect, synced
from tests.support import ServerProcess
from tests.support.aio import run

#: the first STATSZ after the watcher subscribed comes within 8 s of the server's start
STATSZ_WAIT_S = 30.0
_CONNS_KEYS = [
    "type",
    "id",
    "timestamp",
    "server",
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


def test_account_conns_and_statsz_events(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=ACCOUNTS_CONF)

    async def main() -> dict[str, Any]:
        sys_ = await connect(sp.url, "sys")
        try:
            watch = await sys_.subscribe("$SYS.>")
            await synced(sys_)

            own = ("$SYS.ACCOUNT.SYS.", "$SYS.SERVER.ACCOUNT.SYS.")

            async def next_event(*prefixes: str) -> Any:
                """The next message on one of these subjects (others are skipped,
                and so are the events about this watcher's own connection, which
                nats-server can publish after the sync above: one full run saw
                its ``$SYS.ACCOUNT.SYS.CONNECT`` come first)."""
                while True:
                    m = await watch.next_msg(timeout=STATSZ_WAIT_S)
                    if m.subject.startswith(prefixes) and not m.subject.startswith(own):
                        return m

            events = ("$SYS.SERVER.ACCOUNT.", "$SYS.ACCOUNT.")
            a = await connect(sp.url, "a")
            seen = [await next_event(*events) for _ in range(3)]
            await a.close()
            seen += [await next_event(*events) for _ in range(3)]
            g = await connect(sp.url, "g")
            after_g = await next_event(*events)
            await g.close()
            statsz = await next_event("$SYS.SERVER.")
            while not statsz.subject.endswith(".STATSZ"):
                statsz = await next_event("$SYS.SERVER.")
            return {
                "subjects": [m.subject for m in seen],
                "docs": [json.loads(m.data) for m in seen],
                "after_g": after_g.subject,
                "statsz": json.loads(statsz.data),
            }
        finally:
            await sys_.close()

    out = run(main, timeout=WAIT_S + 3 * STATSZ_WAIT_S)
    assert out["subjects"] == [
        "$SYS.SERVER.ACCOUNT.A.CONNS",
        "$SYS.ACCOUNT.A.SERVER.CONNS",
        "$SYS.ACCOUNT.A.CONNECT",
        "$SYS.SERVER.ACCOUNT.A.CONNS",
        "$SYS.ACCOUNT.A.SERVER.CONNS",
        "$SYS.ACCOUNT.A.DISCONNECT",
    ]
    docs = out["docs"]
    for i, conns in ((0, 1), (3, 0)):
        old, new = docs[i], docs[i + 1]
        assert old["server"]["seq"] < new["server"]["seq"]  # two messages, one event
        assert {**old, "server": None} == {**new, "server": None}
        assert list(old) == _CONNS_KEYS
        assert old["type"] == "io.nats.server.advisory.v1.account_connections"
        assert (old["acc"], old["name"], old["conns"], old["total_conns"]) == (
            "A",
            "A",
            conns,
            conns,
        )
        assert old["leafnodes"] == 0 and old["slow_consumers"] == 0
        assert list(old["sent"]) == ["msgs", "bytes", "gateways", "routes", "leafs"]
    assert docs[2]["type"] == "io.nats.server.advisory.v1.client_connect"
    assert docs[5]["type"] == "io.nats.server.advisory.v1.client_disconnect"
    assert out["after_g"] == "$SYS.ACCOUNT.$G.CONNECT"  # no CONNS for $G
    st = out["statsz"]
    assert list(st) == ["server", "statsz"]
    assert list(st["statsz"])[:7] == [
        "start",
        "mem",
        "cores",
        "cpu",
        "connections",
        "total_connections",
        "active_accounts",
    ]
    assert list(st["statsz"])[-2:] == ["active_servers", "gomaxprocs"]
