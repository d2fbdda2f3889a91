"""Core pub/sub spread over accounts: trijet against the reference nats-server, in one run.

Theory of operation: each server (the reference, trijet, optionally a ``trijet=DIR``
checkout) is started with one configuration of ``--accounts`` accounts ``A0…`` with one
user each (``u0`` / ``u0`` …).  In every account one subscriber and one publisher (the C
``bench/loadgen`` with ``-u``) use the *same* subject, so only account isolation keeps their
traffic apart: a subscriber that received another account's messages would count them and
stop early — each subscriber must end with exactly its own publisher's count, else the run
says ``LEAK``.  All publishers run at once; the figure is the messages received by all
subscribers divided by the wall time from the publishers' start to the last subscriber's
last message.  A second phase (``one-account``) runs the same ten pairs on ten different
subjects in one account of the same server, so the cost of accounts shows as the ratio of
the two phases.  Figures are medians over ``--repeat`` runs; the order of servers and of
phases alternates.

Run: ``python -m bench.accounts_bench [--accounts 10] [--msgs 200000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    OUT_DIR,
    REPO_DIR,
    build_loadgen,
    comma_list,
    find_nats_server,
    launch,
    safe_name,
    stop_server,
)
from bench.core_bench import finish, start_waiting

PHASES = ("accounts", "one-account")


def config_text(n: int) -> str:
    accs = "\n".join(f"  A{i}: {{ users: [{{user: u{i}, password: u{i}}}] }}" for i in range(n))
    single = ", ".join(f"{{user: s{i}, password: s{i}}}" for i in range(n))
    return f"accounts {{\n{accs}\n  ONE: {{ users: [{single}] }}\n}}\n"


def start(name: str, conf: Path, nats_server: str, tag: str) -> Any:
    ports_dir = tempfile.mkdtemp(prefix=f"accounts_bench_{safe_name(name)}_")
    base = ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", ports_dir, "-c", str(conf)]
    if name == "ref":
        cmd, cwd = [nats_server, *base], REPO_DIR
    else:
        cwd = Path(name.split("=", 1)[1]) if "=" in name else REPO_DIR
        cmd = [sys.executable, "-m", "node", *base]
    log = OUT_DIR / f"accounts-{safe_name(name)}-{tag}.log"
    return launch(name, cmd, cwd, ports_dir, log, "accounts_bench")[0]


def run_phase(lg: list[str], port: int, phase: str, args: argparse.Namespace) -> dict[str, Any]:
    n, k = args.msgs // args.accounts, args.accounts
    common = ["-H", "127.0.0.1", "-P", str(port), "-n", str(n), "-z", str(args.size)]
    pairs = []
    for i in range(k):
        if phase == "accounts":
            pairs.append((f"u{i}", "bench.acc"))  # one subject, k accounts
        else:
            pairs.append((f"s{i}", f"bench.acc.{i}"))  # one account, k subjects
    subs = [
        start_waiting([*lg, "sub", *common, "-u", u, "-s", s, "-t", str(args.idle_s)])
        for u, s in pairs
    ]
    t0 = time.monotonic()
    pubs = [
        subprocess.Popen(
            [*lg, "pub", *common, "-u", u, "-s", s, "-b", str(args.batch_bytes)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for u, s in pairs
    ]
    timeout = max(120.0, args.msgs / 5000)
    pub_res = [finish(p, timeout) for p in pubs]
    sub_res = [finish(p, timeout) for p in subs]
    wall = time.monotonic() - t0
    got = [int(r.get("msgs", 0)) for r in sub_res]
    ok = all(r.get("ok") for r in sub_res + pub_res)
    leak = any(g != n for g in got)
    # first-to-last at the subscribers: the latest end minus the publishers' start
    span = max(float(r.get("elapsed_s", 0.0)) for r in sub_res)
    return {
        "ok": ok and not leak,
        "leak": leak,
        "msgs": sum(got),
        "wall_s": wall,
        "msgs_per_s": sum(got) / max(span, 1e-9) if span else sum(got) / wall,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="accounts_bench", description=__doc__.splitlines()[0])
    p.add_argument("--accounts", type=int, default=10, help="accounts (one pub/sub pair each)")
    p.add_argument("--msgs", type=int, default=200_000, help="messages in all per phase")
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (median reported)")
    p.add_argument("--batch-bytes", type=int, default=65536, help="publisher write size")
    p.add_argument("--idle-s", type=float, default=20.0, help="subscriber gives up after idle")
    p.add_argument("--servers", default="ref,trijet", help="comma list: ref, trijet, trijet=DIR")
    p.add_argument("--nats-server", default="", help="reference binary (default: found)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lg = build_loadgen(False)
    if lg is None:
        sys.exit("accounts_bench: needs a C compiler for bench/loadgen (accounts need -u)")
    nats_server = args.nats_server or find_nats_server()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    conf = OUT_DIR / "accounts_bench.conf"
    conf.write_text(config_text(args.accounts))
    servers = comma_list(args.servers)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rep in range(args.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for name in order:
            s = start(name, conf, nats_server, f"r{rep}")
            try:
                for phase in PHASES if rep % 2 == 0 else tuple(reversed(PHASES)):
                    r = run_phase(lg, s.port, phase, args)
                    results.setdefault((name, phase), []).append(r)
                    state = "ok" if r["ok"] else ("LEAK" if r["leak"] else "FAILED")
                    print(
                        f"[{rep}] {name:<8} {phase:<12} {r['msgs_per_s']:>12,.0f} msgs/s "
                        f"{state} load={os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
            finally:
                stop_server(s)
    print()
    med: dict[tuple[str, str], float] = {}
    for key, rs in results.items():
        good = [r["msgs_per_s"] for r in rs if r["ok"]]
        med[key] = statistics.median(good) if good else float("nan")
    print(f"{'phase':<14}" + "".join(f"{n:>16}" for n in servers) + "   ratio(x/ref)")
    for phase in PHASES:
        row = f"{phase:<14}" + "".join(
            f"{med.get((n, phase), float('nan')):>16,.0f}" for n in servers
        )
        ref = med.get(("ref", phase))
        ratios = [
            f"{n}={med[(n, phase)] / ref:.3f}"
            for n in servers
            if n != "ref" and ref and (n, phase) in med
        ]
        print(row + "   " + " ".join(ratios))
    for n in servers:
        a, o = med.get((n, "accounts")), med.get((n, "one-account"))
        if a and o:
            print(f"{n}: {args.accounts} accounts / one account = {a / o:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
