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
the two phases.

JetStream (every account enables it; both servers sync before each PubAck: the reference
runs with ``sync_interval: always``): ``js-accounts`` creates a file stream ``BENCH`` on
``bench.js`` in each account (the same name and subject everywhere) and runs one
``loadgen jspub`` per account at once (``--js-window`` PubAcks in flight each);
``js-one-account`` creates ten streams ``B0…`` on ``bench.js.<i>`` in one account and runs
the same ten publishers there.  The figure is the PubAcks of all publishers divided by the
slowest publisher's time; each stream must hold exactly its publisher's messages, else the
run says ``FAILED``.  The streams are deleted after each phase.  ``js-accounts`` against
``js-one-account`` on trijet is the issue's yardstick (JetStream over ten accounts no worse
than in one).  Figures are medians over ``--repeat`` runs; the order of servers and of
phases alternates.

``--cluster`` runs each kind as a three-node cluster (``tests.support.cluster``: the same
conf files for both kinds, ``sync_interval: always``) with the same accounts, and every
client on the first node; ``--replicas`` sets the streams' replicas there (1 or 3: R3
streams of ten accounts are thirty Raft groups beside the meta group).

Run: ``python -m bench.accounts_bench [--accounts 10] [--msgs 200000] [--js-msgs 20000]
[--repeat 3] [--phases accounts,one-account,js-accounts,js-one-account] [--cluster
--replicas 3] [--py-spy .venv/bin/py-spy --py-spy-phases accounts]``
"""

from __future__ import annotations

import argparse
import json
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
from bench.core_bench import finish, start_py_spy, start_waiting, stop_py_spy
from bench.js_bench import API_TIMEOUT_S, ApiClient

PHASES = ("accounts", "one-account", "js-accounts", "js-one-account")
JS_STREAM = "BENCH"
JS_SUBJECT = "bench.js"
#: how long a stream create is retried while placement finds peers offline (10005)
CREATE_RETRY_S = 10.0


def accounts_text(n: int) -> str:
    js = "jetstream: enabled"
    accs = "\n".join(
        f"  A{i}: {{ users: [{{user: u{i}, password: u{i}}}], {js} }}" for i in range(n)
    )
    single = ", ".join(f"{{user: s{i}, password: s{i}}}" for i in range(n))
    return f"accounts {{\n{accs}\n  ONE: {{ users: [{single}], {js} }}\n}}\n"


def config_text(n: int, store_dir: str) -> str:
    return (
        f'jetstream {{\n  store_dir: "{store_dir}"\n  sync_interval: always\n}}\n'
        + accounts_text(n)
    )


def _meta_peers_current(c: Any) -> bool:
    """Whether the meta leader sees every other server current (R3 placement finds
    them online: a just-formed cluster may not yet)."""
    from tests.support.cluster import get_json

    leader = c.meta_leader()
    if leader is None:
        return False
    doc = get_json(c.monitoring_urls[c.index(leader)] + "/jsz") or {}
    reps = (doc.get("meta_cluster") or {}).get("replicas") or []
    return len(reps) == len(c.names) - 1 and all(r.get("current") for r in reps)


class ClusterRun:
    """A three-node cluster of one kind (``--cluster``); clients use the first node."""

    def __init__(self, name: str, args: argparse.Namespace) -> None:
        from tests.support.cluster import start_cluster

        if name not in ("ref", "trijet"):
            raise SystemExit(f"accounts_bench: --cluster runs ref and trijet only, not {name}")
        self.workdir = tempfile.mkdtemp(prefix=f"accounts_bench_cl_{safe_name(name)}_")
        self.cluster = start_cluster(
            "reference" if name == "ref" else "trijet",
            3,
            workdir=self.workdir,
            extra_conf=accounts_text(args.accounts),
            jetstream_conf="  sync_interval: always",
        )
        self.port = self.cluster.specs[0].client_port
        self.cluster.wait_until(_meta_peers_current, timeout=30, what="meta peers current")

    def stop(self) -> None:
        self.cluster.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


class UserApi(ApiClient):
    """``js_bench.ApiClient`` connected as a user (``password`` the same)."""

    def __init__(self, port: int, user: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=API_TIMEOUT_S)
        self.buf = b""
        self.n = 0
        self._line()  # INFO
        connect = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
            "name": "accounts_bench",
            "user": user,
            "pass": user,
        }
        self.sock.sendall(
            b"CONNECT " + json.dumps(connect).encode() + b"\r\nSUB _INBOX.jsb.* 1\r\n"
        )


def start(name: str, nats_server: str, tag: str, args: argparse.Namespace) -> tuple[Any, str]:
    """Start a server with its own store dir; returns it and the store dir."""
    ports_dir = tempfile.mkdtemp(prefix=f"accounts_bench_{safe_name(name)}_")
    store_dir = tempfile.mkdtemp(prefix=f"accounts_bench_store_{safe_name(name)}_")
    conf = Path(ports_dir) / "server.conf"
    conf.write_text(config_text(args.accounts, store_dir))
    base = ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", ports_dir, "-c", str(conf)]
    if name == "ref":
        cmd, cwd = [nats_server, *base], REPO_DIR
    else:
        cwd = Path(name.split("=", 1)[1]) if "=" in name else REPO_DIR
        cmd = [sys.executable, "-m", "node", *base]
    log = OUT_DIR / f"accounts-{safe_name(name)}-{tag}.log"
    return launch(name, cmd, cwd, ports_dir, log, "accounts_bench")[0], store_dir


def run_js_phase(lg: list[str], port: int, phase: str, args: argparse.Namespace) -> dict[str, Any]:
    """Ten JetStream publishers at once: one per account, or ten streams in one account."""
    n, k = args.js_msgs // args.accounts, args.accounts
    if phase == "js-accounts":  # (user, stream, subject): one stream name in every account
        plan = [(f"u{i}", JS_STREAM, JS_SUBJECT) for i in range(k)]
    else:
        plan = [(f"s{i}", f"B{i}", f"{JS_SUBJECT}.{i}") for i in range(k)]
    # one API connection per account (clients of one account would share the replies
    # to their common ``_INBOX.jsb.*``)
    if phase == "js-accounts":
        apis = [UserApi(port, user) for user, _, _ in plan]
    else:
        apis = [UserApi(port, "s0")] * k
    try:
        for api, (_, stream, subject) in zip(apis, plan, strict=True):
            cfg = {"name": stream, "subjects": [subject], "storage": "file"}
            cfg["num_replicas"] = args.replicas
            deadline = time.monotonic() + CREATE_RETRY_S
            while True:  # a just-formed cluster may not see every peer yet (10005)
                created = api.request(f"$JS.API.STREAM.CREATE.{stream}", cfg)
                err = created.get("error") or {}
                if err.get("err_code") != 10005 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if "error" in created:
                raise RuntimeError(f"{phase}: stream create failed: {created['error']}")
        common = ["-H", "127.0.0.1", "-P", str(port), "-n", str(n), "-z", str(args.size)]
        common += ["-k", str(args.js_window), "-t", str(args.idle_s)]
        pubs = [
            subprocess.Popen(
                [*lg, "jspub", *common, "-u", user, "-s", subject],
                stdout=subprocess.PIPE,
                text=True,
            )
            for user, _, subject in plan
        ]
        timeout = max(120.0, args.js_msgs / 200)
        res = [finish(p, timeout) for p in pubs]
        held = []
        for api, (_, stream, _) in zip(apis, plan, strict=True):
            info = api.request(f"$JS.API.STREAM.INFO.{stream}")
            held.append(info.get("state", {}).get("messages"))
            api.request(f"$JS.API.STREAM.DELETE.{stream}")
    finally:
        for api in set(apis):
            api.close()
    acks = sum(int(r.get("acks_ok", 0)) for r in res)
    span = max(float(r.get("elapsed_s", 0.0)) for r in res)
    ok = all(r.get("ok") for r in res) and all(h == n for h in held)
    if not ok:  # what failed: a publisher's own report, or a stream's count
        bad = [
            (i, r, h)
            for i, (r, h) in enumerate(zip(res, held, strict=True))
            if h != n or not r.get("ok")
        ]
        print(f"{phase}: expected {n} each; failed: {bad}", file=sys.stderr, flush=True)
    return {"ok": ok, "leak": False, "msgs": acks, "msgs_per_s": acks / span if span else 0.0}


def run_phase(lg: list[str], port: int, phase: str, args: argparse.Namespace) -> dict[str, Any]:
    if phase.startswith("js-"):
        return run_js_phase(lg, port, phase, args)
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
    p.add_argument("--js-msgs", type=int, default=20_000, help="JetStream messages per phase")
    p.add_argument("--js-window", type=int, default=64, help="PubAcks in flight per publisher")
    p.add_argument("--phases", default=",".join(PHASES), help="comma list of phases to run")
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (median reported)")
    p.add_argument("--batch-bytes", type=int, default=65536, help="publisher write size")
    p.add_argument("--idle-s", type=float, default=20.0, help="subscriber gives up after idle")
    p.add_argument("--servers", default="ref,trijet", help="comma list: ref, trijet, trijet=DIR")
    p.add_argument("--nats-server", default="", help="reference binary (default: found)")
    p.add_argument("--cluster", action="store_true", help="three-node clusters of each kind")
    p.add_argument("--replicas", type=int, default=1, help="JetStream streams' replicas")
    p.add_argument("--py-spy", default="", help="py-spy binary: profile trijet (1st run)")
    p.add_argument("--py-spy-phases", default="accounts", help="phases to profile (comma list)")
    p.add_argument("--py-spy-format", default="raw", choices=["raw", "flamegraph", "speedscope"])
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lg = build_loadgen(False)
    if lg is None:
        sys.exit("accounts_bench: needs a C compiler for bench/loadgen (accounts need -u)")
    nats_server = args.nats_server or find_nats_server()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    servers = comma_list(args.servers)
    phases = tuple(p for p in PHASES if p in comma_list(args.phases))
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rep in range(args.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for name in order:
            cl = ClusterRun(name, args) if args.cluster else None
            s, store_dir = (cl, "") if cl is not None else start(name, nats_server, f"r{rep}", args)
            try:
                for phase in phases if rep % 2 == 0 else tuple(reversed(phases)):
                    spy = start_py_spy(s, phase, rep, args) if cl is None else None
                    c0 = s.cpu_s() if cl is None else 0.0
                    try:
                        r = run_phase(lg, s.port, phase, args)
                    finally:
                        stop_py_spy(spy)
                    if cl is None and r["msgs"]:  # the server's CPU per message (load-proof)
                        r["us_per_msg"] = 1e6 * (s.cpu_s() - c0) / r["msgs"]
                    results.setdefault((name, phase), []).append(r)
                    state = "ok" if r["ok"] else ("LEAK" if r["leak"] else "FAILED")
                    cpu = f" srv {r['us_per_msg']:.2f} us/msg" if "us_per_msg" in r else ""
                    print(
                        f"[{rep}] {name:<8} {phase:<12} {r['msgs_per_s']:>12,.0f} msgs/s{cpu} "
                        f"{state} load={os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
            finally:
                if cl is not None:
                    cl.stop()
                else:
                    stop_server(s)
                    shutil.rmtree(store_dir, ignore_errors=True)
    print()
    med: dict[tuple[str, str], float] = {}
    for key, rs in results.items():
        good = [r["msgs_per_s"] for r in rs if r["ok"]]
        med[key] = statistics.median(good) if good else float("nan")
    print(f"{'phase':<16}" + "".join(f"{n:>16}" for n in servers) + "   ratio(x/ref)")
    for phase in phases:
        row = f"{phase:<16}" + "".join(
            f"{med.get((n, phase), float('nan')):>16,.0f}" for n in servers
        )
        ref = med.get(("ref", phase))
        ratios = [
            f"{n}={med[(n, phase)] / ref:.3f}"
            for n in servers
            if n != "ref" and ref and (n, phase) in med
        ]
        print(row + "   " + " ".join(ratios))
    cpu: dict[tuple[str, str], float] = {}
    for key, rs in results.items():
        good = [r["us_per_msg"] for r in rs if r["ok"] and "us_per_msg" in r]
        if good:
            cpu[key] = statistics.median(good)
    if cpu:
        print(f"{'server CPU us/msg':<16}" + "".join(f"{n:>16}" for n in servers))
        for phase in phases:
            print(
                f"{phase:<16}"
                + "".join(f"{cpu.get((n, phase), float('nan')):>16.2f}" for n in servers)
            )
    for n in servers:
        for pre in ("", "js-"):
            a, o = med.get((n, pre + "accounts")), med.get((n, pre + "one-account"))
            if a and o:
                what = "JetStream " if pre else "core "
                print(f"{n}: {what}{args.accounts} accounts / one account = {a / o:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
