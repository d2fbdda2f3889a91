"""Where a sync R3 publish spends its time: a per-hop median breakdown.

Theory of operation: a fresh three-node trijet cluster (``tests.support.cluster``,
``sync_interval: always``, an R3 file stream ``BENCH``) runs with
``TRIJET_RAFT_TRACE`` set (``raft.trace``): every process stamps, with
``time.monotonic_ns`` (one clock for all processes of the machine), a client
read, each proposal, each driver cycle's start and end, its append-entries
sent, its records durable, its answers sent, its entries applied and its
proposals released (PubAcks written), every Raft frame received and every
journal write's start and end in whichever thread did it.  The C ``jspub``
publishes ``--msgs`` messages of 128 B one at a time to the stream leader;
then the stamps are paired per Raft index (one entry per sync publish) and the
median of each hop is printed: leader (L) before the append-entries leave,
each follower (F0, F1) from frame in to answer out, and the leader's commit,
apply and PubAck.  Medians of hops do not add up to the median of the whole;
the machine is shared, so print the load with the figures.

Run: ``python -m bench.r3_trace [--msgs 2000] [--keep DIR] [--sync interval]``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import glob
import os
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

import nats

from bench import r3_bench as rb
from bench.common import build_loadgen
from tests.support.cluster import start_cluster

Event = tuple[str, str, int, int, int]


def read_traces(d: str) -> dict[str, list[Event]]:
    procs: dict[str, list[Event]] = {}
    for f in glob.glob(os.path.join(d, "*.trace")):
        ev = []
        with open(f) as fh:
            for line in fh:
                e, g, t, last, commit = line.split()
                ev.append((e, g, int(t), int(last), int(commit)))
        procs[os.path.basename(f)] = ev
    return procs


def by_index(ev: list[Event], gid: str) -> dict[int, dict[str, int]]:
    """First stamp of each kind per Raft index: by last index (append side)
    or by commit index (``*_c``: the commit side)."""
    out: dict[int, dict[str, int]] = collections.defaultdict(dict)
    for e, g, t, last, commit in ev:
        if g != gid:
            continue
        if e in ("cstart", "cend", "early", "synced", "sent"):
            out[last].setdefault(e, t)
        if e in ("cstart", "cend", "synced", "sent", "applied", "released"):
            out[commit].setdefault(e + "_c", t)
        if e == "frame":
            out[last].setdefault("frame", t)
    return out


def breakdown(d: str) -> list[tuple[str, list[int]]]:
    procs = read_traces(d)
    leader = gid = None
    for p, ev in procs.items():
        props = [x for x in ev if x[0] == "propose" and x[1].startswith("S-")]
        if len(props) > 100:
            leader, gid = p, props[0][1]
    if leader is None or gid is None:
        raise SystemExit("no stream leader found in the traces")
    lev = procs[leader]
    prop: dict[int, int] = {}
    for e, g, t, last, _ in lev:
        if e == "propose" and g == gid:
            prop.setdefault(last + 1, t)
    reads = sorted(t for e, _, t, _, _ in lev if e == "cread")
    li_all = by_index(lev, gid)
    fols = [by_index(ev, gid) for p, ev in sorted(procs.items()) if p != leader]
    hops: dict[str, list[int]] = collections.defaultdict(list)
    for i, tp in sorted(prop.items())[50:-10]:  # warm-up and tail left out
        li = li_all.get(i, {})
        need = ("cstart", "cend", "early", "synced", "cstart_c", "applied_c", "released_c")
        if any(k not in li for k in need):
            continue
        k = bisect.bisect_right(reads, tp) - 1
        if k >= 0:
            hops["L client read -> proposed"].append(tp - reads[k])
        hops["L proposed -> cycle start"].append(li["cstart"] - tp)
        hops["L cycle (append) cpu"].append(li["cend"] - li["cstart"])
        hops["L cycle end -> append-entries sent"].append(li["early"] - li["cend"])
        hops["L append-entries sent -> own write done"].append(li["synced"] - li["early"])
        for n, f in enumerate(fols):
            fi, fa = f.get(i, {}), f.get(i - 1, {})
            if "frame" not in fa or any(k not in fi for k in ("cstart", "cend", "synced", "sent")):
                continue
            hops[f"F{n} append-entries sent -> frame in"].append(fa["frame"] - li["early"])
            hops[f"F{n} frame in -> cycle start"].append(fi["cstart"] - fa["frame"])
            hops[f"F{n} cycle cpu"].append(fi["cend"] - fi["cstart"])
            hops[f"F{n} cycle end -> write done"].append(fi["synced"] - fi["cend"])
            hops[f"F{n} write done -> answer sent"].append(fi["sent"] - fi["synced"])
            hops[f"F{n} frame in -> answer sent"].append(fi["sent"] - fa["frame"])
        if "frame" in li:
            hops["L first answer in -> commit cycle start"].append(li["cstart_c"] - li["frame"])
        hops["L commit cycle start -> applied"].append(li["applied_c"] - li["cstart_c"])
        if all(k in li for k in ("cend_c", "synced_c", "sent_c")):
            hops["L   commit cycle cpu"].append(li["cend_c"] - li["cstart_c"])
            hops["L   commit cycle end -> its write done"].append(li["synced_c"] - li["cend_c"])
            hops["L   write done -> its outbox sent"].append(li["sent_c"] - li["synced_c"])
            hops["L   outbox sent -> applied"].append(li["applied_c"] - li["sent_c"])
        hops["L applied -> released (PubAck written)"].append(li["released_c"] - li["applied_c"])
        hops["L proposed -> released (whole)"].append(li["released_c"] - tp)
        nxt = bisect.bisect_right(reads, li["released_c"])
        if nxt < len(reads):
            hops["client: PubAck written -> next read"].append(reads[nxt] - li["released_c"])
    for p, ev in sorted(procs.items()):
        starts: dict[str, int] = {}
        writes: list[int] = []
        for e, g, t, _, _ in ev:
            if not g.startswith(gid[:12]):
                continue
            if e == "w0":
                starts[g] = t
            elif e == "w1" and g in starts:
                writes.append(t - starts.pop(g))
        role = "L" if p == leader else "F"
        hops[f"{role} {p}: journal append+fsync itself"] = writes
    return list(hops.items())


async def _setup(c: Any) -> int:
    nc = await nats.connect(c.urls[0], error_cb=rb._quiet)
    try:
        cfg = {"name": rb.STREAM, "subjects": ["bench.>"], "storage": "file", "num_replicas": 3}
        await rb.api(nc, f"$JS.API.STREAM.CREATE.{rb.STREAM}", cfg)
        info = await rb.wait_healthy(nc)
    finally:
        await nc.close()
    return int(c.index(info["cluster"]["leader"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.r3_trace", description=__doc__)
    p.add_argument("--msgs", type=int, default=2000, help="sync publishes traced")
    p.add_argument("--keep", default="", help="keep the trace files in this directory")
    p.add_argument(
        "--sync",
        choices=("always", "interval"),
        default="always",
        help="the servers' sync_interval: always, or 2m (the reference's default; "
        "journal writes not fsynced per cycle)",
    )
    args = p.parse_args(argv)
    loadgen = build_loadgen(False)
    if loadgen is None:
        raise SystemExit("r3_trace needs a C compiler for the jspub client")
    work = Path(tempfile.mkdtemp(prefix="r3trace-"))
    tdir = args.keep or str(work / "trace")
    os.makedirs(tdir, exist_ok=True)
    os.environ["TRIJET_RAFT_TRACE"] = tdir  # inherited by the servers
    if args.sync == "always":
        c = start_cluster("trijet", sync_always=True, workdir=work / "cluster")
    else:
        c = start_cluster("trijet", workdir=work / "cluster", jetstream_conf="sync_interval: 2m")
    try:
        li = asyncio.run(_setup(c))
        port = c.specs[li].client_port
        load = os.getloadavg()[0]
        res = rb.c_publish(loadgen, port, args.msgs, 1, 128)
    finally:
        c.stop()
        os.environ.pop("TRIJET_RAFT_TRACE", None)
    lat = res.get("lat_us") or {}
    print(f"{res['rate']:,.0f} msgs/s p50={lat.get('p50', 0):.0f}us load={load:.2f}")
    for name, v in breakdown(tdir):
        if v:
            med, mean = statistics.median(v) / 1e3, statistics.mean(v) / 1e3
            print(f"{name:48} n={len(v):5} p50={med:8.1f}us mean={mean:8.1f}us")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
