"""Cluster routes: core NATS across nodes.

Theory of operation: every pair of nodes keeps one route connection (a full
mesh).  A node solicits the routes it is configured with and the ones it
learns by gossip (a peer's INFO names the route URL of a newly joined node);
the cluster port accepts routes from everyone.  The handshake: the soliciting
side sends ``CONNECT`` (cluster name, credentials) and its ``INFO`` at once;
the accepting side checks the name and credentials — with nats-server's
``-ERR`` text on failure — and answers with its ``INFO``.  A route is
registered once the peer's ``server_id`` is known; a second route to the same
peer (both sides dialled at once) is resolved deterministically: the route
solicited by the smaller server id survives, on both ends.

Interest: ``Interest`` aggregates local subscriptions per (subject, queue);
the first local subscription on a subject sends ``RS+ $G subject`` to every
route, the last removal ``RS-``; queue groups are announced with their member
count as weight.  A new route receives the whole local interest at once.  The
peer's interest lands in the router's route sublist (one entry per route,
subject and queue).  Leaf clusters' interest and messages travel in nats-server's
leaf-origin forms (``LS+``/``LS- <origin>``, ``LMSG <origin>``) only to peers whose INFO
announced ``lnoc`` (``LS- <origin>`` needs ``lnocu`` too); this server announces both.

Messages: a local publish is sent once to each route that has interest
(``RMSG``, or ``HMSG`` with headers), carrying the queue groups that this
route should serve because no local member exists; a message that arrived on
a route is never sent to another route (one hop).
"""

from __future__ import annotations

import json
import logging
import random
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from node.protocol.connection import ProtocolConnection, ProtocolViolation, Role
from node.protocol.events import (
    Connect,
    Err,
    Info,
    Ping,
    Pong,
    RMsg,
    RSub,
    RUnsub,
)
from node.protocol.wire import PING_BYTES, PONG_BYTES, info_bytes
from node.serverlink import ServerLink

if TYPE_CHECKING:
    from node.server import Server

log = logging.getLogger(__name__)

RECV_BYTES_MAX = 262144
ROUTE_PING_INTERVAL_S = 10.0
RECONNECT_DELAY_S_MIN = 0.05
RECONNECT_DELAY_S_MAX = 2.0
HANDSHAKE_S_MAX = 5.0
#: a peer's subscriptions in accounts unknown here, kept for a reload that adds them
UNKNOWN_INTEREST_MAX = 100_000


class RemoteSub:
    """A peer's interest, stored in the router's route sublist."""

    __slots__ = ("account", "origin", "queue", "route", "router", "subject", "weight")

    def __init__(
        self, route: Route, subject: bytes, queue: bytes | None, weight: int, router: Any = None
    ) -> None:
        self.route = route
        self.router = router  # the account's router whose route sublist holds it
        self.account: Any = None  # its account (set when a peer's RS+ made it)
        self.subject = subject
        self.queue = queue
        self.weight = weight
        #: the leaf cluster the interest comes from (a route's ``LS+ <origin>``), else b""
        self.origin = b""


class Interest:
    """Counts of one account's local subscriptions per (subject, queue), for RS+/RS-
    (a queue group's count is its weight: a leaf link's queue subscription counts the
    members it stands for).  Three per account: local interest (``RS+``), each leaf
    cluster's (``LS+ <origin>``, to peers announcing ``lnoc``), and both merged (``RS+``, to
    peers that do not: nats-server never sends them an origin form)."""

    def __init__(self, account: bytes = b"$G", origin: bytes = b"") -> None:
        self.counts: dict[tuple[bytes, bytes | None], int] = {}
        if origin:  # a leaf cluster's interest: nats-server's lnoc form
            self._add = b"LS+ " + origin + b" " + account + b" "
            self._del = b"LS- " + origin + b" " + account + b" "
        else:
            self._add = b"RS+ " + account + b" "
            self._del = b"RS- " + account + b" "

    def add(self, subject: bytes, queue: bytes | None, weight: int = 1) -> bytes | None:
        """Count ``weight`` more (a queue group's members; a plain subject counts one per
        subscription); return the RS+ line to broadcast, if any."""
        return self.change(subject, queue, weight)

    def remove(self, subject: bytes, queue: bytes | None, weight: int = 1) -> bytes | None:
        """Count ``weight`` less; return the RS-/RS+ line to broadcast, if any."""
        return self.change(subject, queue, -weight)

    def change(self, subject: bytes, queue: bytes | None, delta: int) -> bytes | None:
        """Change the count of (subject, queue) by ``delta``: the line that tells it
        (a plain subject's when it crosses zero, a queue group's new weight), if any."""
        key = (subject, queue)
        before = self.counts.get(key, 0)
        n = before + delta
        if n <= 0:
            if before <= 0:
                return None
            del self.counts[key]
            if queue is None:
                return self._del + subject + b"\r\n"
            return self._del + b"%s %s\r\n" % (subject, queue)
        self.counts[key] = n
        if queue is None:
            return self._add + subject + b"\r\n" if before <= 0 else None
        if n == before:
            return None
        return self._add + b"%s %s %d\r\n" % (subject, queue, n)

    def snapshot(self) -> bytes:
        """Every current interest as RS+ lines (for a new route)."""
        out = []
        for (subject, queue), n in self.counts.items():
            if queue is None:
                out.append(self._add + subject + b"\r\n")
            else:
                out.append(self._add + b"%s %s %d\r\n" % (subject, queue, n))
        return b"".join(out)


class Route(ServerLink):
    """One route connection (either direction).

    Args:
        server: the owning server.
        stream: the connected stream.
        solicited: True when this node dialled.
        url: the route URL dialled (solicited routes).
        peer: (ip, port) of the remote end.
        initial: bytes already read from the stream (the cluster port sniffs).
    """

    def __init__(
        self,
        server: Server,
        stream: trio.abc.Stream,
        *,
        solicited: bool,
        url: str | None,
        peer: tuple[str, int],
        initial: bytes = b"",
        configured: bool = False,
    ) -> None:
        self.server = server
        self.stream = stream
        self.solicited = solicited
        self.configured = configured
        self.url = url
        self.ip, self.port = peer
        self.initial = initial
        self.rid = server.next_rid()
        self.remote_id = ""
        self.remote_name = ""
        self.remote_info: dict[str, Any] = {}
        self.start_wall = server.wall_time()
        self.last_activity_wall = self.start_wall
        self.rtt_s = 0.0
        self._pings_sent = 0
        self._pongs_seen = 0
        self._pong_waiters: list[tuple[int, trio.Event]] = []
        self.in_msgs = self.out_msgs = self.in_bytes = self.out_bytes = 0
        # (account, subject, queue) -> the peer's interest
        self.remote_subs: dict[tuple[bytes, bytes, bytes | None], RemoteSub] = {}
        #: the same for accounts this server does not know: (account, subject, queue) -> weight
        self.unknown_subs: dict[tuple[bytes, bytes, bytes | None], int] = {}
        #: the peer's leaf clusters' interest: (origin, account, subject, queue) -> sub
        #: (origin b"" for a peer without lnocu: see ``keyed_without_origin``)
        self.origin_subs: dict[tuple[bytes, bytes, bytes, bytes | None], RemoteSub] = {}
        #: the peer understands ``LS+ <origin>``/``LMSG <origin>`` (its INFO's ``lnoc``), and
        #: ``LS- <origin>`` (``lnocu``); else it hears ``RS+``/``RS-``/``RMSG``/``HMSG`` only
        self.lnoc = False
        self.lnocu = False
        self.registered = False
        self.closing: str | None = None
        self._init_link(server.cfg.max_pending)
        self._connect_seen = False
        # the parser's fast path yields plain RMSGs of $G only
        g = server.accounts.global_account.router
        self._g = g
        self._publish = g.publish
        self._routed, self._routed_run = g.fast_routed(self)
        self._flush = g.flush
        self._dirty: set[Any] = set()  # other accounts' routers fed in this chunk
        self._proto = ProtocolConnection(
            Role.ROUTE,
            max_payload=server.cfg.max_payload,
            max_control_line=max(server.cfg.max_control_line, 4096),
        )

    # -- outbound ---------------------------------------------------------

    def _ping(self) -> None:
        self._pings_sent += 1
        self.send(PING_BYTES)

    def _wake_pong_waiters(self) -> None:
        seen = self._pongs_seen
        keep = []
        for n, ev in self._pong_waiters:
            if n <= seen:
                ev.set()
            else:
                keep.append((n, ev))
        self._pong_waiters = keep

    async def barrier(self, timeout_s: float) -> bool:
        """Wait until the peer has processed everything sent on this route so
        far (a PING answered), at most ``timeout_s``; False on timeout or close.

        Cancellation: nothing to undo.
        """
        if self.closing is not None:
            return False
        self._ping()
        ev = trio.Event()
        self._pong_waiters.append((self._pings_sent, ev))
        with trio.move_on_after(timeout_s):
            await ev.wait()
        return ev.is_set()

    def _ping_interval(self) -> float:
        return ROUTE_PING_INTERVAL_S

    def _ping_due(self, now: float) -> bool:
        self._ping_sent_at = now
        self._ping()
        return True

    # -- lifecycle --------------------------------------------------------

    async def run(self) -> None:
        """Handshake, then serve the route until it closes."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                nursery.start_soon(self._reader)
                if self.solicited:
                    self.send(self.server.route_connect_bytes(self.url))
                # both sides announce themselves at once, as nats-server does
                self.send(info_bytes(self.server.route_info()))
                await self._closed.wait()
                with trio.move_on_after(1):
                    await self._writer_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            if self.closing is None:
                self.closing = "Server Shutdown"
            self.server.route_closed(self)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await trio.aclose_forcefully(self.stream)

    async def _reader(self) -> None:
        data = self.initial
        handshake_deadline = trio.current_time() + HANDSHAKE_S_MAX
        while self.closing is None:
            if data:
                self.last_activity_wall = self.server.wall_time()
                if self.registered:
                    self._proto.feed(bytes(data), self._routed, self._on_event, self._routed_run)
                    self._flush()
                    if self._dirty:
                        for router in self._dirty:
                            router.flush()
                        self._dirty.clear()
                else:
                    self._proto.feed(bytes(data), self._not_yet, self._on_event)
                if self.closing is not None:
                    return
            if not self.registered and trio.current_time() > handshake_deadline:
                self.close("Authentication Timeout", "Authentication Timeout")
                return
            try:
                with trio.move_on_at(handshake_deadline if not self.registered else float("inf")):
                    data = await self.stream.receive_some(RECV_BYTES_MAX)
                    if not data:
                        self.close("Client Closed")
                        return
                    continue
                data = b""
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.close("Read Error")
                return

    def _not_yet(self, subject: bytes, reply: bytes | None, payload: bytes) -> None:
        self.close("Protocol Violation")  # a message before the handshake finished

    def _on_event(self, ev: Any) -> None:
        """One operation from the peer; plain RMSGs take the short way."""
        if type(ev) is RMsg and self.registered:
            self.in_msgs += 1
            self.in_bytes += len(ev.payload) + (len(ev.headers) if ev.headers else 0)
            if ev.account == b"$G" and not ev.origin:
                g = self._g
                g.rt_in_msgs += 1
                g.rt_in_bytes += len(ev.payload) + (len(ev.headers) if ev.headers else 0)
                self._publish(None, ev.subject, ev.reply, ev.headers, ev.payload, ev.queues)
            else:
                self._deliver_in(ev)
            return
        self._handle((ev,))

    def _handle(self, events: tuple[Any, ...] | list[Any]) -> None:
        for ev in events:
            if self.closing is not None:
                return
            t = type(ev)
            if not self.solicited and not self._connect_seen and t is not Connect:
                # the first thing an accepted route must say is CONNECT
                self.close("Authentication Failure", "Authorization Violation")
                return
            if t is RMsg:
                if not self.registered:
                    self.close("Protocol Violation")
                    return
                self.in_msgs += 1
                self.in_bytes += len(ev.payload) + (len(ev.headers) if ev.headers else 0)
                self._deliver_in(ev)
            elif t is RSub:
                self._on_rsub(ev)
            elif t is RUnsub:
                self._on_runsub(ev)
            elif t is Ping:
                self.send(PONG_BYTES)
            elif t is Pong:
                if self._ping_sent_at:
                    self.rtt_s = trio.current_time() - self._ping_sent_at
                self._pongs_seen += 1
                if self._pong_waiters:
                    self._wake_pong_waiters()
            elif t is Connect:
                if not _typed(ev.fields, _CONNECT_TYPES):
                    self.close("Parse Error")  # Go's Unmarshal fails: closed, no -ERR
                else:
                    self._on_connect(ev.fields)
            elif t is Info:
                if not _typed(ev.fields, _INFO_TYPES):
                    self.close("Parse Error")
                else:
                    self._on_info(ev.fields)
            elif t is Err:
                log.error("rid=%d event=route_error text=%r", self.rid, ev.text)
                self.close("Protocol Violation")
            elif t is ProtocolViolation:
                self.close("Parse Error", ev.err)

    def _on_connect(self, f: dict[str, Any]) -> None:
        server = self.server
        cluster = server.cfg.cluster
        assert cluster is not None
        if cluster.user is not None:
            if f.get("user") != cluster.user or f.get("pass") != cluster.password:
                log.error("rid=%d event=route_auth_failed ip=%s", self.rid, self.ip)
                self.close("Authentication Failure", "Authorization Violation")
                return
        theirs = f.get("cluster")
        if isinstance(theirs, str) and cluster.name and theirs != cluster.name:
            msg = f'Rejecting connection, cluster name "{theirs}" does not match "{cluster.name}"'
            log.error("rid=%d %s", self.rid, msg)
            self.close("Cluster Name Conflict", msg)
            return
        self._connect_seen = True

    def _on_info(self, f: dict[str, Any]) -> None:
        server = self.server
        sid = f.get("server_id")
        if not isinstance(sid, str) or not sid:
            self.close("Protocol Violation")
            return
        if not self.solicited and not self._connect_seen:
            self.close("Authentication Failure", "Authorization Violation")
            return
        if self.registered:
            if sid != self.remote_id:
                # gossip: another server joined; make sure we have a route to it
                server.learn_route(sid, f)
            else:
                self.remote_info.update(f)
                server.route_info_updated(self)
            return
        cluster = server.cfg.cluster
        assert cluster is not None
        theirs = f.get("cluster")
        if self.solicited and isinstance(theirs, str) and cluster.name and theirs != cluster.name:
            log.error(
                "rid=%d event=cluster_name_mismatch remote=%s local=%s",
                self.rid,
                theirs,
                cluster.name,
            )
            self.close("Cluster Name Conflict")
            return
        if sid == server.server_id:
            self.close("Duplicate Route")  # a route to ourselves
            if self.solicited and self.url:
                server.routes.self_urls.add(self.url)
            return
        if self.solicited and self.url:
            server.routes.url_ids[self.url] = sid
        self.remote_id = sid
        self.remote_name = str(f.get("server_name") or f.get("name") or sid)
        self.remote_info = dict(f)
        self.lnoc = f.get("lnoc") is True
        self.lnocu = self.lnoc and f.get("lnocu") is True
        self._proto.ls_minus_origin = f.get("lnocu") is True  # else its LS- has no origin
        if not server.register_route(self):
            self.close("Duplicate Route")
            return
        self.registered = True
        log.info(
            "%s:%d - rid:%d - Route connection created (%s)",
            self.ip,
            self.port,
            self.rid,
            self.remote_name,
        )
        if self.lnoc:
            snapshot = b"".join(acc.interest.snapshot() for acc in server.accounts)
            snapshot += b"".join(
                li.snapshot() for acc in server.accounts for li in acc.leaf_interest.values()
            )
        else:  # no origins for this peer: the merged interest
            snapshot = b"".join(acc.interest_all.snapshot() for acc in server.accounts)
        if snapshot:
            self.send(snapshot)
        self._ping_sent_at = trio.current_time()  # first RTT sample, as nats-server
        self._ping()

    def _deliver_in(self, ev: RMsg) -> None:
        """A routed message into its account (dropped when the account is unknown here)."""
        acc = self.server.accounts.by_bytes.get(ev.account)
        if acc is None:
            log.debug("rid=%d event=rmsg_unknown_account account=%r", self.rid, ev.account)
            return
        router = acc.router
        router.rt_in_msgs += 1
        router.rt_in_bytes += len(ev.payload) + (len(ev.headers) if ev.headers else 0)
        router.deliver_routed(ev)
        self._dirty.add(router)

    def _on_rsub(self, ev: RSub) -> None:
        if not self.registered:
            self.close("Protocol Violation")
            return
        if ev.origin:
            self._on_origin_sub(ev)
            return
        acc = self.server.accounts.by_bytes.get(ev.account)
        key = (ev.account, ev.subject, ev.queue)
        if acc is None:
            # kept (bounded) for when a configuration reload adds the account here
            log.debug("rid=%d event=rsub_unknown_account account=%r", self.rid, ev.account)
            if key in self.unknown_subs or len(self.unknown_subs) < UNKNOWN_INTEREST_MAX:
                self.unknown_subs[key] = ev.weight
            return
        existing = self.remote_subs.get(key)
        if existing is None and self.keyed_without_origin:
            existing = self.origin_subs.get((b"", *key))
        if existing is not None:
            self._reweigh(existing, ev.weight)  # a queue group's new weight
            return
        router = acc.router
        rs = RemoteSub(self, ev.subject, ev.queue, ev.weight, router)
        rs.account = acc
        self.remote_subs[key] = rs
        router.route_sublist.insert(rs)
        router.gen += 1
        self._tell_leafs(rs, _lw(ev.queue, ev.weight))

    def _on_origin_sub(self, ev: RSub) -> None:
        """A leaf cluster's interest (``LS+ <origin> ...``), kept apart from the rest."""
        acc = self.server.accounts.by_bytes.get(ev.account)
        if acc is None:
            return
        key = (ev.origin, ev.account, ev.subject, ev.queue)
        existing = self.origin_subs.get(key)
        if self.keyed_without_origin:
            key = (b"", *key[1:])
            existing = self.remote_subs.get(key[1:]) or self.origin_subs.get(key)
        if existing is not None:
            self._reweigh(existing, ev.weight)
            return
        router = acc.router
        rs = RemoteSub(self, ev.subject, ev.queue, ev.weight, router)
        rs.account = acc
        rs.origin = ev.origin
        self.origin_subs[key] = rs
        router.route_sublist.insert(rs)
        router.gen += 1
        self._tell_leafs(rs, _lw(ev.queue, ev.weight))

    def _on_runsub(self, ev: RUnsub) -> None:
        key = (ev.account, ev.subject, ev.queue)
        if self.keyed_without_origin:  # LS- (no origin) or RS-: the one entry, either kind
            rs = self.remote_subs.pop(key, None) or self.origin_subs.pop((b"", *key), None)
            if not ev.origin:
                self.unknown_subs.pop(key, None)
        elif ev.origin:
            rs = self.origin_subs.pop((ev.origin, *key), None)
        else:
            self.unknown_subs.pop(key, None)
            rs = self.remote_subs.pop(key, None)
        if rs is not None:
            self._withdraw(rs)

    @property
    def keyed_without_origin(self) -> bool:
        """The peer did not announce ``lnocu``: its ``LS-`` names no leaf cluster, so
        nats-server keys all its interest by (account, subject, queue) alone -- one entry
        for every leaf cluster's ``LS+`` of a subject and its own ``RS+`` (the first
        announced; later ones only reweigh a queue group), withdrawn by one ``LS-`` or
        ``RS-``.  Such ``LS+`` entries are kept in ``origin_subs`` under origin b"" (the
        entry itself keeps the first one's origin)."""
        return not self._proto.ls_minus_origin

    def _tell_leafs(self, rs: RemoteSub, delta: int) -> None:
        """The leaf links' view of the peer's interest ``rs`` changed by ``delta`` (nothing
        for interest kept aside for an account a reload added: it has no account)."""
        if rs.account is not None:
            self.server.leafnodes.interest(
                rs.account, rs.subject, rs.queue, delta, local=False, origin=rs.origin
            )

    def _reweigh(self, rs: RemoteSub, weight: int) -> None:
        """The peer announced ``rs`` again: a queue group's new weight (its members);
        nothing for a plain subject."""
        if rs.queue is None:
            return
        delta = _lw(rs.queue, weight) - _lw(rs.queue, rs.weight)
        rs.weight = weight
        if delta:
            self._tell_leafs(rs, delta)

    def _withdraw(self, rs: RemoteSub) -> None:
        """``rs`` (already out of this route's maps) leaves its router and the leaf
        links' view."""
        rs.router.route_sublist.remove(rs)
        rs.router.gen += 1
        self._tell_leafs(rs, -_lw(rs.queue, rs.weight))

    def account_added(self, acc: Any) -> None:
        """A reload added ``acc``: the peer's interest in it, heard before, applies now
        (to its router and the leaf links' view)."""
        for key in [k for k in self.unknown_subs if k[0] == acc.name_bytes]:
            weight = self.unknown_subs.pop(key)
            _, subject, queue = key
            rs = RemoteSub(self, subject, queue, weight, acc.router)
            rs.account = acc
            self.remote_subs[key] = rs
            acc.router.route_sublist.insert(rs)
            self._tell_leafs(rs, _lw(queue, weight))
        acc.router.gen += 1

    def account_removed(self, acc: Any) -> None:
        """A reload removed ``acc``: the peer's interest in it is kept aside again (and
        leaves the leaf links' view)."""
        for key in [k for k in self.remote_subs if k[0] == acc.name_bytes]:
            rs = self.remote_subs.pop(key)
            acc.router.route_sublist.remove(rs)
            self._tell_leafs(rs, -_lw(rs.queue, rs.weight))
            if len(self.unknown_subs) < UNKNOWN_INTEREST_MAX:
                self.unknown_subs[key] = rs.weight
        acc.router.gen += 1

    def drop_interest(self) -> None:
        """The route is gone: all the peer's interest (its own and its leaf clusters')
        leaves the routers and the leaf links' view."""
        subs = [*self.remote_subs.values(), *self.origin_subs.values()]
        self.remote_subs.clear()
        self.origin_subs.clear()
        for rs in subs:
            self._withdraw(rs)


def _lw(queue: bytes | None, weight: int) -> int:
    """What a peer's interest counts in the leaf links' view: a queue group its weight
    (its members over there), a plain subject one."""
    return max(weight, 1) if queue is not None else 1


def parse_route_url(url: str) -> tuple[str, int, str | None, str | None]:
    """``nats-route://user:pass@host:port`` → (host, port, user, password)."""
    parts = urlsplit(url if "://" in url else "nats-route://" + url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"invalid route URL {url!r}")
    return parts.hostname, parts.port, parts.username, parts.password


class RouteManager:
    """Solicits configured and gossiped routes, with backoff and jitter."""

    def __init__(self, server: Server, rng: random.Random) -> None:
        self.server = server
        self.rng = rng
        self.dialing: set[str] = set()
        self.self_urls: set[str] = set()
        self.url_ids: dict[str, str] = {}
        self.by_id: dict[str, Route] = {}

    async def solicit_forever(self, url: str, *, configured: bool) -> None:
        """Keep a route to ``url`` up (configured) or try ``connect_retries`` times."""
        server = self.server
        cluster = server.cfg.cluster
        assert cluster is not None
        delay = RECONNECT_DELAY_S_MIN
        attempts = 0
        while url not in self.self_urls:
            known = self.by_id.get(self.url_ids.get(url, ""))
            if known is not None:
                # already connected to that server (perhaps it dialled us)
                await known.wait_closed()
                continue
            host, port, _, _ = parse_route_url(url)
            try:
                stream = await trio.open_tcp_stream(host, port)
            except OSError:
                stream = None
            if stream is not None:
                route = Route(
                    server,
                    stream,
                    solicited=True,
                    url=url,
                    peer=(host, port),
                    configured=configured,
                )
                try:
                    await route.run()
                except Exception:  # last resort: this route ends, the server does not
                    server.internal_error("route_session", url=url)
                    await trio.aclose_forcefully(stream)
                if route.registered:
                    delay = RECONNECT_DELAY_S_MIN
                    attempts = 0
                if route.closing == "Duplicate Route" and not configured:
                    return
            attempts += 1
            if not configured and attempts > max(cluster.connect_retries, 0):
                return
            await trio.sleep(delay * (0.5 + self.rng.random()))
            delay = min(delay * 2, RECONNECT_DELAY_S_MAX)


_STR, _INT, _BOOL, _STRS = "str", "int", "bool", "strs"
# Go struct field types of what a route sends (nats-server's connectInfo and
# Info): a value of another type fails its Unmarshal and closes the route.
_CONNECT_TYPES = {
    **dict.fromkeys(("echo", "verbose", "pedantic", "tls_required", "headers", "dynamic"), _BOOL),
    **dict.fromkeys(("lnoc", "lnocu", "gateway_conn"), _BOOL),
    **dict.fromkeys(("user", "pass", "name", "cluster", "gateway"), _STR),
}
_INFO_TYPES = {
    **dict.fromkeys(("server_id", "server_name", "name", "version", "go", "host"), _STR),
    **dict.fromkeys(("ip", "cluster", "domain", "nonce", "git_commit", "compression"), _STR),
    **dict.fromkeys(("port", "proto", "max_payload", "route_pool_size"), _INT),
    **dict.fromkeys(("headers", "auth_required", "tls_required", "tls_verify"), _BOOL),
    **dict.fromkeys(("jetstream", "cluster_dynamic", "lnoc", "lnocu", "ln"), _BOOL),
    **dict.fromkeys(("connect_urls", "ws_connect_urls", "leafnode_urls"), _STRS),
}
_INT64 = range(-(2**63), 2**63)


def _typed(f: dict[str, Any], types: dict[str, str]) -> bool:
    """Whether the known fields of a route's CONNECT/INFO have their Go types
    (null leaves a field at its zero value, so it passes)."""
    for key, kind in types.items():
        v = f.get(key)
        if v is None:
            continue
        if kind == _STR:
            ok = isinstance(v, str)
        elif kind == _BOOL:
            ok = isinstance(v, bool)
        elif kind == _INT:
            ok = type(v) is int and v in _INT64
        else:
            ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
        if not ok:
            return False
    return True


def route_info_json(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()
