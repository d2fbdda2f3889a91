"""Replicated (R3) JetStream publish side by side: three-node trijet against three-node nats-server.

Theory of operation: for every ``--sync`` mode (``default``: each server's
default durability; ``always``: ``jetstream { sync_interval: always }``, equal
durability with trijet, which always fsyncs before it acknowledges) and every
server, a fresh three-node cluster is started with
``tests.support.cluster.start_cluster`` (the same nats-server-format conf files
for both kinds; 127.0.0.1; stores in a new temporary directory).  An R3 file
stream ``BENCH`` (subjects ``bench.>``) is created, and:

* **publish** -- for every client (``py``: nats-py, ``c``: the raw-socket C
  publisher ``bench/loadgen`` ``jspub``, which checks every PubAck) and mode:
  ``sync`` publishes ``--msgs`` first figure (2,000) messages of ``--size``
  (128) bytes one at a time (each waits for its PubAck); ``async`` publishes
  the second figure (20,000) with ``--window`` (1,000) in flight.  The client
  connects to the stream leader (``--connect follower``: to a follower, one
  route hop more).  Figure: msgs/s from the first publish to the last PubAck.
  The stream's ``last_seq`` must grow by exactly the count.
* **failover** -- ``--rounds`` (5) times: a nats-py publisher on a survivor
  publishes one message at a time with a ``Nats-Msg-Id`` and a
  ``--try-timeout`` (0.25 s) per try; the stream leader (``STREAM.INFO``) is
  SIGKILLed while it publishes.  Figure: median time from the kill to the first
  PubAck of a publish sent after it.  The killed node is restarted and the
  stream must report three current replicas again before the next round.
* **catch-up** -- a follower is SIGKILLed, ``--catchup-msgs`` (20,000) are
  published (C client, async) to the two others, and the follower is restarted.
  Figure: seconds from the restart command until the follower's own ``/jsz``
  (its local store) holds every message; also from its ports file (process
  ready) to caught up.  ``--trijet-journal-entries-max`` lowers trijet's stream
  journal bound (``jetstream.raft_journal_entries_max``) so the follower comes
  back behind the leader's state snapshot and catches up by streaming the
  leader's store (its ``/raftz`` catch-up counters are printed); by default the
  20,000 messages fit in the journal and it catches up from the log.

* **stepdown**, **quorum**, **timeline** -- ``bench/r3_failover.py``: the gap
  around a graceful leader stepdown, an R3 stream losing two replicas (answers,
  recovery, nothing acknowledged lost), and a PNG (``--png``) of the publish rate
  and the leader across one SIGKILL, both servers in one figure.

``ratio`` is trijet / reference; for the failover gap and catch-up lower is
better.  The machine is shared (2 cores): the 1-minute load average is printed
per phase; repeat and compare medians.  ``--servers`` also takes
``trijet=DIR``: trijet from another checkout (A/B in one run), and a
``+overlap`` suffix (``trijet+overlap``) turns on
``jetstream { raft_leader_write_overlap: true }`` (``raft.driver``), and a
``+interval`` suffix (``trijet+interval``, ``--sync default`` only) runs trijet
at ``jetstream { sync_interval: 2m }``, the reference's default: the stream
journal's appends are written but fsynced only on the interval, as the
reference's are -- equal durability with the reference's default.

Run: ``python -m bench.r3_bench [--quick]`` (see ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS

import tests.support.servers as support_servers
from bench.common import CLK_TCK, OUT_DIR, build_loadgen, comma_list
from bench.core_bench import finish
from tests.support.cluster import Cluster, get_json, start_cluster

STREAM = "BENCH"
SUBJECT = "bench.r3"
API_TIMEOUT_S = 10.0
FAILOVER_S_MAX = 60.0
CATCHUP_S_MAX = 120.0
POLL_S = 0.02
SUFFIXES = ("+interval", "+overlap")
"""Server-name suffixes of a trijet run (see the module doc)."""
"""Interval of the bench's polls of /jsz and STREAM.INFO (real servers, bounded deadlines)."""
NO_RESPONDERS_PAUSE_S = 0.02


@dataclass
class Run:
    """One server's figures in one sync mode."""

    server: str
    sync: str
    figures: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    na: str = ""


# -- helpers -------------------------------------------------------------------------


async def _quiet(*_: Any) -> None:
    return None


async def api(nc: NATS, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(body or {}).encode(), timeout=API_TIMEOUT_S)
    doc = json.loads(msg.data)
    return doc if isinstance(doc, dict) else {"error": {"description": "not an object"}}


async def stream_info(nc: NATS) -> dict[str, Any]:
    return await api(nc, f"$JS.API.STREAM.INFO.{STREAM}")


def local_msgs(c: Cluster, i: int) -> int | None:
    """How many messages node ``i`` holds in its own store (``/jsz``)."""
    doc = get_json(f"{c.monitoring_urls[i]}/jsz?streams=true")
    for acc in (doc or {}).get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s.get("name") == STREAM:
                return int(s["state"]["messages"])
    return None


async def wait_healthy(nc: NATS, within_s: float = 30.0) -> dict[str, Any]:
    """STREAM.INFO until a leader and two current replicas are reported."""
    deadline = time.monotonic() + within_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            last = await stream_info(nc)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            await asyncio.sleep(POLL_S)
            continue
        cl = last.get("cluster") or {}
        reps = cl.get("replicas") or []
        if cl.get("leader") and len(reps) == 2 and all(r.get("current") for r in reps):
            return last
        await asyncio.sleep(POLL_S)
    raise RuntimeError(f"stream not healthy within {within_s}s: {last.get('cluster')}")


def node_cpu_s(c: Cluster) -> list[float]:
    """User+system CPU seconds of each node so far (all threads; 0 for a dead one)."""
    out: list[float] = []
    for p in c.procs:
        cpu = 0.0
        if p is not None and p.alive():
            with open(f"/proc/{p.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        out.append(cpu)
    return out


def cluster_cpu_s(c: Cluster) -> float:
    """User+system CPU seconds of every live node so far (all threads)."""
    return sum(node_cpu_s(c))


def load1() -> float:
    return os.getloadavg()[0]


# -- publish phases ----------------------------------------------------------------


async def py_publish(url: str, n: int, window: int, size: int) -> dict[str, Any]:
    """nats-py: ``n`` publishes, ``window`` in flight; every reply a PubAck."""
    nc = await nats.connect(url, error_cb=_quiet)
    js = nc.jetstream(timeout=API_TIMEOUT_S)
    payload = b"x" * size
    errors: list[str] = []
    seqs: list[int] = []
    try:
        t0 = time.perf_counter()
        if window <= 1:
            for _ in range(n):
                ack = await js.publish(SUBJECT, payload)
                seqs.append(ack.seq)
        else:
            sem = asyncio.Semaphore(window)

            async def one() -> None:
                try:
                    ack = await js.publish(SUBJECT, payload)
                    seqs.append(ack.seq)
                except Exception as exc:  # counted, reported
                    errors.append(repr(exc))
                finally:
                    sem.release()

            tasks = []
            for _ in range(n):
                await sem.acquire()
                tasks.append(asyncio.ensure_future(one()))
            await asyncio.gather(*tasks)
        el = time.perf_counter() - t0
    finally:
        await nc.close()
    return {
        "ok": not errors and len(seqs) == n,
        "elapsed_s": el,
        "rate": n / el,
        "errors": errors[:3],
    }


def c_publish(loadgen: list[str], port: int, n: int, window: int, size: int) -> dict[str, Any]:
    cmd = [*loadgen, "jspub", "-H", "127.0.0.1", "-P", str(port), "-s", SUBJECT]
    cmd += ["-n", str(n), "-z", str(size), "-k", str(window), "-t", "20"]
    res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), max(120.0, n / 50))
    res["rate"] = float(res.get("rps", 0.0))
    return res


async def phase_publish(c: Cluster, run: Run, args: argparse.Namespace) -> None:
    nc = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        info = await wait_healthy(nc)
        leader = info["cluster"]["leader"]
        li = c.index(leader)
        target = li if args.connect == "leader" else (li + 1) % len(c.names)
        for client in args.clients:
            for mode in ("sync", "async"):
                n = args.sync_msgs if mode == "sync" else args.async_msgs
                window = 1 if mode == "sync" else args.window
                before = int(((await stream_info(nc)).get("state") or {}).get("last_seq", 0))
                load = load1()
                cpu0 = node_cpu_s(c)
                if client == "py":
                    res = await py_publish(c.urls[target], n, window, args.size)
                else:
                    res = await asyncio.to_thread(
                        c_publish, args.loadgen, c.specs[target].client_port, n, window, args.size
                    )
                per_node = [(b - a) / n * 1e6 for a, b in zip(cpu0, node_cpu_s(c), strict=True)]
                cpu_us = sum(per_node)
                # the leader first, then the followers
                split = "/".join(
                    f"{per_node[i]:.0f}"
                    for i in [li] + [j for j in range(len(per_node)) if j != li]
                )
                after = int(((await stream_info(nc)).get("state") or {}).get("last_seq", 0))
                key = f"{client}_{mode}"
                ok = bool(res.get("ok")) and after - before == n
                if not ok:
                    run.notes.append(f"{key}: ok={res.get('ok')} stored={after - before}/{n} {res}")
                else:
                    run.figures[key] = res["rate"]
                lat = res.get("lat_us") or {}
                run.details[key] = res
                run.details[key + "_cpu_us"] = cpu_us
                run.details[key + "_cpu_us_nodes"] = split
                print(
                    f"  {run.server} {key:9} n={n} window={window}: {res['rate']:,.0f} msgs/s"
                    + (f" p50={lat['p50']:.0f}us p99={lat['p99']:.0f}us" if lat else "")
                    + f" cpu(3 nodes)={cpu_us:.0f}us/msg (leader/followers {split})"
                    + f" load={load:.2f}{'' if ok else ' FAILED'}",
                    flush=True,
                )
    finally:
        await nc.close()


# -- failover and catch-up -----------------------------------------------------------


async def one_failover(c: Cluster, rnd: int, args: argparse.Namespace) -> dict[str, Any]:
    ncl = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        leader = (await wait_healthy(ncl))["cluster"]["leader"]
    finally:
        await ncl.close()
    li = c.index(leader)
    si = next(i for i in c.live_indexes() if i != li)
    nc = await nats.connect(c.urls[si], allow_reconnect=False, error_cb=_quiet)
    js = nc.jetstream(timeout=args.try_timeout)
    killed = asyncio.Event()
    kill_at = 0.0
    first_ok: float | None = None
    tries = 0

    async def publisher() -> None:
        nonlocal first_ok, tries
        i = 0
        while first_ok is None:
            i += 1
            sent = time.monotonic()
            try:
                await js.publish(SUBJECT, b"f", headers={"Nats-Msg-Id": f"f{rnd}-{i}"})
            except nats.errors.TimeoutError:
                tries += killed.is_set()
                continue
            except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError):
                tries += killed.is_set()
                await asyncio.sleep(NO_RESPONDERS_PAUSE_S)
                continue
            if killed.is_set() and sent >= kill_at:
                first_ok = time.monotonic()
            if time.monotonic() - kill_at > FAILOVER_S_MAX and killed.is_set():
                raise RuntimeError("no publish succeeded after the kill")

    try:
        task = asyncio.ensure_future(publisher())
        await asyncio.sleep(args.failover_lead_s)  # publishing before the kill (load, not a wait)
        kill_at = time.monotonic()
        c.kill(li)
        killed.set()
        await asyncio.wait_for(task, FAILOVER_S_MAX)
    finally:
        await nc.close()
    assert first_ok is not None
    await asyncio.to_thread(c.restart, li)
    return {"s": first_ok - kill_at, "killed": leader, "tries": tries}


async def phase_failover(c: Cluster, run: Run, args: argparse.Namespace) -> None:
    rounds = []
    for rnd in range(args.rounds):
        r = await one_failover(c, rnd, args)
        rounds.append(r)
        print(
            f"  {run.server} failover {rnd}: {r['s']:.3f}s (killed {r['killed']},"
            f" {r['tries']} failed tries, load={load1():.2f})",
            flush=True,
        )
    run.details["failover"] = rounds
    if rounds:
        run.figures["failover_s"] = statistics.median(r["s"] for r in rounds)


async def phase_catchup(c: Cluster, run: Run, args: argparse.Namespace) -> None:
    nc = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        info = await wait_healthy(nc)
    finally:
        await nc.close()
    leader = info["cluster"]["leader"]
    li = c.index(leader)
    fi = (li + 1) % len(c.names)
    c.kill(fi)
    res = await asyncio.to_thread(
        c_publish, args.loadgen, c.specs[li].client_port, args.catchup_msgs, args.window, args.size
    )
    if not res.get("ok"):
        run.notes.append(f"catchup fill failed: {res}")
        return
    total = local_msgs(c, li)
    t0 = time.monotonic()
    await asyncio.to_thread(c.restart, fi, wait=False)
    t_ready = time.monotonic()
    deadline = t0 + CATCHUP_S_MAX
    while local_msgs(c, fi) != total:
        if time.monotonic() > deadline:
            states = [local_msgs(c, i) for i in range(len(c.names))]
            run.notes.append(
                f"catch-up: {c.names[fi]} not current within {CATCHUP_S_MAX}s:"
                f" {total} expected, local counts {states}"
            )
            return
        await asyncio.sleep(POLL_S)
    t1 = time.monotonic()
    run.figures["catchup_s"] = t1 - t0
    run.figures["catchup_from_ready_s"] = t1 - t_ready
    if run.server != "ref":
        doc = get_json(f"{c.monitoring_urls[fi]}/raftz?acc=$G") or {}
        for g in (doc.get("$G") or {}).values():
            cu = g.get("catchup") or {}
            print(
                f"  {run.server} follower catch-up path: snapshots_installed="
                f"{g.get('snapshots_installed')} store_batches={cu.get('batches')}"
                f" store_msgs={cu.get('msgs')}",
                flush=True,
            )
    print(
        f"  {run.server} catch-up of {args.catchup_msgs} msgs ({total} held): {t1 - t0:.2f}s"
        f" from restart, {t1 - t_ready:.2f}s from ready (load={load1():.2f})",
        flush=True,
    )


# -- one server ----------------------------------------------------------------------


@contextmanager
def trijet_from(path: str | None) -> Any:
    """Run trijet from checkout ``path`` (A/B) while the context is open."""
    if path is None:
        yield
        return
    saved = support_servers.REPO_ROOT
    support_servers.REPO_ROOT = Path(path).resolve()
    try:
        yield
    finally:
        support_servers.REPO_ROOT = saved


async def run_phases(c: Cluster, run: Run, args: argparse.Namespace) -> None:
    nc = await nats.connect(c.urls[0], error_cb=_quiet)
    try:
        cfg = {"name": STREAM, "subjects": ["bench.>"], "storage": "file", "num_replicas": 3}
        doc = await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        if "error" in doc:
            run.na = f"n/a (create: {doc['error']})"
            return
    finally:
        await nc.close()
    if "publish" in args.phases:
        await phase_publish(c, run, args)
    if "failover" in args.phases:
        await phase_failover(c, run, args)
    if "catchup" in args.phases:
        await phase_catchup(c, run, args)
    if {"stepdown", "quorum", "timeline"} & set(args.phases):
        from bench import r3_failover as fo

        for name in ("stepdown", "quorum", "timeline"):
            if name in args.phases:
                await getattr(fo, f"phase_{name}")(c, run, args)


def run_server(name: str, sync: str, args: argparse.Namespace) -> Run:
    run = Run(name, sync)
    kind = "reference" if name == "ref" else "trijet"
    path = name.split("=", 1)[1] if "=" in name else None
    # ``trijet+overlap``, ``trijet=DIR+overlap``: jetstream.raft_leader_write_overlap on;
    # ``+interval``: sync_interval 2m (the reference's default)
    suffixes = set()
    while kind == "trijet" and name.endswith(SUFFIXES):
        suffix = next(x for x in SUFFIXES if name.endswith(x))
        suffixes.add(suffix)
        name = name.removesuffix(suffix)
        if path is not None:
            path = path.removesuffix(suffix)
    overlap = "+overlap" in suffixes
    interval = "+interval" in suffixes
    if interval and sync == "always":
        run.na = "n/a (+interval is for --sync default)"
        print(f"{run.server}: {run.na}", flush=True)
        return run
    tag = "".join(ch if ch.isalnum() else "_" for ch in name)
    workdir = Path(tempfile.mkdtemp(prefix=f"r3-{tag}-{sync}-", dir=args.store_parent))
    c: Cluster | None = None
    try:
        with trijet_from(path):
            js_conf = ""
            if kind == "trijet" and args.trijet_journal_entries_max:
                js_conf = f"  raft_journal_entries_max: {args.trijet_journal_entries_max}"
            if overlap:
                js_conf += "\n  raft_leader_write_overlap: true"
            if interval:
                js_conf += "\n  sync_interval: 2m"
            c = start_cluster(
                kind, sync_always=(sync == "always"), workdir=workdir, jetstream_conf=js_conf
            )
            asyncio.run(run_phases(c, run, args))
    except Exception as exc:  # a server that cannot do it gets n/a, the run goes on
        run.na = run.na or f"n/a ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    finally:
        if c is not None:
            c.stop()
        if args.keep:
            print(f"  {run.server} logs and stores kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if run.na:
        print(f"{run.server}: {run.na}", flush=True)
    for note in run.notes:
        print(f"  note {run.server}: {note}", flush=True)
    return run


# -- report --------------------------------------------------------------------------


def metrics(args: argparse.Namespace) -> list[tuple[str, str, bool]]:
    out = []
    for client in args.clients:
        out.append((f"{client}_sync", f"{client} sync publish msgs/s", True))
        out.append((f"{client}_async", f"{client} async ({args.window}) msgs/s", True))
    out.append(("failover_s", "failover gap s, median", False))
    out.append(("catchup_s", f"catch-up of {args.catchup_msgs} s", False))
    out.append(("catchup_from_ready_s", "  from process ready, s", False))
    out.append(("stepdown_s", "stepdown gap s, median", False))
    out.append(("quorum_answer_s", "2 replicas lost: answer s", False))
    out.append(("quorum_recover_s", "  serving again after restart s", False))
    out.append(("quorum_lost", "  acked msgs lost", False))
    out.append(("timeline_gap_s", "timeline: kill to PubAck s", False))
    return out


TARGETS = {("always", "sync"): 1.0, ("always", "async"): 0.5}
#: absolute targets for trijet (issue 13), lower is better: failover and stepdown gaps,
#: catch-up of a follower 100k messages behind, acknowledged messages lost without quorum
LIMITS = {"failover_s": 1.5, "stepdown_s": 0.3, "catchup_s": 2.0, "quorum_lost": 0.0}
TARGETS.update({("default", "sync"): 0.5, ("default", "async"): 0.3})


def fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def report(runs: list[Run], args: argparse.Namespace) -> list[dict[str, Any]]:
    tj_names = [s for s in args.servers if s != "ref"]
    rows = []
    print()
    head = f"{'metric':30} {'sync':7} {'ref':>10}"
    for t in tj_names:
        head += f" {t[-16:]:>16} {'ratio':>6}"
    print(head)
    for sync in args.syncs:
        by = {r.server: r for r in runs if r.sync == sync}
        for key, label, higher in metrics(args):
            ref = by["ref"].figures.get(key) if "ref" in by else None
            line = f"{label:30} {sync:7} {fmt(ref):>10}"
            for t in tj_names:
                tj = by[t].figures.get(key) if t in by else None
                ratio = tj / ref if tj is not None and ref else None
                rows.append(
                    {
                        "metric": key,
                        "sync": sync,
                        "server": t,
                        "ref": ref,
                        "trijet": tj,
                        "ratio": ratio,
                    }
                )
                line += f" {fmt(tj):>16} {'n/a' if ratio is None else f'{ratio:.2f}':>6}"
            print(line + ("" if higher else "  lower=better"))
    for row in rows:
        mode = row["metric"].rsplit("_", 1)[-1]
        target = TARGETS.get((row["sync"], mode))
        rtxt = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
        verdict = ""
        if target is not None:
            met = row["ratio"] is not None and row["ratio"] >= target
            verdict = f" target>={target}: {'met' if met else 'NOT met'}"
        print(
            f"r3_{row['metric']}[{row['sync']}] {row['server']}: trijet={fmt(row['trijet'])}"
            f" ref={fmt(row['ref'])} ratio={rtxt}{verdict}"
        )
    for row in rows:
        limit = LIMITS.get(row["metric"])
        if limit is None or row["trijet"] is None:
            continue
        if row["metric"] == "catchup_s" and args.catchup_msgs < 100_000:
            continue  # the 2 s target is for 100k messages behind
        by = row["trijet"] - limit
        verdict = "met" if by <= 0 else f"NOT met, by {by:.3g}"
        print(f"r3_{row['metric']}[{row['sync']}] {row['server']}: target <= {limit:g}: {verdict}")
    return rows


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.r3_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--servers", default="ref,trijet", help="comma list: ref, trijet, trijet=DIR")
    p.add_argument("--sync", default="default,always", help="comma list of default, always")
    p.add_argument("--clients", default="py,c", help="comma list of py (nats-py), c (loadgen)")
    p.add_argument(
        "--phases",
        default="publish,failover,catchup",
        help="comma list of publish, failover, catchup, stepdown, quorum, timeline",
    )
    p.add_argument("--msgs", default="2000,20000", help="SYNC,ASYNC message counts")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--window", type=int, default=1000, help="async publishes in flight")
    p.add_argument("--connect", choices=("leader", "follower"), default="leader")
    p.add_argument("--rounds", type=int, default=5, help="leader kills (median reported)")
    p.add_argument("--try-timeout", type=float, default=0.25, help="failover: per-publish timeout")
    p.add_argument("--failover-lead-s", type=float, default=0.3, help="publishing before a kill")
    p.add_argument("--catchup-msgs", type=int, default=20000)
    p.add_argument("--quorum-s", type=float, default=3.0, help="quorum: seconds without quorum")
    p.add_argument("--png", default=str(OUT_DIR / "failover.png"), help="timeline: the PNG")
    p.add_argument(
        "--trijet-journal-entries-max",
        type=int,
        default=0,
        help="trijet's stream journal bound (0: its default); low: catch-up via the store",
    )
    p.add_argument("--quick", action="store_true", help="500,5000 msgs, 3 rounds, 5000 behind")
    p.add_argument("--store-parent", default=None, help="where the temp cluster dirs go")
    p.add_argument("--keep", action="store_true", help="keep logs and stores")
    p.add_argument("--json", default="", help="write all raw results to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.msgs, args.rounds, args.catchup_msgs = "500,5000", 3, 5000
    try:
        args.sync_msgs, args.async_msgs = (int(x) for x in comma_list(args.msgs))
    except ValueError:
        p.error("--msgs takes SYNC,ASYNC")
    args.servers = comma_list(args.servers)
    args.syncs = comma_list(args.sync)
    args.clients = comma_list(args.clients)
    args.phases = comma_list(args.phases)
    bad = [
        s
        for s in args.servers
        if s != "ref"
        and s.split("=", 1)[0].removesuffix("+interval").removesuffix("+overlap") != "trijet"
    ]
    bad += [s for s in args.syncs if s not in ("default", "always")]
    bad += [s for s in args.clients if s not in ("py", "c")]
    if bad:
        p.error(f"unknown server, sync mode or client: {', '.join(bad)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    args.loadgen = build_loadgen(False)
    if args.loadgen is None:
        if "c" in args.clients:
            args.clients.remove("c")
        if "catchup" in args.phases:
            sys.exit("r3_bench: catch-up needs the C load generator (gcc)")
    print(
        f"r3_bench: 3 nodes each, R3 file stream, {args.size} B; sync={args.sync_msgs}"
        f" async={args.async_msgs} (window {args.window}) clients={','.join(args.clients)}"
        f" connect={args.connect} rounds={args.rounds} catchup={args.catchup_msgs}"
    )
    runs = []
    for sync in args.syncs:
        for name in args.servers:
            print(f"[{sync}] {name}: starting (load {load1():.2f})", flush=True)
            runs.append(run_server(name, sync, args))
    rows = report(runs, args)
    if "timeline" in args.phases:
        from bench.r3_failover import plot_timeline

        print(f"r3_bench: timeline written to {plot_timeline(runs, Path(args.png))}")
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
