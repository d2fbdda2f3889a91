"""``trijet server list|ping|report jetstream|cluster (raft) step-down``, ``account info``, ``bench``.

Server-wide views come from the system account's requests, as natscli's do:
``$SYS.REQ.SERVER.PING`` (STATSZ) and ``$SYS.REQ.SERVER.PING.JSZ`` (every server
answers with its ``/jsz`` document); they need a system-account user.  When no
server answers those (no system account access, or a server that does not
implement them), ``server report jetstream`` builds the same table from the
JetStream API alone: each stream's and consumer's cluster information
(``STREAM.LIST``, ``CONSUMER.LIST``) gives the assets per node, their leaders
and whether replicas are current or lagging; the meta leader is then unknown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from trijet_cli.conn import JetStreamApi, fatal
from trijet_cli.fmt import Columns, duration, f, ibytes, print_json, table

COLLECT_QUIET_S = 0.3


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    sv = sub.add_parser("server", aliases=["srv"], help="server information (system account)")
    ss = sv.add_subparsers(dest="verb", required=True, metavar="<verb>")
    p = ss.add_parser("list", aliases=["ls"], parents=[common], help="list servers")
    p.set_defaults(run=server_list)
    p = ss.add_parser("ping", parents=[common], help="ping all servers")
    p.set_defaults(run=ping)
    rep = ss.add_parser("report", help="server reports")
    rs = rep.add_subparsers(dest="report", required=True, metavar="<report>")
    p = rs.add_parser("jetstream", aliases=["js"], parents=[common], help="JetStream report")
    p.set_defaults(run=report_jetstream)
    raft = ss.add_parser("raft", help="JetStream Raft meta group")
    rf = raft.add_subparsers(dest="raft", required=True, metavar="<verb>")
    p = rf.add_parser(
        "step-down", aliases=["stepdown"], parents=[common], help="meta leader step down"
    )
    p.set_defaults(run=raft_step_down)

    ac = sub.add_parser("account", aliases=["acc"], help="account information")
    acs = ac.add_subparsers(dest="verb", required=True, metavar="<verb>")
    p = acs.add_parser("info", parents=[common], help="account information")
    p.set_defaults(run=account_info)

    b = sub.add_parser("bench", parents=[common], help="core NATS publish/subscribe benchmark")
    b.add_argument("subject")
    b.add_argument("--pub", type=int, default=1, help="publishers")
    b.add_argument("--sub", type=int, default=0, help="subscribers")
    b.add_argument("--msgs", type=int, default=100_000)
    b.add_argument("--size", type=int, default=128)
    b.add_argument("--js", action="store_true", help="publish to a JetStream stream (acked)")
    b.set_defaults(run=bench)


async def _collect(
    js: JetStreamApi, subject: str, body: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every answer to a ``$SYS`` ping within the timeout (stops after a quiet spell)."""
    nc = js.nc
    inbox = nc.new_inbox()
    out: list[dict[str, Any]] = []
    got = asyncio.Event()

    async def cb(msg: Any) -> None:
        try:
            out.append(json.loads(msg.data))
        except ValueError:
            return
        got.set()

    s = await nc.subscribe(inbox, cb=cb)
    await nc.publish(subject, json.dumps(body or {}).encode(), reply=inbox)
    deadline = time.monotonic() + js.opts.timeout_s
    while time.monotonic() < deadline:
        got.clear()
        try:
            await asyncio.wait_for(
                got.wait(), COLLECT_QUIET_S if out else deadline - time.monotonic()
            )
        except TimeoutError:
            if out:
                break
    await s.unsubscribe()
    return out


async def server_list(js: JetStreamApi, a: argparse.Namespace) -> None:
    res = await _collect(js, "$SYS.REQ.SERVER.PING")
    if not res:
        fatal(
            "no results received, ensure the account used has system privileges and appropriate permissions"
        )
    res.sort(key=lambda r: r["server"]["name"])
    if a.json:
        print_json(res)
        return
    rows = []
    for r in res:
        srv, st = r["server"], r.get("statsz") or {}
        rows.append(
            [
                srv["name"],
                srv.get("cluster", ""),
                srv.get("host", ""),
                srv.get("ver", ""),
                bool(srv.get("jetstream")),
                f(st.get("connections", 0)),
                f(st.get("subscriptions", 0)),
                f(len(st.get("routes") or [])),
                ibytes(st.get("mem", 0)),
                f"{st.get('cpu', 0)}",
            ]
        )
    hdr = ["Name", "Cluster", "Host", "Version", "JS", "Conns", "Subs", "Routes", "Mem", "CPU %"]
    print(table(hdr, rows, "Server Overview"))
    print()


async def ping(js: JetStreamApi, a: argparse.Namespace) -> None:
    start = time.monotonic()
    res = await _collect(js, "$SYS.REQ.SERVER.PING")
    rtt = int((time.monotonic() - start) * 1e9)
    if not res:
        fatal(
            "no results received, ensure the account used has system privileges and appropriate permissions"
        )
    if a.json:
        print_json(res)
        return
    for r in sorted(res, key=lambda r: r["server"]["name"]):
        print(f"{r['server']['name']:<40} rtt={duration(rtt)}")
    print()
    print("---- ping statistics ----")
    print(f"{len(res)} replies max: {duration(rtt)}")


async def _meta_leader_info(js: JetStreamApi) -> dict[str, Any]:
    """The meta leader's ``meta_cluster`` (from its own JSZ answer)."""
    res = await _collect(js, "$SYS.REQ.SERVER.PING.JSZ")
    leaders = [
        r["data"]["meta_cluster"]
        for r in res
        if (r.get("data") or {}).get("meta_cluster", {}).get("leader") == r["server"]["name"]
    ]
    if not leaders:
        fatal(
            "did not receive a response from the meta leader, ensure the account used has "
            "system privileges and appropriate permissions"
        )
    if len(leaders) > 1:
        fatal(
            f"found {len(leaders)} JetStream meta cluster leaders, unable to determine which cluster to step down"
        )
    return dict(leaders[0])


async def raft_step_down(js: JetStreamApi, a: argparse.Namespace) -> None:
    """natscli's ``server cluster step-down``: ask, then watch for a new meta leader."""
    from trijet_cli.messaging import log

    if js.opts.js_domain:
        fatal("the --js-domain option cannot be used with step-down")
    meta = await _meta_leader_info(js)
    leader = meta.get("leader") or ""
    if not leader:
        fatal("cluster has no current leader")
    log(
        f'Requesting leader step down of "{leader}" in a {len(meta.get("replicas") or []) + 1} peer RAFT group'
    )
    await js.request("META.LEADER.STEPDOWN", {}, what="could not request meta stepdown")
    start = time.monotonic()
    for _ in range(5):
        await asyncio.sleep(0.5)  # natscli's ticker between looks at the cluster state
        try:
            now = await _meta_leader_info(js)
        except Exception as exc:  # a missing answer mid-election: report and look again
            log(f"Failed to retrieve Cluster State: {exc}")
            continue
        if now.get("leader") != leader:
            log(f'New leader elected "{now.get("leader")}"')
            return
    fatal(f"Leader did not change after {duration(int((time.monotonic() - start) * 1e9))}")


def _sys_rows(
    res: list[dict[str, Any]],
) -> tuple[list[list[Any]], list[Any], dict[str, Any] | None]:
    res.sort(key=lambda r: (r["server"].get("cluster", ""), r["server"]["name"]))
    rows, meta = [], None
    tot = [0, 0, 0, 0, 0, 0, 0, 0]
    for r in res:
        d, srv = r.get("data") or {}, r["server"]
        m = d.get("meta_cluster") or {}
        star = ""
        if m.get("leader") == srv["name"]:
            star, meta = "*", m
        pending = int(m.get("pending", 0))
        vals = [
            d.get("streams", 0),
            d.get("consumers", 0),
            d.get("messages", 0),
            d.get("bytes", 0),
            d.get("memory", 0),
            d.get("storage", 0),
            (d.get("api") or {}).get("total", 0),
            pending,
        ]
        tot = [x + int(y) for x, y in zip(tot, vals, strict=True)]
        rows.append(
            [
                srv["name"] + star,
                srv.get("cluster", ""),
                f(vals[0]),
                f(vals[1]),
                f(vals[2]),
                ibytes(vals[3]),
                ibytes(vals[4]),
                ibytes(vals[5]),
                f(vals[6]),
                vals[7],
            ]
        )
    footer = [
        "",
        "",
        f(tot[0]),
        f(tot[1]),
        f(tot[2]),
        ibytes(tot[3]),
        ibytes(tot[4]),
        ibytes(tot[5]),
        f(tot[6]),
        tot[7],
    ]
    return rows, footer, meta


async def _api_rows(js: JetStreamApi) -> tuple[list[list[Any]], list[Any], list[list[Any]]]:
    """The summary from the JetStream API alone: assets per node from their leaders' cluster info."""
    streams = await js.paged("STREAM.LIST", "streams")
    per: dict[str, list[int]] = {}
    lagging: list[list[Any]] = []

    def node(name: str) -> list[int]:
        return per.setdefault(
            name, [0, 0, 0, 0, 0, 0]
        )  # streams, consumers, msgs, bytes, mem, file

    for listed in streams:
        # the stream leader's own view (a list entry may carry another replica's view)
        name = listed["config"]["name"]
        s = await js.request(f"STREAM.INFO.{name}", what=f"could not load Stream {name}")
        cl, st, cfg = s.get("cluster") or {}, s["state"], s["config"]
        hosts = [cl.get("leader") or "?"] + [r["name"] for r in cl.get("replicas") or []]
        for h in hosts:
            n = node(h)
            n[0] += 1
            n[2] += st["messages"]
            n[3] += st["bytes"]
            n[4 if cfg["storage"] == "memory" else 5] += st["bytes"]
        for r in cl.get("replicas") or []:
            if not r.get("current") or r.get("offline") or int(r.get("lag") or 0) > 0:
                lagging.append(
                    [
                        cfg["name"],
                        "",
                        r["name"],
                        "outdated" if not r.get("current") else "current",
                        "offline" if r.get("offline") else "online",
                        f(int(r.get("lag") or 0)),
                    ]
                )
        for cname in await js.paged(f"CONSUMER.NAMES.{name}", "consumers"):
            c = await js.request(
                f"CONSUMER.INFO.{name}.{cname}", what=f"could not load Consumer {cname}"
            )
            ccl = c.get("cluster") or {}
            for h in [ccl.get("leader") or "?"] + [r["name"] for r in ccl.get("replicas") or []]:
                node(h)[1] += 1
            for r in ccl.get("replicas") or []:
                if not r.get("current") or r.get("offline"):
                    lagging.append(
                        [
                            cfg["name"],
                            c["name"],
                            r["name"],
                            "outdated" if not r.get("current") else "current",
                            "offline" if r.get("offline") else "online",
                            f(int(r.get("lag") or 0)),
                        ]
                    )
    rows, tot = [], [0] * 6
    for name in sorted(per):
        v = per[name]
        tot = [x + y for x, y in zip(tot, v, strict=True)]
        rows.append(
            [name, "", f(v[0]), f(v[1]), f(v[2]), ibytes(v[3]), ibytes(v[4]), ibytes(v[5]), "-", 0]
        )
    footer = [
        "",
        "",
        f(tot[0]),
        f(tot[1]),
        f(tot[2]),
        ibytes(tot[3]),
        ibytes(tot[4]),
        ibytes(tot[5]),
        "-",
        0,
    ]
    return rows, footer, lagging


async def report_jetstream(js: JetStreamApi, a: argparse.Namespace) -> None:
    hdr = [
        "Server",
        "Cluster",
        "Streams",
        "Consumers",
        "Messages",
        "Bytes",
        "Memory",
        "File",
        "API Req",
        "Pending",
    ]
    res = await _collect(js, "$SYS.REQ.SERVER.PING.JSZ", {"streams": True, "consumers": True})
    if a.json:
        print_json(res)
        return
    if res:
        rows, footer, meta = _sys_rows(res)
        print(table(hdr, rows, "JetStream Summary", footer))
        print()
        if meta is None:
            size = max(
                int((r.get("data") or {}).get("meta_cluster", {}).get("cluster_size", 0))
                for r in res
            )
            if size:
                print()
                print(
                    f"WARNING: No cluster meta leader found. The cluster expects {size} nodes but only "
                    f"{len(res)} responded. JetStream operation requires at least {size // 2 + 1} up nodes."
                )
            return
        reps = [
            *meta.get("replicas", []),
            {"name": meta["leader"], "current": True, "active": 0, "lag": 0},
        ]
        reps.sort(key=lambda r: r["name"])
        mrows = []
        for r in reps:
            lead = r["name"] == meta["leader"]
            mrows.append(
                [
                    r["name"],
                    meta.get("peer", "") if lead else r.get("peer", ""),
                    "yes" if lead else "",
                    f(bool(r.get("current"))),
                    "false" if r.get("offline") else "true",
                    duration(int(r.get("active", 0))),
                    f(int(r.get("lag", 0))),
                ]
            )
        title = f"RAFT Meta Group Information - Lead cluster: {meta.get('name', '')}"
        print(
            table(
                ["Connection Name", "ID", "Leader", "Current", "Online", "Active", "Lag"],
                mrows,
                title,
            )
        )
        return
    rows, footer, lagging = await _api_rows(js)
    print(table(hdr, rows, "JetStream Summary", footer))
    print()
    print(
        "Meta leader: unknown (no server answered $SYS.REQ.SERVER.PING.JSZ; use a system account user)"
    )
    if lagging:
        print()
        print(
            table(
                ["Stream", "Consumer", "Replica", "State", "Online", "Lag"],
                lagging,
                "Replicas not current",
            )
        )
    else:
        print("All stream and consumer replicas are current")


async def account_info(js: JetStreamApi, a: argparse.Namespace) -> None:
    nc = js.nc
    doc = await js.request("INFO", what="could not obtain account information")
    if a.json:
        print_json(doc)
        return
    info = getattr(nc, "_server_info", {}) or {}
    cols = Columns("Account Information")
    cols.row("User", js.opts.user or "")
    cols.row("Account", info.get("account") or "$G")
    cols.row("Expires", "never")
    cols.row("Client ID", info.get("client_id", 0))
    cols.row("Client IP", info.get("client_ip", ""))
    cols.row("Headers Supported", bool(info.get("headers")))
    cols.row("Maximum Payload", ibytes(nc.max_payload))
    cols.row("Connected URL", str(nc.connected_url.geturl() if nc.connected_url else ""))
    cols.row("Connected Address", f"{info.get('host', '')}:{info.get('port', '')}")
    cols.row("Connected Server ID", info.get("server_id", ""))
    cols.row("Connected Server Name", info.get("server_name", ""))
    cols.row("Connected Server Version", info.get("version", ""))
    cols.row("TLS Connection", "yes" if info.get("tls_required") else "no")
    cols.title("JetStream Account Information")
    lim = doc.get("limits") or {}
    cols.row("Memory", ibytes(doc.get("memory", 0)))
    cols.row("Storage", ibytes(doc.get("storage", 0)))
    cols.row("Streams", doc.get("streams", 0))
    cols.row("Consumers", doc.get("consumers", 0))
    cols.title("Account Limits")
    mp = lim.get("max_memory", -1)
    cols.row("Max Memory", "unlimited" if mp == -1 else ibytes(mp))
    ms = lim.get("max_storage", -1)
    cols.row("Max Storage", "unlimited" if ms == -1 else ibytes(ms))
    mstr = lim.get("max_streams", -1)
    cols.row("Max Streams", "unlimited" if mstr == -1 else mstr)
    mc = lim.get("max_consumers", -1)
    cols.row("Max Consumers", "unlimited" if mc == -1 else mc)
    api = doc.get("api") or {}
    cols.title("API")
    cols.row("Total Requests", api.get("total", 0))
    cols.row("Errors", api.get("errors", 0))
    print(cols.render(), end="")


async def bench(js: JetStreamApi, a: argparse.Namespace) -> None:
    """Publishers and subscribers on one connection each; rates as natscli's summary line."""
    import nats

    payload = b"x" * a.size
    per_pub = max(a.msgs // max(a.pub, 1), 1)
    total = per_pub * a.pub
    subs_done = [asyncio.Event() for _ in range(a.sub)]
    sub_conns, sub_times = [], []

    for i in range(a.sub):
        c = await nats.connect(servers=js.opts.servers, name=f"bench-sub-{i}")
        sub_conns.append(c)
        count, t0 = [0], [0.0]

        async def cb(_m: Any, i: int = i, count: list[int] = count, t0: list[float] = t0) -> None:
            if count[0] == 0:
                t0[0] = time.monotonic()
            count[0] += 1
            if count[0] == total:
                sub_times.append(time.monotonic() - t0[0])
                subs_done[i].set()

        await c.subscribe(a.subject, cb=cb)
        await c.flush()

    async def publisher(i: int) -> float:
        c = await nats.connect(servers=js.opts.servers, name=f"bench-pub-{i}")
        jsx = c.jetstream(timeout=js.opts.timeout_s) if a.js else None
        t0 = time.monotonic()
        for _ in range(per_pub):
            if jsx is not None:
                await jsx.publish(a.subject, payload)
            else:
                await c.publish(a.subject, payload)
        await c.flush()
        took = time.monotonic() - t0
        await c.close()
        return took

    times = await asyncio.gather(*(publisher(i) for i in range(a.pub)))
    for e in subs_done:
        await asyncio.wait_for(e.wait(), 60)
    for c in sub_conns:
        await c.close()

    def line(kind: str, n: int, secs: float) -> str:
        rate = n / secs if secs > 0 else 0.0
        return f"{kind} stats: {f(int(rate))} msgs/sec ~ {ibytes(int(rate * a.size))}/sec"

    print(
        f"NATS {'JetStream ' if a.js else ''}Pub/Sub stats: {a.pub} publishers, {a.sub} subscribers, "
        f"{f(total)} msgs of {ibytes(a.size)}"
    )
    print(line("Pub", total, max(times)))
    for i, t in enumerate(sub_times):
        print(f" [{i + 1}] " + line("Sub", total, t))
