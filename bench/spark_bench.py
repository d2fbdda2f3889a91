"""The PySpark ``jetstream`` source and sink side by side: trijet against the reference nats-server.

Theory of operation: one local Spark session (``local[2]``, like the tests) serves both
servers.  For each server, started afresh with JetStream in a new temporary store directory
(the reference at its default ``sync_interval`` unless ``--ref-sync always``; trijet always
syncs before acking, so the sink phase favours the reference by default), an R1 file
stream ``BENCH`` (``bench.>``) is created and three phases run on it:

1. ``sink`` — ``spark.range(N)`` as ``--size``-byte payloads (distinct per row) with
   ``msg_id`` = the row number, written through ``df.write.format("jetstream")``: every PubAck
   awaited.  Afterwards the stream must hold exactly N messages.
2. ``source`` — ``spark.read.format("jetstream")…load().count()`` over the same N messages
   (``--min-partitions``/``--partition-size`` tasks); the count must be N.
3. ``fetch`` — the plain nats-py baseline: one ephemeral ``ack_policy=none`` pull consumer,
   ``fetch(--fetch-batch)`` until N messages, in this process.  The source's own overhead is
   ``source`` / ``fetch`` on the same server (the source runs ``local[2]`` tasks in parallel,
   so it can exceed 1).

Before the timed phases, ``--warmup`` rows (5,000) are written and read on a stream ``WARM``,
so the JVM's JIT and Spark's Python workers are warm for whichever server runs first.

Rates are rows per wall-clock second of the phase.  Because the machine is shared, the CPU
microseconds per row are printed too, for the server and for the client side (this process
and its descendants — Spark's JVM and Python workers — for sink and source; this process for
the fetch loop; measured from ``/proc``).  The order of the servers alternates between
``--repeat`` repetitions; figures are medians.

Run: ``python -m bench.spark_bench [--messages 1000000]`` (see ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    CLK_TCK,
    OUT_DIR,
    REPO_DIR,
    ServerProc,
    comma_list,
    find_nats_server,
    launch,
    safe_name,
    stop_server,
)

PHASES = ("sink", "source", "fetch")


def client_cpu_s(exclude: int) -> float:
    """CPU seconds (user+system, with reaped children) of this process and all its
    descendants — the JVM and Spark's Python workers — except the server ``exclude``."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parent[pid] = int(f[1])
        cpu[pid] = sum(int(x) for x in f[11:15]) / CLK_TCK
    me, total = os.getpid(), 0.0
    for pid, c in cpu.items():
        p, seen = pid, 0
        while p not in (0, 1, me, exclude) and seen < 64:  # bounded walk up the tree
            p, seen = parent.get(p, 0), seen + 1
        if p == me and pid != exclude:
            total += c
    return total


TARGET_SOURCE_ROWS_S = 200_000
TARGET_RATIO = 0.5


def start(name: str, args: argparse.Namespace) -> tuple[ServerProc, str]:
    """Start ``ref``, ``trijet`` or ``trijet=DIR`` (trijet run from the
    checkout ``DIR``: A/B runs); returns the process and its store dir."""
    ports_dir = tempfile.mkdtemp(prefix=f"spark_bench_{safe_name(name)}_")
    store = tempfile.mkdtemp(prefix=f"spark_bench_store_{safe_name(name)}_")
    cwd = Path(name.split("=", 1)[1]) if name.startswith("trijet=") else REPO_DIR
    base = ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", ports_dir]
    if name == "ref":
        conf = os.path.join(ports_dir, "ref.conf")
        with open(conf, "w") as fh:
            sync = "  sync_interval: always\n" if args.ref_sync == "always" else ""
            fh.write(f'jetstream {{\n  store_dir: "{store}"\n{sync}}}\n')
        cmd = [args.nats_server, "-c", conf, *base]
    else:
        cmd = [*shlex.split(args.trijet_prefix), sys.executable, "-m", "node", "-js", "-sd", store]
        cmd += base
    OUT_DIR.mkdir(exist_ok=True)
    sp, _ = launch(
        name, cmd, cwd, ports_dir, OUT_DIR / f"spark-{safe_name(name)}.log", "spark_bench"
    )
    return sp, store


async def _create(url: str, name: str = "BENCH", subject: str = "bench.>") -> None:
    import nats

    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(name=name, subjects=[subject])
    finally:
        await nc.close()


async def _state(url: str) -> Any:
    import nats

    nc = await nats.connect(url)
    try:
        return (await nc.jetstream().stream_info("BENCH")).state
    finally:
        await nc.close()


async def _fetch_all(url: str, n: int, batch: int) -> int:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        cfg = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
        psub = await js.pull_subscribe("bench.>", stream="BENCH", config=cfg)
        got = 0
        while got < n:
            msgs = await psub.fetch(min(batch, n - got), timeout=10)
            got += len(msgs)
        await psub.unsubscribe()
        return got
    finally:
        await nc.close()


def session(args: argparse.Namespace) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    client = Path(args.pipeline).resolve() if args.pipeline else REPO_DIR
    os.environ["PYTHONPATH"] = str(client) + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(0, str(client))
    from pyspark.sql import SparkSession

    from pipeline.jetstream import JetStreamDataSource

    spark = (
        SparkSession.builder.master(args.master)
        .appName("spark_bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(JetStreamDataSource)
    # the pipeline the Python workers import (an A/B of client code must show it)
    where = spark.sparkContext.parallelize([0], 1).map(lambda _: _pipeline_file()).collect()
    print(f"pipeline: driver {sys.modules['pipeline'].__file__}, workers {where[0]}", flush=True)
    return spark


def _pipeline_file() -> str:
    import pipeline

    return str(pipeline.__file__)


def _client_delta(sp: ServerProc, before: float) -> tuple[float, float]:
    now = client_cpu_s(sp.proc.pid)
    return now, now - before


def run_server(spark: Any, name: str, args: argparse.Namespace) -> dict[str, float]:
    load0 = os.getloadavg()[0]
    sp, store = start(name, args)
    url = f"nats://127.0.0.1:{sp.port}"
    n, out = args.messages, {}
    try:
        asyncio.run(_create(url))
        if args.warmup:
            # the same queries on a small stream first: JIT, Python workers and the server's
            # first requests are warm for whichever server runs first
            asyncio.run(_create(url, "WARM", "warm.>"))
            spark.range(0, args.warmup, numPartitions=args.write_partitions).selectExpr(
                "'warm.x' AS subject", "CAST(id AS STRING) AS data", "CAST(id AS STRING) AS msg_id"
            ).write.format("jetstream").mode("append").option("servers", url).save()
            spark.read.format("jetstream").option("servers", url).option(
                "stream", "WARM"
            ).load().count()
        hex_chars = args.size * 2
        rows = spark.range(0, n, numPartitions=args.write_partitions).selectExpr(
            "'bench.x' AS subject",
            f"unhex(lpad(hex(id), {hex_chars}, '0')) AS data",
            "CAST(id AS STRING) AS msg_id",
        )
        me = client_cpu_s(sp.proc.pid)
        cpu0, t0 = sp.cpu_s(), time.perf_counter()
        rows.write.format("jetstream").mode("append").option("servers", url).save()
        out["sink"], out["sink_cpu"] = n / (time.perf_counter() - t0), sp.cpu_s() - cpu0
        me, out["sink_client_cpu"] = _client_delta(sp, me)
        st = asyncio.run(_state(url))
        if st.messages != n:
            raise SystemExit(
                f"spark_bench: {name} holds {st.messages} messages after the sink, not {n}"
            )
        reader = (
            spark.read.format("jetstream")
            .option("servers", url)
            .option("stream", "BENCH")
            .option("minPartitions", str(args.min_partitions))
            .option("maxMessagesPerPartition", str(args.partition_size))
            .option("fetchBatch", str(args.fetch_batch))
        )
        me = client_cpu_s(sp.proc.pid)
        cpu0, t0 = sp.cpu_s(), time.perf_counter()
        got = reader.load().count()
        out["source"], out["source_cpu"] = n / (time.perf_counter() - t0), sp.cpu_s() - cpu0
        me, out["source_client_cpu"] = _client_delta(sp, me)
        if got != n:
            raise SystemExit(f"spark_bench: {name}: the source counted {got}, not {n}")
        if args.no_fetch:
            out["fetch"] = out["fetch_cpu"] = out["fetch_client_cpu"] = float("nan")
        else:
            cpu0, t0 = sp.cpu_s(), time.perf_counter()
            got = asyncio.run(_fetch_all(url, n, args.fetch_batch))
            out["fetch"], out["fetch_cpu"] = n / (time.perf_counter() - t0), sp.cpu_s() - cpu0
            me, out["fetch_client_cpu"] = _client_delta(sp, me)
            if got != n:
                raise SystemExit(f"spark_bench: {name}: the fetch loop got {got}, not {n}")
    finally:
        stop_server(sp)
        subprocess.run(["rm", "-rf", store], check=False)
    load = os.getloadavg()[0]
    per = {p: 1e6 / n for p in PHASES}
    print(
        f"  {name:7s} sink={out['sink']:9.0f}/s  source={out['source']:9.0f}/s  "
        f"fetch={out['fetch']:9.0f}/s  load={load0:.1f}->{load:.1f}\n"
        + "".join(
            f"           {p:6s} cpu us/row: server {out[p + '_cpu'] * per[p]:5.1f}  "
            f"client (Spark JVM + workers / fetch loop) {out[p + '_client_cpu'] * per[p]:5.1f}\n"
            for p in PHASES
        ),
        end="",
        flush=True,
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--warmup", type=int, default=5000, help="rows written and read first, untimed (0: none)"
    )
    p.add_argument("--servers", default="trijet,ref", help="comma list of trijet, ref")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--min-partitions", type=int, default=2)
    p.add_argument("--partition-size", type=int, default=250_000, help="maxMessagesPerPartition")
    p.add_argument("--write-partitions", type=int, default=2)
    p.add_argument("--fetch-batch", type=int, default=4096)
    p.add_argument(
        "--ref-sync",
        choices=("default", "always"),
        default="default",
        help="the reference's sync_interval (trijet always syncs before acking)",
    )
    p.add_argument("--trijet-prefix", default="", help="e.g. 'taskset -c 1'")
    p.add_argument("--json", help="write every figure here")
    p.add_argument(
        "--pipeline",
        default="",
        help="the checkout whose pipeline package Spark's driver and workers import "
        "(default this one: A/B runs of the client code)",
    )
    p.add_argument("--no-fetch", action="store_true", help="skip the nats-py fetch loop phase")
    args = p.parse_args()
    args.nats_server = find_nats_server()
    servers = comma_list(args.servers)
    if args.size < 8:
        raise SystemExit("spark_bench: --size must be >= 8 (payloads carry the row number)")
    print(
        f"spark_bench: {args.messages} x {args.size} B, {args.master}, servers={servers}",
        flush=True,
    )
    spark = session(args)
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in servers}
    try:
        for rep in range(args.repeat):
            order = servers if rep % 2 == 0 else servers[::-1]
            print(f"repetition {rep + 1}/{args.repeat}", flush=True)
            for name in order:
                runs[name].append(run_server(spark, name, args))
    finally:
        spark.stop()
    med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in runs.items()}
    for phase in PHASES:
        line = "  ".join(f"{s}={med[s][phase]:.0f}" for s in servers)
        ratio = ""
        if "trijet" in med and "ref" in med:
            ratio = f"  ratio={med['trijet'][phase] / med['ref'][phase]:.2f}"
        print(f"{phase}_rows_s: {line}{ratio}")
    for s in servers:
        print(
            f"source/fetch overhead {s}: {med[s]['source'] / med[s]['fetch']:.2f}x of the fetch loop"
        )
    if "trijet" in med:
        src = med["trijet"]["source"]
        met = "met" if src >= TARGET_SOURCE_ROWS_S else "NOT met"
        print(f"target source >= {TARGET_SOURCE_ROWS_S} rows/s on trijet: {met} ({src:.0f})")
    if "trijet" in med and "ref" in med:
        r = med["trijet"]["source"] / med["ref"]["source"]
        print(
            f"target source ratio >= {TARGET_RATIO}: {'met' if r >= TARGET_RATIO else 'NOT met'} ({r:.2f})"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "runs": runs, "median": med}, indent=1)
        )


if __name__ == "__main__":
    main()
