"""The server's route side: ``ServerRoutes``, a part of ``node.server.Server``.

Theory of operation: a cluster port accepts both routes and Raft links (the
first bytes tell them apart: ``RAFT_MAGIC_PREFIX``); configured routes are
solicited for as long as they stay configured, gossiped ones while their
server is unknown.  Of two routes to the same server the one solicited by the
smaller server id is kept on both ends.  The client URLs every route's peer
advertises are merged into ``connect_urls`` (sent to clients in INFO updates).
The state lives on the ``Server`` (its ``__init__`` sets it up); this class
holds the methods only.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from node.nextroute import LEADERSHIP_CHANGE
from node.protocol.wire import info_bytes
from node.route import Route, RouteManager, parse_route_url
from node.version import NATS_VERSION

if TYPE_CHECKING:
    from node.config import ServerConfig
    from node.session import ClientSession

log = logging.getLogger("node.server")

#: bound on waiting for the routes' peers to catch up with this server's interest
ROUTES_BARRIER_S_MAX = 1.0

RAFT_MAGIC_PREFIX = b"TJRAFT"


class ServerRoutes:
    """Routes of a ``Server``: handshakes, gossip, the cluster listener."""

    cfg: ServerConfig
    server_id: str
    server_name: str
    jetstream_enabled: bool
    client_port: int
    cluster_port: int
    clients: dict[int, ClientSession]
    routes: RouteManager
    route_listeners: list[Callable[[Route], None]]
    route_solicits: dict[str, trio.CancelScope]
    client_urls_by_server: dict[str, list[str]]
    connect_urls: list[str]
    raft_links: Any
    _next_rid: int
    _route_nursery: trio.Nursery | None

    if TYPE_CHECKING:

        def internal_error(self, what: str, **where: Any) -> None: ...

    def next_rid(self) -> int:
        self._next_rid += 1
        return self._next_rid

    def my_client_urls(self) -> list[str]:
        """This server's client URLs as advertised to clients (host:port)."""
        cfg = self.cfg
        if cfg.client_advertise:
            return [cfg.client_advertise]
        host = cfg.host
        if host in ("0.0.0.0", "::", ""):
            host = _primary_ip()
        return [_hostport(host, self.client_port)]

    def route_url(self) -> str:
        cluster = self.cfg.cluster
        assert cluster is not None
        host = cluster.advertise or cluster.host
        if host in ("0.0.0.0", "::", ""):
            host = _primary_ip()
        if ":" in host and not host.startswith("["):
            return f"nats-route://{host}/"
        return f"nats-route://{host}:{self.cluster_port}/"

    def route_info(self) -> dict[str, Any]:
        """The INFO this server sends on a route."""
        cfg = self.cfg
        cluster = cfg.cluster
        assert cluster is not None
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": NATS_VERSION,
            "proto": 3,
            "go": f"python{sys.version_info.major}.{sys.version_info.minor}",
            "host": cluster.host,
            "port": self.cluster_port,
            "headers": not cfg.no_header_support,
            "max_payload": cfg.max_payload,
            "cluster": cluster.name or "",
            "connect_urls": [] if cluster.no_advertise else self.my_client_urls(),
            "ip": self.route_url(),
            "lnoc": True,
            "lnocu": True,
            # no s2 codec: announced as nats-server configured ``compression: off`` does, so
            # a peer configured for s2 (or its default ``accept``) settles on off
            "compression": "off",
        }
        if self.jetstream_enabled:
            info["jetstream"] = True
            if cfg.jetstream.domain:
                info["domain"] = cfg.jetstream.domain
        if cluster.user is not None:
            info["auth_required"] = True
        return info

    def route_connect_bytes(self, url: str | None) -> bytes:
        cluster = self.cfg.cluster
        assert cluster is not None
        user, password = cluster.user, cluster.password
        if url:
            _, _, u, p = parse_route_url(url)
            if u is not None:
                user, password = u, p
        fields: dict[str, Any] = {
            "echo": True,
            "verbose": False,
            "pedantic": False,
            "tls_required": False,
            "headers": True,
            "name": self.server_id,
            "cluster": cluster.name or "",
            "lnoc": True,
        }
        if user is not None:
            fields["user"] = user
            fields["pass"] = password or ""
        return b"CONNECT " + json.dumps(fields, separators=(",", ":")).encode() + b"\r\n"

    def register_route(self, route: Route) -> bool:
        """Register a handshaken route; False when it duplicates one we keep.

        The route listeners hear of it either way (a duplicate solicited
        route still tells which configured URL reaches that server)."""
        for listener in self.route_listeners:
            listener(route)
        by_id = self.routes.by_id
        existing = by_id.get(route.remote_id)
        if existing is not None:
            # keep the route solicited by the smaller server id, on both ends
            mine_smaller = self.server_id < route.remote_id
            new_wins = route.solicited == mine_smaller and existing.solicited != mine_smaller
            if not new_wins:
                log.debug("rid=%d event=duplicate_route remote=%s", route.rid, route.remote_id)
                return False
            existing.close("Duplicate Route")
            existing.drop_interest()
        by_id[route.remote_id] = route
        # tell the other routes about the newcomer (gossip) and vice versa
        newcomer = route.remote_info
        if newcomer.get("ip"):
            gossip = info_bytes(
                {
                    "server_id": route.remote_id,
                    "server_name": route.remote_name,
                    "cluster": newcomer.get("cluster", ""),
                    "ip": newcomer["ip"],
                    "connect_urls": newcomer.get("connect_urls", []),
                }
            )
            for other in by_id.values():
                if other is not route:
                    other.send(gossip)
        self._set_client_urls(route.remote_id, newcomer.get("connect_urls") or [])
        return True

    async def routes_barrier(self, timeout_s: float = ROUTES_BARRIER_S_MAX) -> None:
        """Wait until every route's peer has processed what this server sent
        it so far (e.g. the interest of a new stream's subjects), each at most
        ``timeout_s``.  Cancellation: nothing to undo."""
        routes = list(self.routes.by_id.values())
        if not routes:
            return
        async with trio.open_nursery() as nursery:
            for route in routes:
                nursery.start_soon(route.barrier, timeout_s)

    def route_info_updated(self, route: Route) -> None:
        self._set_client_urls(route.remote_id, route.remote_info.get("connect_urls") or [])

    def learn_route(self, server_id: str, info: dict[str, Any]) -> None:
        """Gossip about ``server_id``: dial it unless connected or it is us."""
        if server_id == self.server_id or server_id in self.routes.by_id:
            return
        url = info.get("ip")
        if not isinstance(url, str) or not url or url in self.routes.dialing:
            return
        if self._route_nursery is None:
            return
        self.routes.dialing.add(url)

        async def dial() -> None:
            try:
                await self.routes.solicit_forever(url, configured=False)
            finally:
                self.routes.dialing.discard(url)

        self._route_nursery.start_soon(dial)

    def route_closed(self, route: Route) -> None:
        registered = self.routes.by_id.get(route.remote_id) is route
        if registered:
            del self.routes.by_id[route.remote_id]
            route.drop_interest()
            self._set_client_urls(route.remote_id, [])
            log.info(
                "%s:%d - rid:%d - Router connection closed: %s",
                route.ip,
                route.port,
                route.rid,
                route.closing,
            )
        self._answer_forwarded_pulls(route, answer=registered)

    def _answer_forwarded_pulls(self, route: Route, *, answer: bool) -> None:
        """The pulls sent to a consumer's leader over ``route`` (now closed)
        hear ``409 Leadership Change`` (``node.nextroute``); a duplicate
        route's (``answer`` False) are forgotten."""
        for acc in list(self.accounts.by_name.values()):
            router = acc.router
            replies = router.forwarded.route_lost(route)
            if not answer or not replies:
                continue
            for reply in replies:
                router.publish(None, reply, None, LEADERSHIP_CHANGE, b"")
            router.flush()
            log.info(
                "event=forwarded_pulls_answered rid=%d account=%s pulls=%d",
                route.rid,
                acc.name,
                len(replies),
            )

    def _set_client_urls(self, server_id: str, urls: list[str]) -> None:
        if urls:
            self.client_urls_by_server[server_id] = list(urls)
        else:
            self.client_urls_by_server.pop(server_id, None)
        cluster = self.cfg.cluster
        if cluster is None or cluster.no_advertise:
            return
        merged = list(self.my_client_urls())
        for sid in sorted(self.client_urls_by_server):
            for u in self.client_urls_by_server[sid]:
                if u not in merged:
                    merged.append(u)
        if merged != self.connect_urls:
            self.connect_urls = merged
            for session in self.clients.values():
                # not before the first PONG, as nats-server (firstPongSent): a client that
                # sent CONNECT+PING reads the next line as the PONG (nats-py then stays
                # "connecting" and never writes its buffered SUBs and PUBs); the first PONG
                # is followed by an INFO with the URLs of the moment anyway
                if session.protocol >= 1 and session.connected and session.first_pong_sent:
                    session.send_info_update()

    async def _serve_cluster_conn(self, stream: trio.SocketStream) -> None:
        """The cluster port: sniff the first bytes; raft links or a route."""
        try:
            peer = stream.socket.getpeername()
            ip, port = str(peer[0]), int(peer[1])
        except OSError:
            ip, port = "", 0
        first = b""
        with trio.move_on_after(self.cfg.auth.timeout_s):
            try:
                first = await stream.receive_some(4096)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await trio.aclose_forcefully(stream)
                return
        if first and first.startswith(RAFT_MAGIC_PREFIX) and self.raft_links is not None:
            await self.raft_links.serve_stream(stream, bytes(first))
            return
        route = Route(self, stream, solicited=False, url=None, peer=(ip, port), initial=first)
        try:
            await route.run()
        except Exception:  # last resort: this route ends, the server does not
            self.internal_error("route_session", peer=f"{ip}:{port}")
            await trio.aclose_forcefully(stream)

    async def _run_cluster(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        cluster = self.cfg.cluster
        assert cluster is not None
        port = 0 if cluster.port == -1 else cluster.port
        listeners = await trio.open_tcp_listeners(port, host=cluster.host)
        self.cluster_port = int(listeners[0].socket.getsockname()[1])
        log.info("Cluster name is %s", cluster.name)
        log.info(
            "Listening for route connections on %s", _hostport(cluster.host, self.cluster_port)
        )
        self._set_client_urls(self.server_id, [])
        async with trio.open_nursery() as nursery:
            self._route_nursery = nursery
            nursery.start_soon(trio.serve_listeners, self._serve_cluster_conn, listeners)
            task_status.started()
            for url in cluster.routes:
                nursery.start_soon(self._solicit_configured, url)

    async def _solicit_configured(self, url: str) -> None:
        self.routes.dialing.add(url)
        scope = self.route_solicits[url] = trio.CancelScope()
        try:
            with scope:
                await self.routes.solicit_forever(url, configured=True)
        finally:
            self.routes.dialing.discard(url)
            if self.route_solicits.get(url) is scope:
                del self.route_solicits[url]

    def solicit_route(self, url: str) -> None:
        """Keep a route to ``url`` up from now on (a reload added it)."""
        if self._route_nursery is not None:
            self._route_nursery.start_soon(self._solicit_configured, url)


def _primary_ip() -> str:
    """The address other hosts most likely reach us on (no traffic is sent)."""
    import socket

    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _hostport(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
