"""The JetStream meta layer side by side: three-node trijet against three-node nats-server.

Theory of operation: for every ``--sync`` mode (``default``: each server's
default durability; ``always``: ``jetstream { sync_interval: always }``) and
every server, a fresh three-node cluster is started with
``tests.support.cluster.start_cluster`` (same conf files for both kinds, all on
127.0.0.1, stores in a new temporary directory) and driven by nats-py:

* **probe** -- is there one JetStream for the cluster?  Every node's ``/jsz``
  must name a meta leader, and one ``STREAM.CREATE`` sent with its own inbox
  must get exactly one reply (without the meta group each trijet node answers
  on its own), with a ``cluster`` block.  If not, the server's row says
  ``n/a (no meta group)`` and the run goes on with the next server.
* **creates** -- ``--sizes`` first figure (200) R1 file streams created one after
  the other through ``$JS.API.STREAM.CREATE.<name>`` by one client connected to
  n1; every reply must be a create response without ``error``.  Figure:
  creates per second.
* **idle** -- more creates up to the second figure (500 streams), a settle pause
  (``--settle-s``), then CPU time (``/proc/<pid>/stat`` utime+stime) over
  ``--idle-s`` seconds, as % of one core, and RSS (``VmRSS``) of every node.
  Figures: mean over the nodes (the per-node values are printed as it goes).
* **scale** (``--scale R3,R1``, e.g. ``100,500``, instead of creates and
  idle) -- the R3 file streams ``R<i>`` then the R1 file streams ``S<i>``,
  created one after the other through the API by one client on n1 (every reply
  checked), then the idle window as above.  Figures: seconds to create all,
  and the **highest** node's idle CPU % of a core and RSS (the issue's targets
  are per node: all created within 60 s, idle CPU <= 10 %, RSS <= 500 MB);
  failover rounds are skipped unless ``--rounds`` is given.
* **failover** -- ``--rounds`` times: connect to a node that is not the meta
  leader, SIGKILL the meta leader (as ``/jsz`` names it), then send
  ``STREAM.CREATE`` of a new R1 stream to the survivor, retrying every
  ``--try-timeout`` seconds, until one succeeds.  Figure: median time from the
  kill to that success.  The killed node is restarted (same conf and store)
  and the cluster must be formed again before the next round.

The table gives the reference's and trijet's figure and ``ratio`` =
trijet / reference (for CPU, RSS and failover time lower is better, so a
ratio above 1 means trijet needs more).  ``--json`` keeps every raw figure.
The machine is shared: the 1-minute load average is printed with each run.

Run: ``python -m bench.meta_bench [--quick]`` (see ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from bench.common import CLK_TCK, OUT_DIR, comma_list
from tests.support.cluster import Cluster, meta_leader_known, start_cluster
from tests.support.servers import Kind

KINDS: dict[str, Kind] = {"ref": "reference", "trijet": "trijet"}
API_TIMEOUT_S = 10.0
PROBE_EXTRA_S = 0.5
"""How long the probe keeps listening for further replies after the first."""
FAILOVER_S_MAX = 60.0
NO_RESPONDERS_PAUSE_S = 0.02
NA_NO_META = "n/a (no meta group)"

METRICS = [
    # key, label, higher is better
    ("creates_per_s", "R1 stream creates/s", True),
    ("idle_cpu_pct", "idle CPU % of a core, mean/node", False),
    ("rss_mb", "RSS MB, mean/node", False),
    ("failover_s", "meta failover s, median", False),
]

SCALE_METRICS = [
    ("create_all_s", "create all (R3 then R1) s", False),
    ("idle_cpu_pct_max", "idle CPU % of a core, max node", False),
    ("idle_cpu_pct", "idle CPU % of a core, mean/node", False),
    ("rss_mb_max", "RSS MB, max node", False),
    ("rss_mb", "RSS MB, mean/node", False),
]
SCALE_TARGETS = {"create_all_s": 60.0, "idle_cpu_pct_max": 10.0, "rss_mb_max": 500.0}
"""The issue's targets (#13, Scale): per node."""


@dataclass
class Run:
    """One server's figures in one sync mode."""

    server: str
    sync: str
    figures: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    na: str = ""
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)


# -- API requests ----------------------------------------------------------------


def stream_config(name: str, subject: str, replicas: int = 1) -> bytes:
    return json.dumps(
        {"name": name, "subjects": [subject], "num_replicas": replicas, "storage": "file"}
    ).encode()


async def create(
    nc: NATS, name: str, wait_s: float = API_TIMEOUT_S, replicas: int = 1
) -> dict[str, Any]:
    """STREAM.CREATE of a file stream ``name`` (subject ``<name>.>``); the decoded reply."""
    msg = await nc.request(
        f"$JS.API.STREAM.CREATE.{name}",
        stream_config(name, f"{name}.>", replicas),
        timeout=wait_s,
    )
    doc = json.loads(msg.data)
    return doc if isinstance(doc, dict) else {"error": {"description": "not an object"}}


def error_text(doc: dict[str, Any]) -> str | None:
    err = doc.get("error")
    if err is None:
        return None
    return f"{err.get('code')}/{err.get('err_code')} {err.get('description')}"


async def probe(c: Cluster, nc: NATS) -> str | None:
    """None if the cluster has one JetStream, else why not (the row's ``n/a``)."""
    if not meta_leader_known(c):
        return NA_NO_META
    replies: list[bytes] = []
    first = asyncio.Event()

    async def on_reply(msg: Any) -> None:
        replies.append(msg.data)
        first.set()

    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, cb=on_reply)
    await nc.publish("$JS.API.STREAM.CREATE.PROBE", stream_config("PROBE", "probe.>"), inbox)
    try:
        await asyncio.wait_for(first.wait(), API_TIMEOUT_S)
    except TimeoutError:
        return "n/a (probe create got no reply)"
    await asyncio.sleep(PROBE_EXTRA_S)  # a window for further replies, not a condition
    await sub.unsubscribe()
    if len(replies) != 1:
        return f"{NA_NO_META}: {len(replies)} replies to one create"
    doc = json.loads(replies[0])
    if error_text(doc) or "cluster" not in doc:
        return f"{NA_NO_META}: probe create answered {error_text(doc) or 'without cluster'}"
    return None


# -- phases ----------------------------------------------------------------------


async def phase_creates(
    nc: NATS, first: int, count: int, replicas: int = 1, prefix: str = "S"
) -> float:
    """Create streams ``<prefix><first>``..; returns seconds.  Raises RuntimeError on an error reply."""
    t0 = time.perf_counter()
    for i in range(first, first + count):
        name = f"{prefix}{i:05d}"
        try:
            doc = await create(nc, name, replicas=replicas)
        except NatsTimeoutError as exc:
            secs = time.perf_counter() - t0
            raise RuntimeError(
                f"create {name}: no reply ({i - first} done in {secs:.1f}s)"
            ) from exc
        err = error_text(doc)
        if err:
            raise RuntimeError(f"create {name}: {err}")
    return time.perf_counter() - t0


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def phase_idle(c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """CPU % of a core and RSS per node over ``args.idle_s`` with nothing to do."""
    await asyncio.sleep(args.settle_s)
    pids = {c.names[i]: p.pid for i, p in enumerate(c.procs) if p is not None and p.alive()}
    cpu0 = {n: proc_cpu_s(pid) for n, pid in pids.items()}
    t0 = time.monotonic()
    await asyncio.sleep(args.idle_s)
    wall = time.monotonic() - t0
    cpu = {n: 100.0 * (proc_cpu_s(pid) - cpu0[n]) / wall for n, pid in pids.items()}
    rss = {n: proc_rss_mb(pid) for n, pid in pids.items()}
    hosted = {}
    for i, n in enumerate(c.names):
        doc = c.jsz(i) or {}
        hosted[n] = doc.get("streams")
    return {"cpu_pct": cpu, "rss_mb": rss, "streams_hosted": hosted}


async def one_failover(c: Cluster, rnd: int, args: argparse.Namespace) -> dict[str, Any]:
    """Kill the meta leader, time until a create on a survivor succeeds, restart it."""
    leader = c.meta_leader()
    if leader is None:
        raise RuntimeError("no meta leader before the kill")
    li = c.index(leader)
    si = next(i for i in c.live_indexes() if i != li)
    nc = await nats.connect(c.urls[si], allow_reconnect=False, error_cb=_quiet)
    tries = 0
    errors: list[str] = []
    try:
        t0 = time.monotonic()
        c.kill(li)
        while True:
            if time.monotonic() - t0 > FAILOVER_S_MAX:
                raise RuntimeError(f"no successful create within {FAILOVER_S_MAX}s: {errors[-3:]}")
            tries += 1
            try:
                doc = await create(nc, f"F{rnd:03d}", wait_s=args.try_timeout)
            except NatsTimeoutError:
                continue
            except NoRespondersError:
                await asyncio.sleep(NO_RESPONDERS_PAUSE_S)
                continue
            err = error_text(doc)
            if err is None:
                elapsed = time.monotonic() - t0
                break
            errors.append(err)
            await asyncio.sleep(NO_RESPONDERS_PAUSE_S)
    finally:
        await nc.close()
    new = c.meta_leader()
    await asyncio.to_thread(c.restart, li)
    return {"s": elapsed, "killed": leader, "new_leader": new, "tries": tries, "errors": errors}


async def _quiet(*_: Any) -> None:
    return None


def print_idle(run: Run, idle: dict[str, Any], streams: int) -> None:
    print(
        f"  {run.server} idle with {streams} streams: cpu% "
        + " ".join(f"{n}={v:.2f}" for n, v in idle["cpu_pct"].items())
        + " rss_mb "
        + " ".join(f"{n}={v:.1f}" for n, v in idle["rss_mb"].items())
        + f" hosted {idle['streams_hosted']}",
        flush=True,
    )


async def phase_scale(c: Cluster, nc: NATS, run: Run, args: argparse.Namespace) -> None:
    """``args.r3`` R3 then ``args.r1`` R1 streams, timed; then the idle window."""
    t_r3 = await phase_creates(nc, 0, args.r3, replicas=3, prefix="R")
    print(f"  {run.server} created {args.r3} R3 in {t_r3:.2f}s", flush=True)
    t_r1 = await phase_creates(nc, 0, args.r1, replicas=1, prefix="S")
    print(f"  {run.server} created {args.r1} R1 in {t_r1:.2f}s", flush=True)
    run.figures["create_all_s"] = t_r3 + t_r1
    run.details["create_r3_s"], run.details["create_r1_s"] = t_r3, t_r1
    idle = await phase_idle(c, args)
    run.details["idle"] = idle
    run.figures["idle_cpu_pct"] = statistics.mean(idle["cpu_pct"].values())
    run.figures["idle_cpu_pct_max"] = max(idle["cpu_pct"].values())
    run.figures["rss_mb"] = statistics.mean(idle["rss_mb"].values())
    run.figures["rss_mb_max"] = max(idle["rss_mb"].values())
    print_idle(run, idle, args.r3 + args.r1 + 1)


async def phase_creates_idle(c: Cluster, nc: NATS, run: Run, args: argparse.Namespace) -> None:
    """The creates/s and idle phases (R1 streams)."""
    n_creates, n_idle = args.creates, args.idle_streams
    secs = await phase_creates(nc, 0, n_creates)
    run.figures["creates_per_s"] = n_creates / secs
    print(f"  {run.server} creates: {n_creates} in {secs:.2f}s", flush=True)
    more = max(0, n_idle - n_creates)
    secs_more = await phase_creates(nc, n_creates, more)
    run.details["fill_creates_per_s"] = more / secs_more if more else None
    idle = await phase_idle(c, args)
    run.details["idle"] = idle
    run.figures["idle_cpu_pct"] = statistics.mean(idle["cpu_pct"].values())
    run.figures["rss_mb"] = statistics.mean(idle["rss_mb"].values())
    print_idle(run, idle, max(n_idle, n_creates) + 1)


async def run_phases(c: Cluster, run: Run, args: argparse.Namespace) -> None:
    nc = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        why = await probe(c, nc)
        if why:
            run.na = why
            return
        if args.scale:
            await phase_scale(c, nc, run, args)
        else:
            await phase_creates_idle(c, nc, run, args)
    finally:
        await nc.close()
    rounds = []
    for rnd in range(args.rounds):
        r = await one_failover(c, rnd, args)
        rounds.append(r)
        print(
            f"  {run.server} failover {rnd}: {r['s']:.2f}s (killed {r['killed']}, new"
            f" {r['new_leader']}, {r['tries']} tries, errors {r['errors'][:2]})",
            flush=True,
        )
    run.details["failover"] = rounds
    if rounds:
        run.figures["failover_s"] = statistics.median(r["s"] for r in rounds)


def run_server(name: str, sync: str, args: argparse.Namespace) -> Run:
    run = Run(name, sync, load=os.getloadavg())
    workdir = Path(tempfile.mkdtemp(prefix=f"meta-{name}-{sync}-", dir=args.store_parent))
    c: Cluster | None = None
    try:
        c = start_cluster(KINDS[name], sync_always=(sync == "always"), workdir=workdir)
        asyncio.run(run_phases(c, run, args))
    except Exception as exc:  # a server that cannot do it gets n/a, the run goes on
        run.na = run.na or f"n/a ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    finally:
        if c is not None:
            c.stop()
        if args.keep:
            print(f"  {name} logs and stores kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if run.na:
        print(f"{name}: {run.na}", flush=True)
    return run


# -- report ----------------------------------------------------------------------


def fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def report(runs: list[Run], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    metrics = SCALE_METRICS if args.scale else METRICS
    print()
    print(f"{'metric':34} {'sync':7} {'ref':>10} {'trijet':>10} {'ratio':>7}  note")
    for sync in args.syncs:
        by = {r.server: r for r in runs if r.sync == sync}
        for key, label, higher in metrics:
            ref = by["ref"].figures.get(key) if "ref" in by else None
            tj = by["trijet"].figures.get(key) if "trijet" in by else None
            ratio = tj / ref if tj is not None and ref else None
            note = "" if higher else "lower=better"
            target = SCALE_TARGETS.get(key) if args.scale else None
            if target is not None and tj is not None:
                note += f"; target <= {target:g}: {'met' if tj <= target else 'MISSED'}"
            if "trijet" in by and by["trijet"].na:
                note = f"trijet: {by['trijet'].na}"
            rows.append({"metric": key, "sync": sync, "ref": ref, "trijet": tj, "ratio": ratio})
            print(
                f"{label:34} {sync:7} {fmt(ref):>10} {fmt(tj):>10}"
                f" {'n/a' if ratio is None else f'{ratio:.2f}':>7}  {note}"
            )
    for key, _, _ in metrics:
        for sync in args.syncs:
            row = next(r for r in rows if r["metric"] == key and r["sync"] == sync)
            rtxt = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
            print(f"{key}[{sync}]: trijet={fmt(row['trijet'])} ref={fmt(row['ref'])} ratio={rtxt}")
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.meta_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--servers", default="ref,trijet", help="comma list of ref, trijet")
    p.add_argument("--sync", default="default,always", help="comma list of default, always")
    p.add_argument("--sizes", default="200,500", help="CREATES,IDLE_STREAMS (200,500)")
    p.add_argument("--rounds", type=int, default=5, help="meta leader kills (median reported)")
    p.add_argument("--idle-s", type=float, default=10.0, help="idle CPU window, seconds")
    p.add_argument("--settle-s", type=float, default=2.0, help="pause before the idle window")
    p.add_argument("--try-timeout", type=float, default=0.25, help="failover: per-create timeout")
    p.add_argument("--quick", action="store_true", help="50,100 streams, 3 s idle, 2 rounds")
    p.add_argument(
        "--scale",
        default="",
        help="R3,R1: create that many R3 then R1 file streams, time it, then idle"
        " (issue #13: 100,500); default sync only and no failover rounds unless given",
    )
    p.add_argument("--store-parent", default=None, help="where the temp cluster dirs go")
    p.add_argument("--keep", action="store_true", help="keep logs and stores")
    p.add_argument("--json", default="", help="write all raw results to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.idle_s, args.rounds, args.settle_s = "50,100", 3.0, 2, 1.0
    try:
        args.creates, args.idle_streams = (int(x) for x in comma_list(args.sizes))
    except ValueError:
        p.error("--sizes takes CREATES,IDLE_STREAMS")
    args.r3 = args.r1 = 0
    if args.scale:
        try:
            args.r3, args.r1 = (int(x) for x in comma_list(args.scale))
        except ValueError:
            p.error("--scale takes R3,R1 stream counts")
        explicit = argv if argv is not None else sys.argv[1:]
        if not any(a.startswith("--sync") for a in explicit):
            args.sync = "default"
        if not any(a.startswith("--rounds") for a in explicit):
            args.rounds = 0
    args.servers = comma_list(args.servers)
    args.syncs = comma_list(args.sync)
    bad = [s for s in args.servers if s not in KINDS] + [
        s for s in args.syncs if s not in ("default", "always")
    ]
    if bad:
        p.error(f"unknown server or sync mode: {', '.join(bad)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    what = (
        f"scale r3={args.r3} r1={args.r1}"
        if args.scale
        else f"creates={args.creates} idle_streams={args.idle_streams}"
    )
    print(
        f"meta_bench: 3 nodes each; {what}"
        f" idle_s={args.idle_s} rounds={args.rounds} sync={','.join(args.syncs)}"
        f" load={' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    runs = []
    for sync in args.syncs:
        for name in args.servers:
            print(f"[{sync}] {name}: starting (load {os.getloadavg()[0]:.2f})", flush=True)
            runs.append(run_server(name, sync, args))
    rows = report(runs, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"args": vars(args), "rows": rows, "runs": [vars(r) for r in runs]},
                fh,
                indent=1,
                default=str,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
