"""Raft benchmark: trijet's raft/ (trio + pysyncobj, fsync'd group commit) vs stock pysyncobj.

``python -m bench.raft_bench [--n 20000] [--size 128] [--concurrency 256]``

Both runs use three local processes and one group; the leader's process
proposes ``n`` payloads of ``size`` bytes with ``concurrency`` proposals in
flight and measures, per proposal, the time until its result is back (commit +
apply on the leader).

* **trijet**: ``python -m chaos.raftnode`` over ``TcpPeerLinks``; every cycle
  fsyncs the journal before sending (durability on).
* **stock**: pysyncobj's own threaded ``SyncObj`` with its TCP transport
  (pickle) and ``journalFile`` (pysyncobj's FileJournal never fsyncs; so the
  stock row is *not* durable). Default SyncObjConf otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- trijet


async def _trijet(n: int, size: int, conc: int, data: Path, extra: list[str]) -> dict[str, float]:
    import trio

    from chaos.procs import Proc, tell_peers

    ids = ["a", "b", "c"]
    procs = [Proc(i, ids, data / i, b"bench-secret", fsm="counting", args=extra) for i in ids]
    try:
        for p in procs:
            await p.start()
        await tell_peers(procs)
        with trio.fail_after(30):
            leader_id = (await procs[0].call(op="wait_leader"))["leader"]
        leader = next(p for p in procs if p.node_id == leader_id)
        await leader.call(op="load", n=2000, size=size, concurrency=conc)  # warm-up
        r = await leader.call(op="load", n=n, size=size, concurrency=conc)
        if not r.get("ok"):
            raise RuntimeError(r)
        return r
    finally:
        for p in procs:
            await p.kill()


def run_trijet(n: int, size: int, conc: int, extra: list[str] | None = None) -> dict[str, float]:
    import trio

    with tempfile.TemporaryDirectory(prefix="raftbench-") as d:
        return trio.run(_trijet, n, size, conc, Path(d), extra or [])


# ---------------------------------------------------------------- stock pysyncobj


def _stock_node(
    self_addr: str, others: list[str], journal: str, n: int, size: int, conc: int
) -> None:
    from pysyncobj import SyncObj, SyncObjConf, replicated

    class Counter(SyncObj):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(self_addr, others, SyncObjConf(journalFile=journal))
            self.count = 0

        @replicated  # type: ignore[misc]
        def add(self, payload: bytes) -> int:
            self.count += 1
            return self.count

    o = Counter()
    while o._getLeader() is None:
        time.sleep(0.01)
    time.sleep(0.5)
    if o._getLeader().id != self_addr:
        print(json.dumps({"leader": False}), flush=True)
        sys.stdin.readline()
        return
    payload = os.urandom(size)
    lat: list[float] = []
    errors = [0]
    window = threading.Semaphore(conc)
    done = threading.Event()
    lock = threading.Lock()
    remaining = [n]

    def one() -> None:
        t0 = time.perf_counter()

        def cb(res: object, err: int) -> None:
            with lock:
                if err == 0:
                    lat.append(time.perf_counter() - t0)
                else:
                    errors[0] += 1
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()
            window.release()

        o.add(payload, callback=cb)

    t0 = time.perf_counter()
    for _ in range(n):
        window.acquire()
        one()
    done.wait(300)
    dt = time.perf_counter() - t0
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

    print(
        json.dumps(
            {
                "leader": True,
                "proposals": len(lat),
                "errors": errors[0],
                "per_s": len(lat) / dt,
                "p50_ms": pct(0.5),
                "p99_ms": pct(0.99),
                "fsyncs": 0,
                "raft_entries": len(lat),
            }
        ),
        flush=True,
    )
    sys.stdin.readline()


def _free_ports(k: int) -> list[int]:
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_stock(n: int, size: int, conc: int) -> dict[str, float]:
    ports = _free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    with tempfile.TemporaryDirectory(prefix="raftbench-stock-") as d:
        procs = []
        for a in addrs:
            others = ",".join(x for x in addrs if x != a)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.raft_bench",
                        "--stock-node",
                        a,
                        "--others",
                        others,
                        "--journal",
                        os.path.join(d, a.replace(":", "_")),
                        "--n",
                        str(n),
                        "--size",
                        str(size),
                        "--concurrency",
                        str(conc),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    cwd=str(ROOT),
                    text=True,
                )
            )
        result: dict[str, float] = {}
        try:
            for p in procs:
                assert p.stdout is not None
                line = json.loads(p.stdout.readline() or "{}")
                if line.get("leader"):
                    result = line
        finally:
            for p in procs:
                try:
                    assert p.stdin is not None
                    p.stdin.write("\n")
                    p.stdin.flush()
                except BrokenPipeError:
                    pass
            for p in procs:
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
        return result


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.raft_bench")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--skip-stock", action="store_true")
    ap.add_argument("--stock-node", help=argparse.SUPPRESS)
    ap.add_argument("--others", help=argparse.SUPPRESS)
    ap.add_argument("--journal", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.stock_node:
        _stock_node(a.stock_node, a.others.split(","), a.journal, a.n, a.size, a.concurrency)
        return
    rows = [("trijet raft/ (fsync per cycle)", run_trijet(a.n, a.size, a.concurrency))]
    if not a.skip_stock:
        rows.append(("stock pysyncobj (threaded, no fsync)", run_stock(a.n, a.size, a.concurrency)))
    print(f"\n3 processes, 1 group, {a.size} B proposals, {a.concurrency} in flight, n={a.n}")
    print(
        f"{'implementation':40} {'proposals/s':>12} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'entries':>8} {'fsyncs':>7}"
    )
    for name, r in rows:
        print(
            f"{name:40} {r.get('per_s', float('nan')):12.0f} {r.get('p50_ms', float('nan')):8.2f} "
            f"{r.get('p99_ms', float('nan')):8.2f} {r.get('errors', 0):7d} "
            f"{r.get('raft_entries', 0):8d} {r.get('fsyncs', 0):7d}"
        )


if __name__ == "__main__":
    main()
