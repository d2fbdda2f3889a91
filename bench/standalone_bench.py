"""A single server's stream lifecycle: creates, updates, deletes and restart, side by side.

Theory of operation: a standalone trijet server runs the same meta state
machine and request path as a cluster (a cluster of one), so its stream
lifecycle is measured against nats-server on one node, and against another
trijet checkout (``trijet=DIR``, e.g. the commit before the change) in the
same run.  For every server in ``--servers`` a fresh store is used:

* **create** -- ``--streams`` R1 file streams created one after the other through
  ``$JS.API.STREAM.CREATE.<name>`` by one nats-py client; every answer must be a
  create response without ``error``.  Figure: creates per second.
* **update** -- each stream updated once (``max_msgs``).  Figure: updates per second.
* **restart** -- SIGTERM, start again on the same store, and time from the
  start until ``STREAM.INFO`` of the last stream answers (retried every 10 ms).
  Figure: seconds.
* **delete** -- every stream deleted.  Figure: deletes per second.

The table prints each figure and the ratio to the reference (for restart,
lower is better); a server named several times in ``--servers`` runs that
many times, interleaved with the others, and the table shows its medians.  The machine is shared: the 1-minute load average is printed.

Run: ``python -m bench.standalone_bench [--streams 200] [--servers ref,trijet,trijet=DIR]``.
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
from pathlib import Path
from typing import Any

import nats

from bench.common import (
    OUT_DIR,
    REPO_DIR,
    comma_list,
    find_nats_server,
    launch,
    safe_name,
    stop_server,
)

API_TIMEOUT_S = 10.0
RESTART_S_MAX = 60.0


def _cmd(name: str, store: str, ports_dir: str, nats_server: str) -> tuple[list[str], Path]:
    base = ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", ports_dir]
    if name == "ref":
        return [nats_server, "-js", "-sd", store, *base], REPO_DIR
    cwd = Path(name.split("=", 1)[1]) if "=" in name else REPO_DIR
    return [sys.executable, "-m", "node", "-js", "-sd", store, *base], cwd


def _start(name: str, store: str, nats_server: str, tag: str) -> tuple[Any, str]:
    ports_dir = tempfile.mkdtemp(prefix="standalone_bench_")
    cmd, cwd = _cmd(name, store, ports_dir, nats_server)
    log = OUT_DIR / f"standalone-{safe_name(name)}-{tag}.log"
    sp, ports = launch(name, cmd, cwd, ports_dir, log, "standalone_bench")
    return sp, ports["nats"][0]


async def _api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = await nc.request(
        subject, json.dumps(body).encode() if body else b"", timeout=API_TIMEOUT_S
    )
    doc: dict[str, Any] = json.loads(msg.data)
    if "error" in doc:
        raise SystemExit(f"standalone_bench: {subject}: {doc['error']}")
    return doc


def _cfg(i: int, **kw: Any) -> dict[str, Any]:
    return {"name": f"S{i}", "subjects": [f"s{i}.>"], "storage": "file", **kw}


async def _lifecycle(url: str, n: int) -> dict[str, float]:
    nc = await nats.connect(url)
    try:
        t0 = time.perf_counter()
        for i in range(n):
            await _api(nc, f"$JS.API.STREAM.CREATE.S{i}", _cfg(i))
        creates = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in range(n):
            await _api(nc, f"$JS.API.STREAM.UPDATE.S{i}", _cfg(i, max_msgs=1000))
        updates = n / (time.perf_counter() - t0)
    finally:
        await nc.close()
    return {"creates_per_s": creates, "updates_per_s": updates}


async def _first_info(url: str, n: int, started: float) -> float:
    deadline = started + RESTART_S_MAX
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(url, connect_timeout=1, allow_reconnect=False)
        except Exception:
            await asyncio.sleep(0.01)
            continue
        try:
            while time.monotonic() < deadline:
                try:
                    msg = await nc.request(f"$JS.API.STREAM.INFO.S{n - 1}", b"", timeout=1)
                except Exception:
                    await asyncio.sleep(0.01)
                    continue
                if "error" not in json.loads(msg.data):
                    return time.monotonic() - started
                await asyncio.sleep(0.01)
        finally:
            await nc.close()
    raise SystemExit("standalone_bench: no STREAM.INFO answer after restart")


async def _deletes(url: str, n: int) -> float:
    nc = await nats.connect(url)
    try:
        t0 = time.perf_counter()
        for i in range(n):
            await _api(nc, f"$JS.API.STREAM.DELETE.S{i}")
        return n / (time.perf_counter() - t0)
    finally:
        await nc.close()


def run_server(name: str, args: argparse.Namespace) -> dict[str, float]:
    store = tempfile.mkdtemp(prefix=f"standalone_store_{safe_name(name)}_")
    try:
        sp, url = _start(name, store, args.nats_server, "1")
        try:
            out = asyncio.run(_lifecycle(url, args.streams))
        finally:
            stop_server(sp)
        started = time.monotonic()
        sp, url = _start(name, store, args.nats_server, "2")
        try:
            out["restart_s"] = asyncio.run(_first_info(url, args.streams, started))
            out["deletes_per_s"] = asyncio.run(_deletes(url, args.streams))
        finally:
            stop_server(sp)
        return out
    finally:
        shutil.rmtree(store, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.standalone_bench", description=__doc__)
    p.add_argument("--streams", type=int, default=200, help="streams created, updated, deleted")
    p.add_argument("--servers", default="ref,trijet", help="comma list of ref, trijet, trijet=DIR")
    p.add_argument("--json", default="", help="write the raw figures to this file")
    args = p.parse_args(argv)
    args.nats_server = find_nats_server()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    print(f"load average (1 min): {os.getloadavg()[0]:.1f}; {args.streams} streams")
    runs: dict[str, list[dict[str, float]]] = {}
    for name in comma_list(args.servers):
        got = run_server(name, args)
        runs.setdefault(name, []).append(got)
        print(name, {k: round(v, 3) for k, v in got.items()}, flush=True)
    keys = ["creates_per_s", "updates_per_s", "restart_s", "deletes_per_s"]
    # a server named more than once (interleaved runs): the median of its runs
    results = {n: {k: statistics.median(r[k] for r in rs) for k in keys} for n, rs in runs.items()}
    ref = results.get("ref")
    print(f"\n{'figure':<16}" + "".join(f"{n:>24}" for n in results))
    for k in keys:
        row = f"{k:<16}"
        for name, r in results.items():
            cell = f"{r[k]:.3f}" if k == "restart_s" else f"{r[k]:.0f}"
            if ref is not None and name != "ref" and ref[k]:
                cell += f" ({r[k] / ref[k]:.2f}x)"
            row += f"{cell:>24}"
        print(row)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"streams": args.streams, "results": results, "runs": runs})
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
