"""The server: listeners, client registry, shared state and shutdown.

Theory of operation: ``Server`` owns what all sessions share — the sublist,
the router, the authenticator, the TLS context, counters — and the client
registry.  ``run`` opens the client listener (and the monitor when
configured), logs nats-server's startup lines, writes the ports file, then
serves until ``shutdown()``: it stops accepting, asks every session to close
(each flushes what it has queued, bounded), waits for them, and returns.
Each accepted connection gets one ``ClientSession`` task in the server's
client nursery; ``max_connections`` is enforced at accept with nats-server's
error.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import logging
import os
import random
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from node.accounts import Accounts
from node.auth import Authenticator
from node.config import ServerConfig
from node.jsdelivery import LEAF_LINK
from node.monitor.accstatz import retire
from node.protocol.wire import err_bytes, info_bytes
from node.route import Interest, Route, RouteManager
from node.router import Router
from node.server_routes import ServerRoutes, _hostport
from node.session import ClientSession, ClosedReason, Subscription
from node.stall import StallGates
from node.sublist import Sublist
from node.version import NATS_VERSION, TRIJET_VERSION

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_S_MAX = 5.0
GIT_COMMIT = "trijet"


@dataclass
class ServerStats:
    """Server-wide counters (``/varz``)."""

    in_msgs: int = 0
    in_bytes: int = 0
    slow_consumers: int = 0
    stale_connections: int = 0
    #: producer stalls on a backed-up connection (``/varz`` ``stalled_clients``)
    stalled_clients: int = 0
    total_connections: int = 0
    #: unexpected exceptions contained by a last-resort guard (one
    #: connection closed or one request answered with an error)
    internal_errors: int = 0


def _make_server_id() -> str:
    """A server id as nats-server's: the public nkey of a server key pair (base32 of
    the server prefix byte, 32 key bytes and their CRC-16/XMODEM, little-endian).
    Nothing signs as the server, so the key pair is never needed: 32 random bytes
    stand for its public key (no ed25519 derivation, and nkeys with PyNaCl, ~1 MB
    resident, stay unimported unless nkey users are configured)."""
    raw = bytes([_PREFIX_BYTE_SERVER]) + os.urandom(32)
    return base64.b32encode(raw + binascii.crc_hqx(raw, 0).to_bytes(2, "little")).decode()


_PREFIX_BYTE_SERVER = 13 << 3
"""nkeys.PREFIX_BYTE_SERVER: a server id starts with ``N``."""


def build_ssl_context(cfg: ServerConfig) -> ssl.SSLContext | None:
    """The server-side TLS context for client connections, or None."""
    tls = cfg.tls
    if tls is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(tls.cert_file, tls.key_file)
    if tls.ca_file:
        ctx.load_verify_locations(tls.ca_file)
    ctx.verify_mode = ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE
    return ctx


class Server(ServerRoutes):
    """One trijet server process's shared state (the route side: ``ServerRoutes``).

    Args:
        cfg: the typed configuration.
        rng: seeded randomness (queue choice, ping jitter, nonces).
    """

    def __init__(self, cfg: ServerConfig, rng: random.Random | None = None) -> None:
        self.cfg = cfg
        self.rng = rng or random.Random()
        self.server_id = _make_server_id()
        self.server_name = cfg.server_name or self.server_id
        self.accounts = Accounts(cfg, self.rng)
        # the home account (JetStream's, else $G): the server's own services live there
        self.sublist: Sublist[Subscription] = self.accounts.home.sublist
        self.router: Router = self.accounts.home.router
        self.authenticator = Authenticator(cfg.auth)
        self.ssl_context = build_ssl_context(cfg)
        self.stats = ServerStats()
        self.stall_gates = StallGates(no_stall=cfg.no_fast_producer_stall)
        self.clients: dict[int, ClientSession] = {}
        self.closed_clients: collections.deque[ClientSession] = collections.deque(
            maxlen=max(cfg.max_closed_clients, 0)
        )
        self._next_cid = 0
        self.start_wall = time.time()
        self.client_port = 0
        self.client_host = cfg.host
        self.http_port = 0
        self.http_host = ""
        self.http_req_stats: dict[str, int] = collections.Counter()
        self.config_load_time = self.start_wall
        self._shutdown = trio.Event()
        self._all_closed = trio.Event()
        self._ready = trio.Event()
        self._client_nursery: trio.Nursery | None = None
        self._nursery: trio.Nursery | None = None
        #: configured routes' solicit loops, by URL (a reload cancels a removed one's)
        self.route_solicits: dict[str, trio.CancelScope] = {}
        self.connect_urls: list[str] = []
        # leaf nodes
        from node.leafnodes import LeafNodes

        self.leafnodes = LeafNodes(self, self.rng)
        # cluster
        self.routes = RouteManager(self, self.rng)
        self.cluster_port = 0
        self._next_rid = 0
        self._route_nursery: trio.Nursery | None = None
        self.client_urls_by_server: dict[str, list[str]] = {}
        self.raft_links: Any = None  # set by the composition root when Raft runs
        #: called with each route once it is registered (the meta layer learns peers)
        self.route_listeners: list[Callable[[Route], None]] = []
        self.jetstream_enabled = cfg.jetstream.enabled
        self.jetstream: Any = None  # node.jetstream.service.JetStreamService when enabled
        #: one JetStream service per account that enables it (the first is ``jetstream``)
        self.js_services: list[Any] = []
        #: account name -> its JetStream service being stopped (a reload took JetStream away)
        self._js_stopping: dict[str, Any] = {}
        #: the accounts without JetStream: their ``$JS.API`` answers, by account name
        self.not_enabled: dict[str, Any] = {}
        from node.imports import install_imports

        #: the bridges of configured stream and service imports (None: none configured)
        self.service_imports = install_imports(self)
        from node.sysreq import ClientEvents, SystemRequests

        #: ``$SYS.REQ.*`` (server pings in the system account, user info everywhere)
        self.system_requests = SystemRequests(self)
        self.client_events = ClientEvents(self.system_requests)

    # -- small services for sessions --------------------------------------

    @staticmethod
    def wall_time() -> float:
        return time.time()

    def next_cid(self) -> int:
        """A new connection id (clients and leaf links share the sequence)."""
        self._next_cid += 1
        return self._next_cid

    def make_nonce(self) -> str:
        raw = bytes(self.rng.getrandbits(8) for _ in range(11))
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def base_info(self) -> dict[str, Any]:
        """INFO fields common to every client."""
        cfg = self.cfg
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": NATS_VERSION,
            "proto": 1,
            "git_commit": GIT_COMMIT,
            "go": f"python{sys.version_info.major}.{sys.version_info.minor}",
            "host": self.client_host,
            "port": self.client_port,
            "headers": not cfg.no_header_support,
            "max_payload": cfg.max_payload,
        }
        if self.jetstream_enabled:
            info["jetstream"] = True
            if cfg.jetstream.domain:
                info["domain"] = cfg.jetstream.domain
        if self.authenticator.required:
            info["auth_required"] = True
        if cfg.tls is not None:
            info["tls_required"] = True
            if cfg.tls.verify:
                info["tls_verify"] = True
        if cfg.cluster is not None and cfg.cluster.name:
            info["cluster"] = cfg.cluster.name
        if self.connect_urls:
            info["connect_urls"] = list(self.connect_urls)
        if cfg.jetstream.enabled and cfg.jetstream.domain:
            info["domain"] = cfg.jetstream.domain
        return info

    def client_info(self, session: ClientSession) -> dict[str, Any]:
        """The INFO a new client connection receives."""
        info = self.base_info()
        info["client_id"] = session.cid
        info["client_ip"] = session.ip
        if session.nonce is not None:
            info["nonce"] = session.nonce
        return info

    def connect_info(self, session: ClientSession) -> dict[str, Any]:
        """The async INFO sent after a protocol>=1 client's first PONG."""
        info = self.client_info(session)
        info.pop("nonce", None)
        info["connect_info"] = True
        info["remote_account"] = session.account.name
        return info

    # -- subscriptions (local interest, announced to routes) ----------------

    def add_sub(self, sub: Subscription, *, announce: bool = True, weight: int = 1) -> None:
        """Insert a local subscription (in its client's account) and announce
        new interest to routes (unless ``announce`` is False: a server-local
        service); ``weight``: the members a leaf link's queue subscription stands for."""
        acc = sub.client.account
        acc.sublist.insert(sub)
        acc.router.gen += 1
        if acc.next_watchers is not None and not sub.client.internal:
            acc.next_watchers.added(sub.subject)
        self._interest_changed(sub, weight, announce)

    def reweight_sub(self, sub: Subscription, delta: int) -> None:
        """A leaf link's queue subscription now stands for ``delta`` more (or fewer)
        members: the new weight goes to routes and other leaf links."""
        if delta:
            self._interest_changed(sub, delta, True)

    def remove_sub(self, sub: Subscription, *, announce: bool = True, weight: int = 1) -> None:
        """Remove a local subscription and withdraw interest from routes
        (``announce`` and ``weight`` as it was added)."""
        acc = sub.client.account
        if not acc.sublist.remove(sub):
            return
        acc.router.gen += 1
        if acc.next_watchers is not None and not sub.client.internal:
            acc.next_watchers.removed(sub.subject)
        self._interest_changed(sub, -weight, announce)

    def _interest_changed(self, sub: Subscription, delta: int, announce: bool) -> None:
        acc = sub.client.account
        origin = _origin(sub)
        self.leafnodes.interest(
            acc, sub.subject, sub.queue, delta, local=_local(sub), origin=origin
        )
        if not announce:
            return
        if origin:  # a hub-side leaf link's: ``LS+ <origin>`` on routes
            li = acc.leaf_interest.get(origin)
            if li is None:
                li = acc.leaf_interest[origin] = Interest(acc.name_bytes, origin)
            line = li.change(sub.subject, sub.queue, delta)
        else:
            line = acc.interest.change(sub.subject, sub.queue, delta)
        plain = acc.interest_all.change(sub.subject, sub.queue, delta)
        if self.routes.by_id:
            self._to_routes(line, plain, origin)

    def _to_routes(self, line: bytes | None, plain: bytes | None, origin: bytes) -> None:
        """An interest change to every route: ``line`` (``RS+``/``RS-``, or a leaf cluster's
        ``LS+``/``LS- <origin>``) to peers that announced ``lnoc``, ``plain`` (the merged
        ``RS+``/``RS-``) to the others, as nats-server never sends them a line with an
        origin; ``LS- <origin>`` loses its origin for a peer without ``lnocu``."""
        for route in self.routes.by_id.values():
            if not route.lnoc:
                if plain is not None:
                    route.send(plain)
            elif line is not None:
                if origin and not route.lnocu and line.startswith(b"LS-"):
                    route.send(b"LS- " + line[5 + len(origin) :])
                else:
                    route.send(line)

    # -- configuration reload ------------------------------------------------

    def reload_soon(self, done: Callable[[str | None], None] | None = None) -> None:
        """Reload the configuration in a task of its own (``node.reload``); log nats-server's
        error when it is refused; then ``done(None or the error text)``."""
        if self._nursery is None:
            if done is not None:
                done("server is not running")
            return

        async def task() -> None:
            from node.reload import ReloadError, reload

            err: str | None = None
            try:
                reload(self)
            except ReloadError as exc:
                err = str(exc)
                log.error("Failed to reload server configuration: %s", err)
            except Exception:  # last resort: the server goes on with what it has
                self.internal_error("reload")
                err = "internal error"
            if done is not None:
                done(err)

        self._nursery.start_soon(task)

    def start_account_jetstream(self, acc: Any) -> bool:
        """Run JetStream in ``acc`` from now on (a reload enabled it); False when the server
        runs no JetStream."""
        if self._nursery is None or not self.js_services:
            return False
        from node.jetstream.service import JetStreamService

        acc.jetstream = True
        self.accounts.jetstream_accounts.append(acc)
        responder = self.not_enabled.pop(acc.name, None)
        if responder is not None:
            responder.client.close()
        svc = JetStreamService(self, acc, self.js_services[0].storage)
        self.js_services.append(svc)
        old = self._js_stopping.pop(acc.name, None)

        async def run() -> None:
            if old is not None:  # the same files: only once the previous service let go
                await old.stopped.wait()
            await svc.run()

        self._nursery.start_soon(run)
        return True

    def stop_account_jetstream(self, acc: Any) -> bool:
        """Stop JetStream in ``acc`` (a reload took it away): its API answers "JetStream not
        enabled for account" from now on, its streams stop, their files stay.  False (kept
        running) for the home account, whose service the server's JetStream hangs on, and in
        a cluster (the meta layer still assigns the account's streams)."""
        svc = next((s for s in self.js_services if s.account is acc), None)
        if svc is None or svc is self.jetstream or self._nursery is None:
            return False
        if self.cfg.cluster is not None:
            return False
        self.js_services.remove(svc)
        acc.jetstream = False
        if acc in self.accounts.jetstream_accounts:
            self.accounts.jetstream_accounts.remove(acc)
        svc.detach()
        self.serve_account_without_jetstream(acc)
        self._js_stopping[acc.name] = svc
        self._nursery.start_soon(svc.stop)
        return True

    def serve_account_without_jetstream(self, acc: Any) -> None:
        """nats-server's JetStream answers in an account JetStream does not run in."""
        from node.jetstream.noaccount import NotEnabledResponder

        self.not_enabled[acc.name] = NotEnabledResponder(self, acc)

    def jetstream_view(self) -> Any:
        """JetStream figures for ``/jsz`` (a ``node.monitor.jsz.JetStreamView``), or None."""
        if not self.js_services:
            return None
        from node.jetstream.accounts_js import combined_view

        return combined_view(self.js_services)

    def internal_error(self, what: str, **where: Any) -> None:
        """Log the exception being handled (once, with where it happened) and
        count it in ``/varz`` ``trijet_internal_errors``."""
        self.stats.internal_errors += 1
        detail = " ".join(f"{k}={v}" for k, v in where.items())
        log.exception("event=internal_error in=%s %s", what, detail)

    def jetstream_health(self, opts: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``/healthz`` with JetStream: in a cluster the meta layer's state
        first (a leaderless stream does not fail it, as in nats-server);
        then unavailable while a stream directory lies quarantined (could not
        be recovered), in nats-server's words; a quarantined consumer does
        not fail it (nor does it there)."""
        js = self.jetstream
        meta = getattr(js, "meta", None)
        if meta is not None and not opts.get("js-enabled-only"):
            problem = meta.health()
            if problem is not None:
                status, text = problem
                if opts.get("details"):
                    return status, {
                        "status": "unavailable",
                        "status_code": status,
                        "errors": [{"type": "JETSTREAM", "error": text}],
                    }
                return status, {"status": "unavailable", "error": text}
        bad = [
            (svc.account.name, q)
            for svc in self.js_services
            for q in getattr(svc, "quarantined", ())
            if q.kind == "stream"
        ]
        if not bad or opts.get("js-enabled-only") or opts.get("js-meta-only"):
            return 200, {"status": "ok"}
        acc, first = bad[0]
        msg = f"JetStream stream '{acc} > {first.name}' could not be recovered"
        if opts.get("details"):
            errors = [
                {
                    "type": "STREAM",
                    "account": a,
                    "stream": q.name,
                    "error": f"JetStream stream '{a} > {q.name}' could not be recovered",
                }
                for a, q in bad
            ]
            return 503, {"status": "error", "errors": errors}
        return 503, {"status": "unavailable", "error": msg}

    def jetstream_stats(self) -> dict[str, Any]:
        """JetStreamStats for ``/varz`` (empty until JetStream runs)."""
        view = self.jetstream_view()
        if view is None:
            return {}
        from node.monitor.jsz import jetstream_stats

        out: dict[str, Any] = {"stats": jetstream_stats(view)}
        if view.meta is not None:
            out["meta"] = dict(view.meta)
        return out

    def client_closed(self, session: ClientSession) -> None:
        if self.clients.pop(session.cid, None) is not None:
            retire(session.account, session)
            if session.stop_wall is None:
                session.stop_wall = self.wall_time()
            if session.connected:
                self.client_events.disconnected(session)
            if self.closed_clients.maxlen:
                self.closed_clients.append(session)
            if not self.clients and self._shutdown.is_set():
                self._all_closed.set()
            log.debug(
                "cid=%d event=client_closed reason=%r",
                session.cid,
                session.closing.value if session.closing else "",
            )

    # -- serving ----------------------------------------------------------

    async def _handle_client(self, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            ip, port = str(peer[0]), int(peer[1])
        except OSError:
            ip, port = "", 0
        await self.serve_stream(stream, (ip, port))

    async def serve_stream(self, stream: trio.abc.Stream, peer: tuple[str, int]) -> None:
        """Serve one accepted client stream (also used by in-memory tests)."""
        if self._shutdown.is_set():
            await trio.aclose_forcefully(stream)
            return
        cid = self.next_cid()
        if len(self.clients) >= self.cfg.max_connections:
            try:
                with trio.move_on_after(1):
                    info = self.base_info()
                    await stream.send_all(
                        info_bytes(info) + err_bytes("maximum connections exceeded")
                    )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            await trio.aclose_forcefully(stream)
            log.warning("cid=%d event=max_connections_exceeded", cid)
            return
        self.stats.total_connections += 1
        session = ClientSession(self, stream, cid, peer)
        self.clients[cid] = session
        try:
            await session.run()
        except Exception:  # last resort: this connection ends, the server does not
            self.internal_error("client_session", cid=cid)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until ``shutdown()``; then drain and return.

        Cancellation: cancelling stops everything without draining.
        """
        cfg = self.cfg
        port = 0 if cfg.port == -1 else cfg.port
        listeners = await trio.open_tcp_listeners(port, host=cfg.host)
        sockname = listeners[0].socket.getsockname()
        self.client_port = int(sockname[1])
        self.client_host = cfg.host
        self._log_startup()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.system_requests.on_reload(self.reload_soon)
            client_nursery_cm = trio.open_nursery()
            async with client_nursery_cm as clients:
                self._client_nursery = clients
                accept_scope = trio.CancelScope()

                async def accept() -> None:
                    with accept_scope:
                        await trio.serve_listeners(
                            self._handle_client, listeners, handler_nursery=clients
                        )

                clients.start_soon(accept)
                log.info(
                    "Listening for client connections on %s",
                    _hostport(cfg.host, self.client_port),
                )
                nursery.start_soon(self.client_events.run)
                if cfg.http_port:
                    from node.monitor import serve_monitor

                    await nursery.start(serve_monitor, self)
                if cfg.cluster is not None:
                    await nursery.start(self._run_cluster)
                if cfg.leafnodes is not None:
                    await nursery.start(self.leafnodes.run)
                if cfg.jetstream.enabled:
                    from node.jetstream.service import JetStreamService

                    log.info("Starting JetStream")
                    for acc in self.accounts.jetstream_accounts:
                        svc = JetStreamService(
                            self, acc, self.jetstream.storage if self.jetstream else None
                        )
                        self.js_services.append(svc)
                        if self.jetstream is None:
                            self.jetstream = svc
                        await nursery.start(svc.run)
                    self._serve_accounts_without_jetstream(nursery)
                self.write_ports_file()
                log.info("Server is ready")
                self._ready.set()
                task_status.started(self)
                await self._shutdown.wait()
                log.info("Initiating Shutdown...")
                accept_scope.cancel()
                for session in list(self.clients.values()):
                    session.close(ClosedReason.SERVER_SHUTDOWN)
                with trio.move_on_after(SHUTDOWN_DRAIN_S_MAX):
                    if self.clients:
                        await self._all_closed.wait()
                clients.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
        self._remove_ports_file()
        log.info("Server Exiting..")

    def _serve_accounts_without_jetstream(self, nursery: trio.Nursery) -> None:
        """nats-server's JetStream answers in the accounts JetStream does not run
        in, and the system account's operator requests in a cluster."""
        from node.jetstream.noaccount import MetaOps, NotEnabledResponder

        for acc in self.accounts:
            if not acc.jetstream:
                self.not_enabled[acc.name] = NotEnabledResponder(self, acc)
        if self.cfg.cluster is not None and not self.accounts.system.jetstream:
            MetaOps(self, self.accounts.system, nursery)

    def shutdown(self) -> None:
        """Stop accepting, close every client after flushing, and return from run()."""
        self._shutdown.set()

    def _log_startup(self) -> None:
        log.info("Starting trijet-server")
        log.info("  Version:  %s (nats-server %s compatible)", TRIJET_VERSION, NATS_VERSION)
        log.info("  Name:     %s", self.server_name)
        log.info("  ID:       %s", self.server_id)
        if self.cfg.config_file:
            log.info("Using configuration file: %s", self.cfg.config_file)

    def ports(self) -> dict[str, list[str]]:
        """URLs per listener, as nats-server's ports file has them."""
        host = self.cfg.host
        shown = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        scheme = "tls" if self.cfg.tls is not None else "nats"
        out: dict[str, list[str]] = {"nats": [f"{scheme}://{_hostport(shown, self.client_port)}"]}
        if self.http_port:
            out["monitoring"] = [f"http://{_hostport(shown, self.http_port)}"]
        if self.leafnodes.port and self.cfg.leafnodes is not None:
            lh = self.cfg.leafnodes.host
            lh = lh if lh not in ("0.0.0.0", "::", "") else "127.0.0.1"
            out["leafnodes"] = [f"nats://{_hostport(lh, self.leafnodes.port)}"]
        if self.cluster_port and self.cfg.cluster is not None:
            ch = self.cfg.cluster.host
            ch = ch if ch not in ("0.0.0.0", "::", "") else "127.0.0.1"
            out["cluster"] = [f"nats://{_hostport(ch, self.cluster_port)}"]
        return out

    def _ports_path(self) -> str | None:
        d = self.cfg.ports_file_dir
        if not d:
            return None
        return os.path.join(d, f"trijet-server_{os.getpid()}.ports")

    def write_ports_file(self) -> None:
        path = self._ports_path()
        if path is None:
            return
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.ports(), fh)
        os.replace(tmp, path)

    def _remove_ports_file(self) -> None:
        path = self._ports_path()
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _local(sub: Subscription) -> bool:
    """Whether ``sub`` is local interest for spoke leaf links: anything but a
    spoke link's own (a leaf link this server solicited)."""
    c = sub.client
    return not (getattr(c, "deliver_filter", None) is LEAF_LINK and c.solicited)


def _origin(sub: Subscription) -> bytes:
    """The leaf cluster of a hub-side leaf link's subscription (else b"")."""
    c = sub.client
    if getattr(c, "deliver_filter", None) is LEAF_LINK:
        return bytes(c.origin)
    return b""
