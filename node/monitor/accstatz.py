"""``/accstatz`` and the accounts' statistics (nats-server's ``AccountStat``).

Theory of operation: nothing is counted per account on the hot path.  Each client
connection (``ClientSession``) and leaf link already counts what it published
(``in_msgs``/``in_bytes``) and what was delivered to it (``out_msgs``/``out_bytes``), per
read batch and per delivery run; an account's ``received`` is the sum over its live
connections plus what its closed ones counted (``Account.retired``, added once when a
connection closes), and ``sent`` likewise.  Leaf links count towards the same totals and
towards ``leafs``; messages to and from routes are counted by the account's router beside
the routes' own counters (per message, or per run on the batched paths) and count towards
the totals and ``routes``.  ``gateways`` stay zero (there are none).

Documents, as nats-server 2.15.1 serves them:

* ``/accstatz`` (``unused=true`` adds accounts without connections; no other option:
  nats-server's HTTP handler takes no account filter) → ``{server_id, now, account_statz}``.
* ``$SYS.REQ.ACCOUNT.<acc>.STATZ`` and ``$SYS.REQ.ACCOUNT.PING.STATZ`` (``node.sysreq``): the
  same document with the body's ``accounts`` / ``include_unused``; no answer at all when
  the list comes out empty and unused accounts were not asked for.
"""

from __future__ import annotations

from typing import Any

from node.monitor.gofmt import go_time
from node.monitor.query import Query

#: index of Account.retired's counters
IN_MSGS, IN_BYTES, OUT_MSGS, OUT_BYTES = range(4)


def retire(acc: Any, conn: Any, *, leaf: bool = False) -> None:
    """Fold a closing connection's counters into its account's totals (call once)."""
    r = acc.leafs_retired if leaf else acc.retired
    r[IN_MSGS] += conn.in_msgs
    r[IN_BYTES] += conn.in_bytes
    r[OUT_MSGS] += conn.out_msgs
    r[OUT_BYTES] += conn.out_bytes


def _traffic(
    msgs: int, nbytes: int, routes: tuple[int, int], leafs: tuple[int, int]
) -> dict[str, Any]:
    return {
        "msgs": msgs + routes[0] + leafs[0],
        "bytes": nbytes + routes[1] + leafs[1],
        "gateways": {"msgs": 0, "bytes": 0},
        "routes": {"msgs": routes[0], "bytes": routes[1]},
        "leafs": {"msgs": leafs[0], "bytes": leafs[1]},
    }


def local_connections(server: Any, acc: Any) -> list[Any]:
    """The account's client connections on this server (internal clients are not)."""
    return [c for c in server.clients.values() if c.account is acc and c.connected]


def account_stat(server: Any, acc: Any, conns: list[Any] | None = None) -> dict[str, Any]:
    """nats-server's ``AccountStat`` of one account (key order as its JSON)."""
    if conns is None:
        conns = local_connections(server, acc)
    # every client session of the account, connected or not yet: what it counted counts
    sessions = [c for c in server.clients.values() if c.account is acc]
    r = acc.retired
    lr = acc.leafs_retired
    in_m, in_b, out_m, out_b = r[IN_MSGS], r[IN_BYTES], r[OUT_MSGS], r[OUT_BYTES]
    for c in sessions:
        in_m += c.in_msgs
        in_b += c.in_bytes
        out_m += c.out_msgs
        out_b += c.out_bytes
    lin_m, lin_b, lout_m, lout_b = lr[IN_MSGS], lr[IN_BYTES], lr[OUT_MSGS], lr[OUT_BYTES]
    for link in acc.leafs:
        lin_m += link.in_msgs
        lin_b += link.in_bytes
        lout_m += link.out_msgs
        lout_b += link.out_bytes
    leafnodes = len(acc.leafs)
    rt = acc.router
    return {
        "acc": acc.name,
        "name": acc.name,
        "conns": len(conns),
        "leafnodes": leafnodes,
        "total_conns": len(conns) + leafnodes,
        "num_subscriptions": acc.sublist.count,
        "sent": _traffic(out_m, out_b, (rt.rt_out_msgs, rt.rt_out_bytes), (lout_m, lout_b)),
        "received": _traffic(in_m, in_b, (rt.rt_in_msgs, rt.rt_in_bytes), (lin_m, lin_b)),
        "slow_consumers": acc.slow_consumers,
    }


def account_statz(
    server: Any, names: list[str] | None = None, *, unused: bool = False, now: float | None = None
) -> dict[str, Any]:
    """nats-server's ``AccountStatz``: the named accounts (all when none), those without
    local connections or leaf links only when ``unused``; unknown names are skipped."""
    accs = getattr(server, "accounts", None)
    if accs is None:
        chosen: list[Any] = []
    elif names:
        chosen = [a for a in (accs.get(n) for n in names) if a is not None]
    else:
        chosen = list(accs)
    stats = []
    for acc in chosen:
        conns = local_connections(server, acc)
        if unused or conns or acc.leafs:
            stats.append(account_stat(server, acc, conns))
    return {
        "server_id": server.server_id,
        "now": go_time(server.wall_time() if now is None else now),
        "account_statz": stats,
    }


def accstatz(
    server: Any, query: Query | None = None, *, now: float | None = None
) -> dict[str, Any]:
    """The ``/accstatz`` document (``unused``).

    Raises:
        MonitorError: 400 for an ``unused`` that is not a Go boolean.
    """
    q = query or Query()
    return account_statz(server, unused=q.bool("unused"), now=now)
