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
import collections
import json
import logging
import os
import random
import ssl
import sys
import time
from dataclasses import dataclass
from typing import Any

import trio

from node.auth import Authenticator
from node.config import ServerConfig
from node.protocol.connection import err_bytes, info_bytes
from node.router import Router
from node.session import ClientSession, ClosedReason, Subscription
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
    total_connections: int = 0


def _make_server_id() -> str:
    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_SERVER)
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())


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


class Server:
    """One trijet server process's shared state.

    Args:
        cfg: the typed configuration.
        rng: seeded randomness (queue choice, ping jitter, nonces).
    """

    def __init__(self, cfg: ServerConfig, rng: random.Random | None = None) -> None:
        self.cfg = cfg
        self.rng = rng or random.Random()
        self.server_id = _make_server_id()
        self.server_name = cfg.server_name or self.server_id
        self.sublist: Sublist[Subscription] = Sublist(cache_enabled=not cfg.disable_sublist_cache)
        self.router = Router(self.sublist, self.rng)
        self.authenticator = Authenticator(cfg.auth)
        self.ssl_context = build_ssl_context(cfg)
        self.stats = ServerStats()
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
        self.connect_urls: list[str] = []
        # JetStream is switched on by a later issue; until its API answers, the
        # server must not advertise it (clients would wait on a silent API).
        self.jetstream_enabled = False

    # -- small services for sessions --------------------------------------

    @staticmethod
    def wall_time() -> float:
        return time.time()

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
        info["remote_account"] = "$G"
        return info

    def client_closed(self, session: ClientSession) -> None:
        if self.clients.pop(session.cid, None) is not None:
            if session.stop_wall is None:
                session.stop_wall = self.wall_time()
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
        self._next_cid += 1
        cid = self._next_cid
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
        await session.run()

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
                if cfg.http_port:
                    from node.monitor import serve_monitor

                    await nursery.start(serve_monitor, self)
                self._write_ports_file()
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
        if self.cfg.jetstream.enabled and not self.jetstream_enabled:
            log.warning("JetStream was requested but is not available in this build yet")

    def ports(self) -> dict[str, list[str]]:
        """URLs per listener, as nats-server's ports file has them."""
        host = self.cfg.host
        shown = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        out: dict[str, list[str]] = {"nats": [f"nats://{_hostport(shown, self.client_port)}"]}
        if self.http_port:
            out["monitoring"] = [f"http://{_hostport(shown, self.http_port)}"]
        return out

    def _ports_path(self) -> str | None:
        d = self.cfg.ports_file_dir
        if not d:
            return None
        return os.path.join(d, f"trijet-server_{os.getpid()}.ports")

    def _write_ports_file(self) -> None:
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


def _hostport(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
