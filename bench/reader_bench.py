"""The Spark source's reader without Spark: ``RangeReader`` + Arrow batches, trijet and nats-server.

Theory of operation: for each server (started afresh as ``spark_bench`` starts it: JetStream,
file store, the reference at its default ``sync_interval``), an R1 stream ``BENCH`` is filled
with ``--messages`` payloads of ``--size`` bytes by ``loadgen jspub -I`` (every message with a
``Nats-Msg-Id`` header, as the Spark sink writes them; every PubAck checked).  Then the range
``[1, N]`` is read in this process exactly as a Spark task reads its partition
(``pipeline.jetstream.read_partition``: a ``natsio.RangeReader`` with two pull requests of
``--fetch-batch`` outstanding, each chunk turned into the source's Arrow record batch), one
reader at a time (``--readers`` > 1 splits the range and runs them in parallel processes,
like Spark's ``local[2]`` tasks, timed from when every reader has done its imports -- a
Spark worker has -- to the last one's end).  Printed per server: rows per wall-clock second, and CPU
microseconds per row of the server and of the reader process(es) (``/proc``), so the two
halves of the source's per-row budget are measured apart.  ``--profile FILE`` writes a
cProfile of the (single) reader.

Run: ``python -m bench.reader_bench [--messages 1000000] [--servers ref,trijet]``.
"""

from __future__ import annotations

import argparse
import cProfile
import multiprocessing
import os
import subprocess
import sys
import time
from typing import Any

from bench.common import build_loadgen, comma_list, find_nats_server, stop_server
from bench.core_bench import finish
from bench.spark_bench import start

STREAM = "BENCH"


def _schema() -> Any:
    """The source's schema (``pipeline.jetstream.SCHEMA``), built without a Spark session."""
    from pyspark.sql import types as t

    return t.StructType(
        [
            t.StructField("stream", t.StringType(), False),
            t.StructField("subject", t.StringType(), False),
            t.StructField("seq", t.LongType(), False),
            t.StructField("timestamp", t.TimestampType(), False),
            t.StructField("headers", t.MapType(t.StringType(), t.ArrayType(t.StringType())), True),
            t.StructField("data", t.BinaryType(), False),
        ]
    )


def read_range(
    url: str, first: int, end: int, fetch_batch: int, profile: str = ""
) -> tuple[int, float]:
    """Rows read from ``[first, end)`` and this process's CPU seconds for it."""
    from pipeline.jetstream import SeqPartition, read_partition
    from pipeline.plan import SourceOptions

    opts = SourceOptions.parse({"servers": url, "stream": STREAM, "fetchBatch": str(fetch_batch)})
    schema = _schema()
    prof = cProfile.Profile() if profile else None
    c0 = time.process_time()
    if prof is not None:
        prof.enable()
    rows = 0
    for batch in read_partition(SeqPartition(opts, first, end), schema):
        rows += batch.num_rows
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    return rows, time.process_time() - c0


def _child(args: tuple[str, int, int, int], ready: Any, out: Any) -> None:
    """A reader process: imports first, then waits at ``ready`` with the others and the
    parent (so the timed read excludes the process start), then reads its range."""
    import pipeline.jetstream  # noqa: F401  (the imports a Spark worker has done already)

    _schema()
    ready.wait()
    out.put(read_range(*args))


def _parallel(parts: list[tuple[str, int, int, int]]) -> tuple[int, float, float]:
    """``(rows, reader CPU s, wall s)`` of one reader process per part, timed from when all
    of them are ready to read (imports done) to the last one's result."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(len(parts) + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(part, ready, out)) for part in parts]
    for proc in procs:
        proc.start()
    try:
        ready.wait(timeout=120)
        t0 = time.perf_counter()
        got = [out.get(timeout=600) for _ in parts]
        wall = time.perf_counter() - t0
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return sum(r for r, _ in got), sum(c for _, c in got), wall


def run_server(name: str, args: argparse.Namespace) -> dict[str, float]:
    sp, store = start(name, args)
    n = args.messages
    try:
        import asyncio

        from bench.spark_bench import _create

        url = f"nats://127.0.0.1:{sp.port}"
        asyncio.run(_create(url))
        cmd = [*args.loadgen, "jspub", "-H", "127.0.0.1", "-P", str(sp.port), "-s", "bench.x"]
        cmd += ["-n", str(n), "-z", str(args.size), "-k", "256", "-t", "60", "-I"]
        res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), 600.0)
        if not res.get("ok"):
            raise SystemExit(f"reader_bench: filling {name} failed: {res}")
        load0 = os.getloadavg()[0]
        if args.readers == 1:
            cpu0, t0 = sp.cpu_s(), time.perf_counter()
            rows, client = read_range(url, 1, n + 1, args.fetch_batch, args.profile)
            wall = time.perf_counter() - t0
        else:
            step = -(-n // args.readers)
            parts = [
                (url, 1 + i * step, min(n + 1, 1 + (i + 1) * step), args.fetch_batch)
                for i in range(args.readers)
            ]
            cpu0 = sp.cpu_s()  # the readers' start costs the server nothing
            rows, client, wall = _parallel(parts)
        server = sp.cpu_s() - cpu0
    finally:
        stop_server(sp)
        subprocess.run(["rm", "-rf", store], check=False)
    if rows != n:
        raise SystemExit(f"reader_bench: {name}: read {rows} rows, not {n}")
    out = {
        "rows_s": n / wall,
        "server_us": server / n * 1e6,
        "client_us": client / n * 1e6,
        "load0": load0,
        "load1": os.getloadavg()[0],
    }
    print(
        f"  {name:8s} {out['rows_s']:9,.0f} rows/s  cpu us/row: server {out['server_us']:5.2f}"
        f"  reader {out['client_us']:5.2f}  load {load0:.1f}->{out['load1']:.1f}",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.reader_bench", description=__doc__)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--servers", default="ref,trijet", help="comma list of ref, trijet, trijet=DIR")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--readers", type=int, default=1, help="parallel reader processes")
    p.add_argument("--fetch-batch", type=int, default=4096)
    p.add_argument("--ref-sync", default="default", choices=["default", "always"])
    p.add_argument("--trijet-prefix", default="", help="e.g. 'taskset -c 1'")
    p.add_argument("--profile", default="", help="cProfile the reader into this file")
    args = p.parse_args(argv)
    args.nats_server = find_nats_server()
    args.loadgen = build_loadgen(False)
    if args.loadgen is None:
        sys.exit("reader_bench: needs the C load generator (gcc or cc)")
    servers = comma_list(args.servers)
    print(
        f"reader_bench: {args.messages} x {args.size} B, fetch {args.fetch_batch} x 2, "
        f"{args.readers} reader(s), load {os.getloadavg()[0]:.1f}"
    )
    for rep in range(args.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for name in order:
            run_server(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
