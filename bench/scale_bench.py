"""Costs that grow with the data: trijet against nats-server at two stream sizes.

Theory of operation: for every stream size in ``--sizes`` (default 10k and
1M messages of ``--size`` bytes) and every server, a fresh single server with
JetStream on file storage gets an R1 stream ``BENCH`` on ``bench.>``,
filled with the C ``jspub`` load generator (every PubAck checked; nats-py
without a C compiler).  The reference runs at its default ``sync_interval``:
neither figure depends on fsync (a SIGKILL loses nothing the process wrote),
and at ``always`` the reference fills 1M messages at ~2k/s.  Then:

* ``pull`` (after ``sync(2)``, so neither server's fsyncs wait behind the
  kernel writing back the fill): the consumer real clients create — nats-py's ``pull_subscribe``,
  a durable with ``filter_subject`` set to the publish subject and explicit
  acks — fetches ``--consume`` messages from the start of the stream in
  batches of 100, acknowledging each.  The rate must not depend on the
  stream's size: with a per-pull cost in the messages remaining, the 1M
  figure collapses.
* ``cpull``: the same consumer as libnats users make it (``js_PullSubscribe``
  with a durable: filtered, explicit acks), ``natsSubscription_Fetch(100)`` and
  ``natsMsg_Ack`` on each (``bench/loadgen/jspull.c``, built against Debian's
  ``libnats-dev`` when it is installed; otherwise the phase is skipped).
* ``restart``: SIGKILL, then the time from starting the server again until a
  client has its first ``STREAM.INFO`` answer reporting every message, and
  the resident memory right after.
* ``kv``: a KV-shaped stream (``max_msgs_per_subject: 1``) holding one message
  on each of ``--kv-sizes`` distinct subjects (default 1k and 100k, nats-py
  async publishes): resident memory, then SIGKILL, restart time and memory.

Prints a table with the ratio trijet/reference per figure and size, writes
every figure as JSON and a PNG of each figure against the stream size for
both servers (``bench/out/scale_bench.{json,png}`` unless told otherwise).

Run: ``python -m bench.scale_bench [--sizes 10000,1000000] [--consume 20000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

import bench.common as bench_common
from bench.common import (
    OUT_DIR,
    ServerProc,
    build_loadgen,
    c_compiler,
    comma_list,
    compile_c,
    find_nats_server,
    kill_server,
    safe_name,
    start_js_server,
    stop_server,
)

STREAM = "BENCH"
SUBJECT = "bench.js"
API_TIMEOUT_S = 10.0
RESTART_S_MAX = 120.0
BATCH = 100


def start(name: str, store_dir: str, args: argparse.Namespace, tag: str) -> ServerProc:
    """Start ``ref`` (at its default ``sync_interval``) or ``trijet`` over ``store_dir``."""
    log_path = OUT_DIR / f"scale-{safe_name(name)}-{tag}.log"
    js = start_js_server(
        name, store_dir, log_path, "scale_bench", nats_server=args.nats_server, ref_sync="default"
    )
    return js.proc


kill = kill_server


def build_jspull() -> list[str] | None:
    """Compile ``bench/loadgen/jspull.c`` against libnats (None without it or a compiler)."""
    cc = c_compiler()
    if cc is None or not Path("/usr/include/nats/nats.h").exists():
        return None
    src = Path(__file__).resolve().parent / "loadgen" / "jspull.c"
    exe, cmd, err = compile_c(cc, src, "jspull", ["-lnats"])
    if err is not None:
        print(f"scale_bench: {' '.join(cmd)} failed, no libnats figure:\n{err}")
        return None
    return [str(exe)]


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(body or {}).encode(), timeout=API_TIMEOUT_S)
    doc: dict[str, Any] = json.loads(msg.data)
    return doc


async def create_stream(port: int) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        cfg = {"name": STREAM, "subjects": ["bench.>"], "storage": "file", "num_replicas": 1}
        doc = await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg)
        if "error" in doc:
            sys.exit(f"scale_bench: stream create failed: {doc['error']}")
    finally:
        await nc.close()


async def py_fill(port: int, n: int, size: int) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    payload = b"x" * size
    try:
        window = 2000
        for start in range(0, n, window):
            futs = [await js.publish_async(SUBJECT, payload) for _ in range(min(window, n - start))]
            await asyncio.gather(*futs)
    finally:
        await nc.close()


def fill(loadgen: list[str] | None, port: int, n: int, size: int) -> float:
    t0 = time.perf_counter()
    if loadgen is None:
        asyncio.run(py_fill(port, n, size))
    else:
        cmd = [*loadgen, "jspub", "-H", "127.0.0.1", "-P", str(port), "-s", SUBJECT]
        cmd += ["-n", str(n), "-z", str(size), "-k", "1000", "-t", "20"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=max(300.0, n / 2000))
        if res.returncode != 0:
            sys.exit(f"scale_bench: jspub failed: {res.stdout}{res.stderr}")
    return time.perf_counter() - t0


async def pull(port: int, consume: int) -> dict[str, Any]:
    """nats-py's pull_subscribe (filtered durable), fetch(100) + ack each."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    try:
        sub = await js.pull_subscribe(SUBJECT, durable="scale", stream=STREAM)
        got = 0
        t0 = time.perf_counter()
        while got < consume:
            msgs = await sub.fetch(min(BATCH, consume - got), timeout=API_TIMEOUT_S)
            for m in msgs:
                await m.ack()
            got += len(msgs)
        await nc.flush()
        secs = time.perf_counter() - t0
        return {"msgs": got, "secs": secs, "rate": got / secs}
    finally:
        await nc.close()


def c_pull(jspull: list[str], port: int, consume: int) -> dict[str, Any]:
    """libnats' js_PullSubscribe (filtered durable), fetch(100) + ack each."""
    cmd = [*jspull, "-P", str(port), "-s", SUBJECT, "-S", STREAM, "-d", "scale_c"]
    cmd += ["-n", str(consume), "-b", str(BATCH), "-t", str(API_TIMEOUT_S)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=max(120.0, consume / 200))
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    doc: dict[str, Any] = json.loads(lines[-1]) if lines else {"ok": False, "err": res.stderr}
    if not doc.get("ok"):
        sys.exit(f"scale_bench: jspull failed: {doc}")
    return doc


async def first_info(port: int, want: int, deadline: float) -> dict[str, Any]:
    while True:
        try:
            nc = await nats.connect(
                f"nats://127.0.0.1:{port}", connect_timeout=1, allow_reconnect=False
            )
        except Exception:  # not listening yet
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.005)
            continue
        try:
            while True:
                try:
                    doc = await api(nc, f"$JS.API.STREAM.INFO.{STREAM}")
                except Exception:  # JetStream not up yet
                    doc = {}
                msgs = doc.get("state", {}).get("messages")
                if msgs is not None and msgs >= want:
                    return doc
                if time.monotonic() > deadline:
                    raise TimeoutError(f"stream info after restart: {doc}")
                await asyncio.sleep(0.005)
        finally:
            await nc.close()


def restart(name: str, sp: ServerProc, store_dir: str, n: int, args: argparse.Namespace) -> dict:
    """SIGKILL, start again over the same store, time to the first full STREAM.INFO."""
    kill(sp)
    # nats-server writes its ports file only once its streams are restored:
    # at 10M on a loaded machine that takes longer than a plain start may
    bench_common.SERVER_START_S_MAX = max(bench_common.SERVER_START_S_MAX, RESTART_S_MAX)
    t0 = time.perf_counter()
    sp2 = start(name, store_dir, args, f"{n}-restart")
    try:
        asyncio.run(first_info(sp2.port, n, time.monotonic() + RESTART_S_MAX))
        secs = time.perf_counter() - t0
        return {"secs": secs, "rss_mb": rss_mb(sp2.proc.pid)}
    finally:
        stop_server(sp2)


_DIRECT_FILL = r"""
import os, sys, time
from store.file import FileStreamStore
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
st = FileStreamStore(d)
payload = b"x" * size
base = st.state().last_seq
for i in range(n - base):
    st.append("bench.js", b"", payload, time.time_ns())
    if i % 50000 == 49999:
        st.sync()
st.sync()
os._exit(0)  # as a crash after the last sync: no close, no index of the active segment
"""


def direct_fill(name: str, store_dir: str, n: int, size: int) -> float:
    """trijet only: append to the stream's file store directly (the server
    stopped), then leave it as a crash would -- the fill of 10M messages
    through the server takes longer than the figure is worth."""
    t0 = time.perf_counter()
    cwd = Path(name.split("=", 1)[1]).resolve() if "=" in name else Path.cwd()
    # <store>/jetstream/<account>/streams/<stream>/msgs (older: no account level)
    found = sorted(Path(store_dir).glob(f"jetstream/*/streams/{STREAM}/msgs"))
    msgs = found[0] if found else Path(store_dir) / "jetstream" / "streams" / STREAM / "msgs"
    if not msgs.is_dir():
        sys.exit(f"scale_bench: no stream store at {msgs}")
    env = dict(os.environ, PYTHONPATH=str(cwd))
    cmd = [sys.executable, "-c", _DIRECT_FILL, str(msgs), str(n), str(size)]
    subprocess.run(cmd, check=True, cwd=cwd, env=env, timeout=max(600.0, n / 5000))
    return time.perf_counter() - t0


def run_one(name: str, n: int, loadgen: list[str] | None, args: argparse.Namespace) -> dict:
    store_dir = tempfile.mkdtemp(prefix=f"scale_store_{safe_name(name)}_", dir=args.store_parent)
    out: dict[str, Any] = {"server": name, "size": n}
    sp = start(name, store_dir, args, str(n))
    try:
        asyncio.run(create_stream(sp.port))
        if n >= args.direct_fill_from and name.startswith("trijet"):
            stop_server(sp)
            out["fill_s"] = direct_fill(name, store_dir, n, args.size)
            out["fill"] = "direct"
            sp = start(name, store_dir, args, f"{n}-filled")
            asyncio.run(first_info(sp.port, n, time.monotonic() + RESTART_S_MAX))
        else:
            out["fill_s"] = fill(loadgen, sp.port, n, args.size)
        # the fill's dirty pages written back first: an fsync timed behind the
        # kernel's writeback of the whole fill says nothing about the consumer
        os.sync()
        if "pull" in args.phases:
            out["pull"] = asyncio.run(pull(sp.port, min(args.consume, n)))
        if "cpull" in args.phases and args.jspull is not None:
            out["cpull"] = c_pull(args.jspull, sp.port, min(args.consume, n))
        if "restart" in args.phases:
            out["restart"] = restart(name, sp, store_dir, n, args)
        else:
            stop_server(sp)
    except BaseException:
        kill(sp)
        raise
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    return out


async def kv_fill(port: int, k: int, size: int) -> None:
    """A KV-shaped stream: one message on each of ``k`` distinct subjects."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    try:
        cfg = {
            "name": "KV",
            "subjects": ["kv.>"],
            "storage": "file",
            "max_msgs_per_subject": 1,
            "num_replicas": 1,
        }
        doc = await api(nc, "$JS.API.STREAM.CREATE.KV", cfg)
        if "error" in doc:
            sys.exit(f"scale_bench: KV stream create failed: {doc['error']}")
        payload = b"v" * size
        window = 1000
        for start in range(0, k, window):
            futs = [
                await js.publish_async(f"kv.key.{i}", payload)
                for i in range(start, min(k, start + window))
            ]
            await asyncio.gather(*futs)
    finally:
        await nc.close()


async def kv_ready(port: int, k: int) -> None:
    deadline = time.monotonic() + RESTART_S_MAX
    nc = None
    while nc is None:
        try:
            nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        except Exception:  # not listening yet
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.005)
    try:
        while True:
            try:
                doc = await api(nc, "$JS.API.STREAM.INFO.KV")
            except Exception:  # JetStream not up yet
                doc = {}
            if doc.get("state", {}).get("messages", 0) >= k:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(doc)
            await asyncio.sleep(0.005)
    finally:
        await nc.close()


def run_kv(name: str, k: int, args: argparse.Namespace) -> dict:
    """RSS holding ``k`` distinct subjects, then SIGKILL and restart."""
    store_dir = tempfile.mkdtemp(prefix=f"scale_kv_{safe_name(name)}_", dir=args.store_parent)
    out: dict[str, Any] = {"server": name, "size": k, "kind": "kv"}
    sp = start(name, store_dir, args, f"kv{k}")
    try:
        asyncio.run(kv_fill(sp.port, k, args.size))
        out["kv"] = {"rss_mb": rss_mb(sp.proc.pid)}
        kill(sp)
        t0 = time.perf_counter()
        sp = start(name, store_dir, args, f"kv{k}-restart")
        asyncio.run(kv_ready(sp.port, k))
        out["kv"]["restart_s"] = time.perf_counter() - t0
        out["kv"]["restart_rss_mb"] = rss_mb(sp.proc.pid)
        stop_server(sp)
    except BaseException:
        kill(sp)
        raise
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    return out


FIGURES = [
    ("pull", "rate", "filtered pull fetch(100)+ack, msgs/s (nats-py)", True),
    ("cpull", "rate", "filtered pull fetch(100)+ack, msgs/s (libnats)", True),
    ("restart", "secs", "SIGKILL -> first full STREAM.INFO, s", False),
    ("restart", "rss_mb", "RSS after restart, MB", False),
    ("kv", "rss_mb", "RSS holding N distinct subjects, MB", False),
    ("kv", "restart_s", "N distinct subjects: restart to full INFO, s", False),
    ("kv", "restart_rss_mb", "N distinct subjects: RSS after restart, MB", False),
]


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    table = []
    for phase, key, label, _higher in FIGURES:
        if phase not in args.phases:
            continue
        for n in args.kv_sizes if phase == "kv" else args.sizes:
            vals = {r["server"]: r[phase][key] for r in rows if r["size"] == n and phase in r}
            ref, tri = vals.get("ref"), vals.get("trijet")
            ratio = tri / ref if ref and tri is not None else None
            table.append({"figure": label, "size": n, "ref": ref, "trijet": tri, "ratio": ratio})
    print()
    print(f"{'figure':48} {'msgs':>9} {'nats-server':>12} {'trijet':>12} {'ratio':>7}")
    for t in table:
        f = [
            f"{v:12.3f}" if isinstance(v, float) else f"{'-':>12}" for v in (t["ref"], t["trijet"])
        ]
        r = f"{t['ratio']:7.2f}" if t["ratio"] is not None else f"{'-':>7}"
        print(f"{t['figure']:48} {t['size']:>9} {f[0]} {f[1]} {r}")
    return table


def plot(rows: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scale_bench: matplotlib missing, no PNG")
        return
    figs = [f for f in FIGURES if f[0] in args.phases]
    ncols = min(4, len(figs))
    nrows = -(-len(figs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 4 * nrows), squeeze=False)
    for ax in axes.flat[len(figs) :]:
        ax.set_visible(False)
    for ax, (phase, key, label, _h) in zip(axes.flat, figs, strict=False):
        for server in args.servers:
            pts = sorted(
                (r["size"], r[phase][key]) for r in rows if r["server"] == server and phase in r
            )
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=server)
        ax.set_xscale("log")
        ax.set_xlabel("distinct subjects" if phase == "kv" else "messages in the stream")
        ax.set_title(label, fontsize=9)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"scale_bench: wrote {path}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.scale_bench", description=__doc__)
    p.add_argument("--sizes", default="10000,1000000", help="stream sizes (messages)")
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--consume", type=int, default=20_000, help="pull: messages fetched")
    p.add_argument("--servers", default="ref,trijet", help="comma list of ref, trijet")
    p.add_argument(
        "--phases", default="pull,cpull,restart,kv", help="comma list of pull, cpull, restart, kv"
    )
    p.add_argument("--kv-sizes", default="1000,100000", help="kv: distinct subjects")
    p.add_argument("--store-parent", default=None, help="where the temp store dirs go")
    p.add_argument("--python-loadgen", action="store_true", help="fill with nats-py")
    p.add_argument(
        "--direct-fill-from",
        type=int,
        default=5_000_000,
        help="trijet: streams this long are filled through the store, the server stopped",
    )
    p.add_argument("--json", default=str(OUT_DIR / "scale_bench.json"))
    p.add_argument("--png", default=str(OUT_DIR / "scale_bench.png"))
    args = p.parse_args(argv)
    args.sizes = [int(x) for x in comma_list(args.sizes)]
    args.servers = comma_list(args.servers)
    args.phases = comma_list(args.phases)
    args.kv_sizes = [int(x) for x in comma_list(args.kv_sizes)]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    args.nats_server = find_nats_server()
    loadgen = build_loadgen(args.python_loadgen)
    args.jspull = build_jspull() if "cpull" in args.phases else None
    if "cpull" in args.phases and args.jspull is None:
        print("scale_bench: no libnats (apt-get install libnats-dev): no cpull figure")
    rows = []
    for n in args.sizes if {"pull", "cpull", "restart"} & set(args.phases) else []:
        order = args.servers if len(rows) % 2 == 0 else list(reversed(args.servers))
        for name in order:
            print(f"scale_bench: {name}, {n} messages ...", flush=True)
            row = run_one(name, n, loadgen, args)
            print(f"  {json.dumps(row)}", flush=True)
            rows.append(row)
    if "kv" in args.phases:
        for k in args.kv_sizes:
            for name in args.servers:
                print(f"scale_bench: {name}, {k} distinct subjects ...", flush=True)
                row = run_kv(name, k, args)
                print(f"  {json.dumps(row)}", flush=True)
                rows.append(row)
    table = report(rows, args)
    Path(args.json).write_text(json.dumps({"rows": rows, "table": table}, indent=1))
    plot(rows, args, Path(args.png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
