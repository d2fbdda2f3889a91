"""Messages per second across a leafnode link: trijet against the reference nats-server.

Theory of operation: per server kind, a hub (``leafnodes { listen }``) and a leaf
(``leafnodes { remotes }``) are started on 127.0.0.1, both with monitoring.  Two phases
each use ``bench/loadgen`` (``core_bench``'s load generator, C when a compiler exists):

* ``hub_to_leaf``: one subscriber on the leaf, one publisher on the hub;
* ``leaf_to_hub``: one subscriber on the hub, one publisher on the leaf.

The subscriber is started first (its SUB confirmed by PING/PONG); then the benchmark waits,
bounded, until the other server's ``/leafz?subs=1`` lists the subject (the interest has
crossed the link) before the publisher starts.  The publisher is paced (a PING every
``--pace-every`` messages, at most ``--pace-window`` unanswered) so both servers take the
same bounded input.  The rate is taken at the subscriber, first to last message: messages
delivered across the link per second.  Each figure is the median of ``--repeat`` runs (the
servers alternate); the ratio trijet/reference is printed with the 1-minute load average.

A third phase, ``catchup``, times a leaf stream sourcing a hub stream across an outage: both
servers run JetStream (domains ``hub`` and ``leaf``, file store); the leaf's stream ``LS``
sources the hub's ``HS`` through ``$JS.hub.API``; after a warm-up (``--catchup-warm``
messages sourced) the leaf is stopped (SIGTERM), ``--catchup`` messages are published on the
hub (paced loadgen; the hub stream is polled until it holds them all), the leaf is started
again on the same store, and the time from its start (its ports file written) until ``LS``
holds every message is taken; the figure is messages caught up per second.

Run: ``python -m bench.leaf_bench [--msgs 200000] [--size 128] [--repeat 3] [--catchup 100000]
[--only-catchup]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import OUT_DIR, REPO_DIR, ServerProc, build_loadgen, find_nats_server, launch
from bench.common import stop_server as _stop
from bench.core_bench import finish, lg_cmd, run_pubs, start_waiting

INTEREST_WAIT_S = 20.0
POLL_S = 0.02
SUBJECT = "bench.leaf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(kind: str, nats_server: str, conf: str, tag: str) -> tuple[ServerProc, int]:
    """Start one server from ``conf``; returns it and its monitoring port."""
    import sys

    ports_dir = tempfile.mkdtemp(prefix=f"leaf_bench_{kind}_{tag}_")
    http = _free_port()
    path = Path(ports_dir) / "server.conf"
    path.write_text(conf)
    base = ["-c", str(path), "-a", "127.0.0.1", "-p", "-1", "-m", str(http)]
    base += ["--ports_file_dir", ports_dir]
    cmd = [nats_server, *base] if kind == "ref" else [sys.executable, "-m", "node", *base]
    OUT_DIR.mkdir(exist_ok=True)
    s = launch(kind, cmd, REPO_DIR, ports_dir, OUT_DIR / f"leaf-{kind}-{tag}.log", "leaf_bench")[0]
    return s, http


def _subs_listed(http: int) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/leafz?subs=1", timeout=2) as r:
            doc = json.loads(r.read())
    except (OSError, ValueError):
        return []
    out: list[str] = []
    for leaf in doc.get("leafs") or []:
        out += leaf.get("subscriptions_list") or []
    return out


def _wait_interest(http: int, subject: str) -> None:
    deadline = time.monotonic() + INTEREST_WAIT_S
    while subject not in _subs_listed(http):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{subject} never crossed the link")
        time.sleep(POLL_S)  # poll of a bounded condition (a benchmark, not a test)


async def _stream_msgs(port: int, stream: str) -> int:
    import nats

    nc = await nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=5, allow_reconnect=False)
    try:
        info = await nc.jetstream().stream_info(stream)
        return int(info.state.messages)
    except Exception:  # not there yet (the leaf's JetStream recovering): poll again
        return -1
    finally:
        await nc.close()


def _wait_msgs(port: int, stream: str, n: int, wait_s: float) -> float:
    """Poll (bounded) until ``stream`` holds ``n`` messages; returns the monotonic time."""
    import asyncio

    deadline = time.monotonic() + wait_s
    while True:
        try:
            got = asyncio.run(_stream_msgs(port, stream))
        except OSError:
            got = -1
        if got >= n:
            return time.monotonic()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{stream} holds {got}/{n} after {wait_s:.0f}s")
        time.sleep(POLL_S)  # poll of a bounded condition (a benchmark, not a test)


async def _make_streams(hub_port: int, leaf_port: int) -> None:
    import nats
    from nats.js.api import ExternalStream, StreamConfig, StreamSource

    hub = await nats.connect(f"nats://127.0.0.1:{hub_port}", connect_timeout=5)
    leaf = await nats.connect(f"nats://127.0.0.1:{leaf_port}", connect_timeout=5)
    try:
        await hub.jetstream().add_stream(StreamConfig(name="HS", subjects=["cu.>"]))
        src = StreamSource(name="HS", external=ExternalStream(api="$JS.hub.API"))
        deadline = time.monotonic() + INTEREST_WAIT_S
        while True:  # the link (and the hub's API interest) may still be coming up
            try:
                await leaf.jetstream().add_stream(StreamConfig(name="LS", sources=[src]))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                import asyncio

                await asyncio.sleep(0.1)
    finally:
        await hub.close()
        await leaf.close()


def run_catchup(kind: str, args: argparse.Namespace) -> float:
    """The catch-up phase on one hub/leaf pair of ``kind``; messages caught up per second."""
    import asyncio

    link = _free_port()
    store = tempfile.mkdtemp(prefix=f"leaf_bench_js_{kind}_")
    hub_conf = (
        f'server_name: hub\njetstream {{ store_dir: "{store}/hub", domain: hub }}\n'
        f"leafnodes {{ listen: 127.0.0.1:{link} }}\n"
    )
    leaf_conf = (
        f'server_name: leaf\njetstream {{ store_dir: "{store}/leaf", domain: leaf }}\n'
        f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{link}" }} ], reconnect: "250ms" }}\n'
    )
    hub, _ = _start(kind, args.nats_server, hub_conf, "cu-hub")
    leaf, _ = _start(kind, args.nats_server, leaf_conf, "cu-leaf")
    wait_s = max(120.0, args.catchup / 500)
    pace = {"i": args.pace_every, "w": args.pace_window}
    try:
        asyncio.run(_make_streams(hub.port, leaf.port))
        warm = args.catchup_warm
        run_pubs([lg_cmd(args.loadgen, "pub", hub.port, s="cu.x", n=warm, z=args.size, **pace)], 60)
        _wait_msgs(leaf.port, "LS", warm, wait_s)
        _stop(leaf)
        total = warm + args.catchup
        run_pubs(
            [lg_cmd(args.loadgen, "pub", hub.port, s="cu.x", n=args.catchup, z=args.size, **pace)],
            wait_s,
        )
        _wait_msgs(hub.port, "HS", total, wait_s)
        t0 = time.monotonic()
        leaf, _ = _start(kind, args.nats_server, leaf_conf, "cu-leaf2")
        t_up = time.monotonic() - t0
        t1 = _wait_msgs(leaf.port, "LS", total, wait_s)
        secs = t1 - t0
        print(f"  {kind} catchup: {args.catchup} msgs in {secs:.2f}s (leaf start {t_up:.2f}s)")
        return args.catchup / secs
    finally:
        _stop(leaf)
        _stop(hub)
        import shutil

        shutil.rmtree(store, ignore_errors=True)


def run_pair(kind: str, args: argparse.Namespace) -> dict[str, float]:
    """Both phases on one hub/leaf pair of ``kind``; msgs/s per phase."""
    link = _free_port()
    hub, hub_http = _start(
        kind, args.nats_server, f"leafnodes {{ listen: 127.0.0.1:{link} }}\n", "hub"
    )
    leaf, leaf_http = _start(
        kind,
        args.nats_server,
        f'leafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{link}" }} ] }}\n',
        "leaf",
    )
    out: dict[str, float] = {}
    try:
        n = args.msgs
        pace = {"i": args.pace_every, "w": args.pace_window}
        for phase, sub_s, pub_s, other_http in (
            ("hub_to_leaf", leaf, hub, hub_http),
            ("leaf_to_hub", hub, leaf, leaf_http),
        ):
            subj = f"{SUBJECT}.{phase}"
            sub = start_waiting(
                lg_cmd(args.loadgen, "sub", sub_s.port, s=subj, n=n, z=args.size, t=args.idle_s)
            )
            _wait_interest(other_http, subj)
            pub = run_pubs(
                [lg_cmd(args.loadgen, "pub", pub_s.port, s=subj, n=n, z=args.size, **pace)],
                max(120.0, n / 2000),
            )
            res = finish(sub, max(120.0, n / 2000))
            got = int(res.get("msgs", 0))
            if not res.get("ok") or got < n:
                print(f"  {kind} {phase}: subscriber got {got}/{n}: {res.get('err', '')}")
            out[phase] = float(res.get("msgs_per_s", 0.0))
            del pub
    finally:
        _stop(leaf)
        _stop(hub)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--msgs", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pace-every", type=int, default=1000)
    ap.add_argument("--pace-window", type=int, default=8)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--python-loadgen", action="store_true")
    ap.add_argument("--catchup", type=int, default=100_000, help="messages of the outage")
    ap.add_argument("--catchup-warm", type=int, default=1000)
    ap.add_argument("--only-catchup", action="store_true", help="skip the throughput phases")
    args = ap.parse_args()
    args.nats_server = find_nats_server()
    args.loadgen = build_loadgen(args.python_loadgen)
    figures: dict[str, dict[str, list[float]]] = {"ref": {}, "trijet": {}}
    for rep in range(args.repeat):
        order = ("ref", "trijet") if rep % 2 == 0 else ("trijet", "ref")
        for kind in order:
            load = os.getloadavg()[0]
            res = {} if args.only_catchup else run_pair(kind, args)
            if args.catchup:
                res["catchup"] = run_catchup(kind, args)
            print(f"rep {rep} {kind}: " + " ".join(f"{k}={v:,.0f}/s" for k, v in res.items()))
            print(f"  load1={load:.2f}")
            for k, v in res.items():
                figures[kind].setdefault(k, []).append(v)
    print(f"\nmedian of {args.repeat}, {args.msgs} msgs of {args.size} B, paced")
    print(f"{'phase':<14}{'nats-server':>14}{'trijet':>14}{'ratio':>8}")
    for phase in figures["ref"]:
        ref = statistics.median(figures["ref"][phase])
        tj = statistics.median(figures["trijet"].get(phase, [0.0]))
        ratio = tj / ref if ref else 0.0
        print(f"{phase:<14}{ref:>14,.0f}{tj:>14,.0f}{ratio:>8.2f}")
    print(f"load1 at end: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")


if __name__ == "__main__":
    main()
