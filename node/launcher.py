"""A local N-node cluster on 127.0.0.1, for users and tests.

``trijet cluster --nodes 3`` picks free ports, writes one config file per node
under a data directory (``./data/cluster`` by default), starts one
``trijet-server`` process per node, prints the client URLs, waits (at most
``READY_S_MAX``) until every node serves clients and names the same JetStream
meta leader in ``/jsz`` -- so the first request a user sends is answered --
and stops them all on Ctrl-C/SIGTERM.  A node that exits meanwhile stops the
launch with the end of its log.  ``plan_cluster`` is the pure part: it returns the config
text of each node, so tests can start the same cluster through their own
process helpers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

READY_S_MAX = 60.0
"""Longest the launcher waits for the cluster to form before saying so and going on."""
READY_POLL_S = 0.1


@dataclass(frozen=True)
class NodePlan:
    """One node of a planned cluster."""

    name: str
    client_port: int
    cluster_port: int
    http_port: int
    store_dir: str
    config: str


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that were free a moment ago."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def plan_cluster(
    n: int,
    base_dir: str | Path,
    *,
    name: str = "C1",
    host: str = "127.0.0.1",
    jetstream: bool = True,
    monitoring: bool = True,
    extra: str = "",
) -> list[NodePlan]:
    """Plan an ``n``-node full-mesh cluster: ports, data dirs and configs."""
    ports = free_ports(3 * n, host)
    nodes = []
    routes = ", ".join(f"nats-route://{host}:{ports[n + i]}" for i in range(n))
    for i in range(n):
        node = f"n{i + 1}"
        store = str(Path(base_dir) / node)
        http = ports[2 * n + i] if monitoring else 0
        js = f'jetstream {{ store_dir: "{store}" }}\n' if jetstream else ""
        config = (
            f"server_name: {node}\n"
            f"listen: {host}:{ports[i]}\n"
            + (f"http: {host}:{http}\n" if monitoring else "")
            + js
            + f"cluster {{\n  name: {name}\n  listen: {host}:{ports[n + i]}\n"
            f"  routes: [{routes}]\n}}\n" + extra
        )
        nodes.append(NodePlan(node, ports[i], ports[n + i], http, store, config))
    return nodes


#: what the launcher waits for (blocked, then ``sigwait``): stop, or reload every node
_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def run_cluster(n: int, base_dir: str, extra_args: list[str]) -> int:
    """Start and supervise a planned cluster until interrupted."""
    base = Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    plans = plan_cluster(n, base)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for p in plans:
            conf = base / f"{p.name}.conf"
            conf.write_text(p.config)
            log = open(base / f"{p.name}.log", "ab")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "node", "-c", str(conf), *extra_args],
                    stdout=log,
                    stderr=log,
                    # the nodes must not inherit the launcher's blocked SIGINT/SIGTERM/SIGHUP
                    # (blocked for sigwait): they would ignore the SIGTERM that stops them
                    preexec_fn=_unblock_signals,
                )
            )
        for p in plans:
            mon = f", monitoring http://127.0.0.1:{p.http_port}" if p.http_port else ""
            print(f"{p.name}: nats://127.0.0.1:{p.client_port}{mon}, log {base}/{p.name}.log")
        sys.stdout.flush()
        state = wait_ready(plans, procs, READY_S_MAX)
        if state.startswith("exited"):
            print(f"cluster not started: {state}", file=sys.stderr)
            return 1
        print(state)
        print("Ctrl-C stops the cluster. SIGHUP reloads every node's configuration.")
        sys.stdout.flush()
        while signal.sigwait(_SIGNALS) == signal.SIGHUP:  # one turn per signal received
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGHUP)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


def _serves(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _meta_leader(http_port: int) -> str | None:
    try:
        url = f"http://127.0.0.1:{http_port}/jsz"
        with urllib.request.urlopen(url, timeout=1) as r:
            doc = json.loads(r.read())
    except (OSError, ValueError):
        return None
    leader = (doc.get("meta_cluster") or {}).get("leader")
    return leader if isinstance(leader, str) and leader else None


def wait_ready(
    plans: list[NodePlan], procs: list[subprocess.Popen[bytes]], timeout_s: float
) -> str:
    """Poll (bounded) until every node serves clients and, with JetStream and
    monitoring, all name one meta leader; a line saying what was reached."""
    deadline = time.monotonic() + timeout_s
    js = all(p.http_port for p in plans) and all("jetstream" in p.config for p in plans)
    while True:
        for p, proc in zip(plans, procs, strict=True):
            if proc.poll() is not None:
                tail = Path(p.store_dir).parent / f"{p.name}.log"
                try:
                    end = tail.read_text(errors="replace")[-2000:]
                except OSError:
                    end = ""
                return f"exited: {p.name} (code {proc.returncode})\n{end}"
        if all(_serves(p.client_port) for p in plans):
            if not js:
                return "cluster ready"
            leaders = {_meta_leader(p.http_port) for p in plans}
            if len(leaders) == 1 and None not in leaders:
                return f"cluster ready: JetStream meta leader {leaders.pop()}"
        if time.monotonic() > deadline:
            return f"cluster not formed after {timeout_s:.0f} s (see the logs); still running"
        time.sleep(READY_POLL_S)  # bounded poll of other processes' ports and /jsz


def _unblock_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def block_signals() -> None:
    """Block SIGINT/SIGTERM so ``sigwait`` receives them (main thread only)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)


def main(args: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="trijet cluster", description=__doc__)
    ap.add_argument("-n", "--nodes", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join("data", "cluster"))
    ns, rest = ap.parse_known_args(args)
    block_signals()
    return run_cluster(ns.nodes, ns.dir, rest)
