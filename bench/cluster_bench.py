"""Routes side by side: publisher on node A, subscriber on node B, 128 B.

Theory of operation: a three-node trijet cluster and a three-node reference
nats-server cluster (same generated configs, ``node.launcher.plan_cluster``,
127.0.0.1 only) are started one after the other.  The subscriber (the C load
generator of ``bench/loadgen``) connects to node B, the publisher to node A, so
every message crosses exactly one route.  Before measuring, a probe proves
B's interest has reached A (a raw client on A publishes a probe until the one
on B receives it).  The rate is measured at the subscriber, first to last
message, unpaced and paced (a PING every ``--pace-every`` messages, at most
``--pace-window`` outstanding); the median of ``--repeat`` runs is printed per
server with the ratio trijet/reference.

Run: ``python -m bench.cluster_bench [--msgs 500000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.core_bench import (
    build_loadgen,
    find_nats_server,
    finish,
    lg_cmd,
    run_pubs,
    start_waiting,
)
from node.launcher import plan_cluster

ROOT = Path(__file__).resolve().parents[1]
PROBE_S_MAX = 20.0


def start_cluster(kind: str, base: Path) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    plans = plan_cluster(3, base / "data", jetstream=False, monitoring=False)
    procs = []
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for p in plans:
        conf = base / f"{p.name}.conf"
        conf.write_text(p.config)
        cmd = (
            [sys.executable, "-m", "node", "-c", str(conf)]
            if kind == "trijet"
            else [find_nats_server(), "-c", str(conf)]
        )
        log = open(base / f"{p.name}.log", "wb")
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=ROOT))
    ports = [p.client_port for p in plans]
    for port in ports:
        _wait_port(port)
    return procs, ports


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + PROBE_S_MAX
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.recv(65536)  # INFO
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
    return s


def wait_route_interest(a_port: int, b_port: int, subject: str) -> None:
    """Publish ``subject`` on A until a subscriber on B receives it (bounded)."""
    b = _raw(b_port)
    a = _raw(a_port)
    try:
        b.sendall(f"SUB {subject} 1\r\nPING\r\n".encode())
        b.settimeout(0.2)
        deadline = time.monotonic() + PROBE_S_MAX
        buf = b""
        while time.monotonic() < deadline:
            a.sendall(f"PUB {subject} 1\r\nx\r\n".encode())
            try:
                buf += b.recv(65536)
            except TimeoutError:
                continue
            if b"MSG " in buf:
                return
        raise RuntimeError("route interest never arrived")
    finally:
        a.close()
        b.close()


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def one_run(kind: str, args: argparse.Namespace, paced: bool) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix=f"cluster-bench-{kind}-"))
    procs, ports = start_cluster(kind, base)
    try:
        a, b = ports[0], ports[1]
        wait_route_interest(a, b, "bench.probe")
        subj = "bench.route"
        sub = start_waiting(
            lg_cmd(args.loadgen, "sub", b, s=subj, n=args.msgs, z=args.size, t=args.idle_s)
        )
        wait_route_interest(a, b, "bench.probe2")  # B's SUB travelled to A before it
        pace = {"i": args.pace_every, "w": args.pace_window} if paced else {}
        pub = run_pubs(
            [lg_cmd(args.loadgen, "pub", a, s=subj, n=args.msgs, z=args.size, b=262144, **pace)],
            timeout=max(120.0, args.msgs / 2000),
        )
        res = finish(sub, timeout=max(120.0, args.msgs / 2000))
        res["pub"] = pub
        return res
    finally:
        stop(procs)
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster_bench", description=__doc__)
    ap.add_argument("--msgs", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pace-every", type=int, default=5000)
    ap.add_argument("--pace-window", type=int, default=2)
    ap.add_argument("--idle-s", type=float, default=10.0)
    args = ap.parse_args(argv)
    args.loadgen = build_loadgen(False)
    if args.loadgen is None:
        print("cluster_bench: needs a C compiler for the load generator")
        return 1
    results: dict[tuple[str, bool], list[float]] = {}
    for rep in range(args.repeat):
        order = ["trijet", "reference"] if rep % 2 == 0 else ["reference", "trijet"]
        for paced in (False, True):
            for kind in order:
                r = one_run(kind, args, paced)
                rate = float(r.get("msgs_per_s", 0.0)) if r.get("ok") else 0.0
                got = r.get("msgs", r.get("received", "?"))
                print(
                    f"rep {rep} {kind:9s} {'paced' if paced else 'unpaced':7s} "
                    f"{rate:>12,.0f} msg/s (received {got}/{args.msgs}, ok={r.get('ok')})",
                    flush=True,
                )
                results.setdefault((kind, paced), []).append(rate)
    print()
    print(f"{'metric':28s} {'trijet':>14s} {'reference':>14s} {'ratio':>7s}")
    for paced in (False, True):
        t = statistics.median(results[("trijet", paced)])
        r = statistics.median(results[("reference", paced)])
        name = f"route_pubsub_{args.size}B" + ("_paced" if paced else "")
        ratio = t / r if r else 0.0
        print(f"{name:28s} {t:>14,.0f} {r:>14,.0f} {ratio:>7.2f}")
    for paced in (False, True):
        t = statistics.median(results[("trijet", paced)])
        r = statistics.median(results[("reference", paced)])
        name = f"route_pubsub_{args.size}B" + ("_paced" if paced else "")
        print(f"{name}: trijet={t:.0f} ref={r:.0f} ratio={t / r if r else 0:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
