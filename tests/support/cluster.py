"""Start an N-node cluster of real server processes (trijet or the reference) for tests and benches.

Theory of operation: ``start_cluster`` writes one nats-server-format conf file
per node (``server_name`` n1..nN, client ``listen``, ``http`` monitoring,
``server_tags``, ``jetstream { store_dir, domain?, unique_tag?, sync_interval? }``
and ``cluster { name: C1, listen, routes [every node] }``), all on 127.0.0.1,
and starts each through ``tests.support.servers.start_server`` (which waits for
the node's ports file and fails fast with its log).  The same conf files serve
both kinds, so a trijet cluster and a reference cluster are configured alike.

Ports are fixed in the conf files, because routes must name each other's
cluster ports before any node runs and because ``restart(i)`` must bring a
node back at the same addresses with the same store.  They are chosen to
avoid races as far as one can: candidates are drawn below the kernel's
ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), where outgoing
connections never land, each is proven free by binding it, and all of them
stay bound until just before the processes start.  If a node still fails with
"address already in use", the whole cluster is retried once with new ports.

"Formed" is a readiness predicate over the cluster (``ready``), polled against
a bounded deadline (no bare sleeps).  Defaults: for the reference,
``meta_leader_known`` (every live node's ``/jsz`` names the same
``meta_cluster.leader``) for both kinds; ``routes_connected`` (every live
node's ``/routez`` shows routes to all other live nodes) for clusters
without JetStream.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.servers import Kind, ServerProcess, ServerStartError, start_server

CLUSTER_NAME = "C1"
HOST = "127.0.0.1"
FORM_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 2.0
POLL_S = 0.05
PORT_PICK_TRIES_MAX = 2000
START_ATTEMPTS_MAX = 2

REFERENCE_TAGS: dict[str, list[str]] = {"n1": ["az:1", "ssd"], "n2": ["az:2"], "n3": ["az:3"]}
"""The tags of the reference observations (``jetstream-cluster.md`` §0)."""

Ready = Callable[["Cluster"], bool]


@dataclass(frozen=True)
class NodeSpec:
    """One planned node: its name, ports, directories and conf text."""

    name: str
    client_port: int
    cluster_port: int
    http_port: int
    workdir: Path
    store_dir: Path
    config: str

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.client_port}"

    @property
    def monitoring_url(self) -> str:
        return f"http://{HOST}:{self.http_port}"


# -- ports ---------------------------------------------------------------------


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def reserve_ports(n: int) -> list[socket.socket]:
    """``n`` distinct listening-capable ports, held bound by the returned sockets.

    Candidates come from below the ephemeral range (outgoing connections never
    take those); bind(0) is the fallback.  Close the sockets just before the
    servers bind the ports.
    """
    low, high = 10000, _ephemeral_low()
    pick = random.SystemRandom()
    held: list[socket.socket] = []
    tries = 0
    while len(held) < n:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        port = pick.randrange(low, high) if high - low > 1000 and tries < PORT_PICK_TRIES_MAX else 0
        tries += 1
        try:
            s.bind((HOST, port))
        except OSError:
            s.close()
            continue
        held.append(s)
    return held


# -- conf files ----------------------------------------------------------------


def _quote_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(x) for x in items) + "]"


def node_config(
    name: str,
    ports: tuple[int, int, int],
    store_dir: Path,
    route_ports: Sequence[int],
    *,
    tags: Sequence[str] = (),
    domain: str | None = None,
    unique_tag: str | None = None,
    sync_always: bool = False,
    extra_conf: str = "",
    jetstream_conf: str = "",
) -> str:
    """The nats-server-format conf text of one node.

    Args:
        name: ``server_name``.
        ports: (client, cluster, http) ports.
        store_dir: JetStream ``store_dir``.
        route_ports: every node's cluster port (itself included).
        tags: ``server_tags``.
        domain: ``jetstream.domain``.
        unique_tag: ``jetstream.unique_tag``.
        sync_always: ``jetstream.sync_interval: always``.
        extra_conf: appended verbatim.
        jetstream_conf: lines added inside the ``jetstream`` block verbatim.
    """
    client, cluster, http = ports
    js = [f"  store_dir: {json.dumps(str(store_dir))}"]
    if domain:
        js.append(f"  domain: {domain}")
    if unique_tag:
        js.append(f"  unique_tag: {json.dumps(unique_tag)}")
    if sync_always:
        js.append("  sync_interval: always")
    if jetstream_conf:
        js.append(jetstream_conf)
    routes = ", ".join(f"nats-route://{HOST}:{p}" for p in route_ports)
    lines = [
        f"server_name: {name}",
        f"listen: {HOST}:{client}",
        f"http: {HOST}:{http}",
    ]
    if tags:
        lines.append(f"server_tags: {_quote_list(tags)}")
    lines += ["jetstream {", *js, "}"]
    lines += [
        "cluster {",
        f"  name: {CLUSTER_NAME}",
        f"  listen: {HOST}:{cluster}",
        f"  routes: [{routes}]",
        "}",
    ]
    return "\n".join(lines) + "\n" + extra_conf + ("\n" if extra_conf else "")


# -- monitoring ----------------------------------------------------------------


def get_json(url: str, timeout: float = HTTP_TIMEOUT_S) -> dict[str, Any] | None:
    """GET ``url`` and decode JSON; None when unreachable or not a 200 JSON object."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            doc = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return doc if isinstance(doc, dict) else None


def meta_leader_known(c: Cluster) -> bool:
    """Every live node's ``/jsz`` names the same, live, meta leader."""
    leaders = {c.jsz_meta_leader(i) for i in c.live_indexes()}
    return len(leaders) == 1 and next(iter(leaders)) in c.live_names()


def routes_connected(c: Cluster) -> bool:
    """Every live node's ``/routez`` shows a route to each other live node."""
    live = c.live_indexes()
    for i in live:
        doc = get_json(f"{c.specs[i].monitoring_url}/routez")
        if doc is None:
            return False
        remotes = {r.get("remote_name") for r in doc.get("routes") or []}
        if not {c.specs[j].name for j in live if j != i} <= remotes:
            return False
    return True


DEFAULT_READY: dict[str, Ready] = {"reference": meta_leader_known, "trijet": meta_leader_known}
"""What "formed" means per kind; trijet's becomes ``meta_leader_known`` with the meta group."""


# -- the cluster ---------------------------------------------------------------


@dataclass
class Cluster:
    """A running cluster: processes, URLs, and kill / restart / meta-leader helpers.

    Use as a context manager, or call ``stop()``.
    """

    kind: Kind
    specs: list[NodeSpec]
    ready: Ready
    procs: list[ServerProcess | None] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def urls(self) -> list[str]:
        """Client URLs, stable across restarts."""
        return [s.url for s in self.specs]

    @property
    def monitoring_urls(self) -> list[str]:
        return [s.monitoring_url for s in self.specs]

    @property
    def servers(self) -> list[ServerProcess | None]:
        """The processes (None for a node that was never started)."""
        return list(self.procs)

    def live_indexes(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p is not None and p.alive()]

    def live_names(self) -> set[str]:
        return {self.specs[i].name for i in self.live_indexes()}

    def index(self, name: str) -> int:
        return self.names.index(name)

    def start_node(self, i: int) -> ServerProcess:
        """Start node ``i`` from its conf (same store); waits for its ports file."""
        s = self.specs[i]
        sp = start_server(self.kind, config=s.config, workdir=s.workdir, host=None, port=None)
        self.procs[i] = sp
        return sp

    def jsz(self, i: int) -> dict[str, Any] | None:
        """Node ``i``'s ``/jsz``, or None if it does not answer."""
        return get_json(f"{self.specs[i].monitoring_url}/jsz")

    def jsz_meta_leader(self, i: int) -> str | None:
        """The meta leader node ``i`` reports, or None."""
        doc = self.jsz(i)
        meta = (doc or {}).get("meta_cluster") or {}
        leader = meta.get("leader")
        return leader if isinstance(leader, str) and leader else None

    def meta_leader(self) -> str | None:
        """The meta leader's server name as the live nodes' ``/jsz`` report it.

        Returns the name a majority of the live nodes agree on, else the first
        one reported, else None.
        """
        seen = [self.jsz_meta_leader(i) for i in self.live_indexes()]
        named = [x for x in seen if x]
        if not named:
            return None
        best = max(set(named), key=named.count)
        return best

    def wait_until(self, pred: Ready, timeout: float = FORM_TIMEOUT_S, what: str = "") -> None:
        """Poll ``pred(self)`` until true; raise ``TimeoutError`` (with logs) after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not pred(self):
            for i, p in enumerate(self.procs):
                if p is not None and not p.alive() and p.returncode is None:
                    raise ServerStartError(f"{self.specs[i].name} died:\n{p.log_text()}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.kind} cluster: {what or getattr(pred, '__name__', 'condition')}"
                    f" not reached in {timeout}s\n{self._logs_tail()}"
                )
            time.sleep(POLL_S)  # poll interval of a real, bounded condition

    def wait_formed(self, timeout: float = FORM_TIMEOUT_S) -> None:
        """Wait until ``self.ready`` holds over the live nodes."""
        self.wait_until(self.ready, timeout, "formed")

    def wait_new_meta_leader(self, old: str | None, timeout: float = FORM_TIMEOUT_S) -> str:
        """Wait until every live node names one live meta leader other than ``old``."""

        def moved(c: Cluster) -> bool:
            return meta_leader_known(c) and c.meta_leader() != old

        self.wait_until(moved, timeout, f"meta leader other than {old}")
        leader = self.meta_leader()
        assert leader is not None
        return leader

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` (its store stays for ``restart``)."""
        p = self.procs[i]
        if p is not None:
            p.kill()

    def restart(self, i: int, *, wait: bool = True, timeout: float = FORM_TIMEOUT_S) -> None:
        """Stop node ``i`` if running, start it again with the same conf and store.

        Args:
            i: node index.
            wait: also wait until the cluster is formed again.
            timeout: bound on that wait.
        """
        p = self.procs[i]
        if p is not None and p.alive():
            p.stop()
        self.start_node(i)
        if wait:
            self.wait_formed(timeout)

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL); idempotent."""
        for p in self.procs:
            if p is not None:
                p.stop()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _logs_tail(self, chars: int = 2000) -> str:
        out = []
        for s, p in zip(self.specs, self.procs, strict=True):
            if p is not None:
                out.append(f"--- {s.name} ({'alive' if p.alive() else 'dead'}) ---")
                out.append(p.log_text()[-chars:])
        return "\n".join(out)


def plan_cluster(
    n: int,
    workdir: Path,
    ports: Sequence[int],
    *,
    tags: Mapping[str, Sequence[str]] | None = None,
    domain: str | None = None,
    unique_tag: str | None = None,
    sync_always: bool = False,
    extra_conf: str = "",
    jetstream_conf: str = "",
) -> list[NodeSpec]:
    """The node specs (conf texts included) for ``n`` nodes on ``3n`` given ports."""
    route_ports = list(ports[n : 2 * n])
    specs = []
    for i in range(n):
        name = f"n{i + 1}"
        wd = workdir / name
        store = wd / "store"
        trio_ports = (ports[i], ports[n + i], ports[2 * n + i])
        conf = node_config(
            name,
            trio_ports,
            store,
            route_ports,
            tags=(tags or {}).get(name, ()),
            domain=domain,
            unique_tag=unique_tag,
            sync_always=sync_always,
            extra_conf=extra_conf,
            jetstream_conf=jetstream_conf,
        )
        specs.append(NodeSpec(name, *trio_ports, wd, store, conf))
    return specs


def start_cluster(
    kind: Kind,
    n: int = 3,
    *,
    tags: Mapping[str, Sequence[str]] | None = None,
    domain: str | None = None,
    unique_tag: str | None = None,
    sync_always: bool = False,
    workdir: Path | str | None = None,
    extra_conf: str = "",
    jetstream_conf: str = "",
    ready: Ready | None = None,
    form_timeout: float = FORM_TIMEOUT_S,
) -> Cluster:
    """Start an ``n``-node cluster and wait until it is formed.

    Args:
        kind: ``"trijet"`` or ``"reference"``.
        n: number of nodes (named n1..nN).
        tags: ``server_tags`` per server name (e.g. ``REFERENCE_TAGS``).
        domain: ``jetstream.domain``.
        unique_tag: ``jetstream.unique_tag`` (e.g. ``"az:"``).
        sync_always: ``jetstream.sync_interval: always``.
        workdir: parent of the nodes' directories (``<workdir>/n1`` holds conf,
            log, ports file and ``store``); a new temp dir if None.
        extra_conf: appended to every node's conf.
        jetstream_conf: added inside every node's ``jetstream`` block.
        ready: the "formed" predicate; ``DEFAULT_READY[kind]`` if None.
        form_timeout: bound on waiting for ``ready``.

    Returns:
        The running ``Cluster``.

    Raises:
        ServerStartError: a node died or did not start (after one retry with
            new ports if the cause was a port already in use).
        TimeoutError: the cluster did not form in time (nodes are stopped).
    """
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"{kind}-cl-"))
    for attempt in range(START_ATTEMPTS_MAX):
        held = reserve_ports(3 * n)
        ports = [s.getsockname()[1] for s in held]
        specs = plan_cluster(
            n,
            base,
            ports,
            tags=tags,
            domain=domain,
            unique_tag=unique_tag,
            sync_always=sync_always,
            extra_conf=extra_conf,
            jetstream_conf=jetstream_conf,
        )
        c = Cluster(kind, specs, ready or DEFAULT_READY[kind], [None] * n)
        for s in held:
            s.close()
        try:
            for i in range(n):
                c.start_node(i)
            c.wait_formed(form_timeout)
            return c
        except ServerStartError as e:
            c.stop()
            if "address already in use" not in str(e).lower() or attempt + 1 == START_ATTEMPTS_MAX:
                raise
            for spec in specs:
                shutil.rmtree(spec.workdir, ignore_errors=True)
        except BaseException:
            c.stop()
            raise
    raise AssertionError("unreachable")
