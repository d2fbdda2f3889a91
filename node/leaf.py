"""Leaf node connections: one account of this server joined to one account of another.

Theory of operation: a leaf connection (``LeafConn``) is either accepted on the
``leafnodes`` port (this server is the hub) or solicited towards a configured
remote (this server is the leaf).  The handshake is nats-server's: the
accepting side sends ``INFO`` at once (with ``info_on_connect``); the
soliciting side answers with ``CONNECT`` (its server id and name, ``headers``,
``jetstream``, ``domain``, ``remote_account``, credentials) and a ``PING``; the
accepting side checks the credentials, binds the link to its account and
answers with a second ``INFO`` (``connect_info``); both sides then send their
account's whole interest as ``LS+`` lines.

A link is bound to one account on each side and the wire carries no account:
``LS+ subject [queue weight]``, ``LS- subject [queue]``, ``LMSG subject [reply
| + reply queues | | queues] size`` and ``HMSG subject [reply] hsize size``.

Interest: the peer's ``LS+`` become subscriptions of the link in the bound
account's sublist (``Server.add_sub``), so routes and other leaf links hear of
them like any client's.  What a link tells its peer is the account's interest
minus the link's own: each account keeps the count of every (subject, queue)
over its local subscriptions, its routes' interest and its leafs' interest
(``Account.leaf_totals``; a queue group counts its members: one per local subscription,
a route's or a link's at the weight it announced), and each link what it has announced
(``LeafConn.sent``); a change of a count sends ``LS+``/``LS-`` to the links whose view
crossed zero, and a queue group's ``LS+ subject queue weight`` again at each change of its
weight, as nats-server (``node.leafnodes.LeafNodes.interest``).  A peer's queue weights
(``LeafConn.weights``) go on to routes (``RS+ ... weight``) and the other links.

Messages: the router hands a link each matching message once: a plain one
as a delivery-plan target (head ``LMSG <subject>``), otherwise through
``LeafConn.send_msg`` with the queue groups it was picked for (see
``node.jsdelivery.LEAF_LINK``); JetStream deliveries travel as ``LMSG <inbox>
<ack>@<subject>``, as over routes.  A message from the peer is published in
the bound account as a client's would be (to local subscribers, routes and
other leaf links), never back to the same link, serving only the queue groups
it names; plain ``LMSG`` runs take the parser's fast path and the plan.

JetStream: when both sides run JetStream, ``$JS.API.>`` does not cross the
link in either direction (each side's API stays local); a domain's
``$JS.<domain>.API.>`` subscription does, so ``$JS.hub.API.INFO`` from a leaf
client reaches the hub's JetStream.

A leaf that is a cluster (nats-server's rules): every node of it solicits its own link
(a *spoke* link, ``solicited``), so a spoke link is told local interest only (clients,
services, hub-side leaf links: ``Account.leaf_local_totals``), a message from a spoke link
goes no further than this server (not onto routes), and a message from a route never goes
out on a spoke link (``_R_.`` service replies excepted; ``Router.publish``, plans' routed
targets).  On the hub, a hub-side link's cluster (CONNECT's ``cluster``) is its
``origin``: its interest goes to routes as ``LS+ <origin> <account> ...`` and its messages
as ``LMSG <origin> <account> ... <hdr> <total>`` (nats-server's ``lnoc`` forms, to route
peers that announce ``lnoc``; the others get the merged ``RS+``/``RS-`` and ``RMSG``), and no
link to that cluster, on any hub node, is told of that interest or handed those messages
(nor does a route whose interest is that cluster's own get them).

TLS: ``tls {}`` on the listener: the INFO goes in the clear with ``tls_required``, then
the server handshake; on a remote: the hub's INFO is read in the clear, then the client
handshake (the hub's certificate checked against the remote's ``ca_file`` and the URL's
host), then the INFO is parsed (``_tls_start``).

Loops: each account has a loop-detection subject ``$LDS.<random>``, announced
on every link with the account's interest; a server that hears its own back
from a peer is in a loop: the link closes (``-ERR 'Loop detected …'``) and a
solicited link waits ``LOOP_DELAY_S`` before dialling again, as nats-server.

Reconnect: a solicited link that drops is dialled again after a backoff that
starts at ``RECONNECT_DELAY_S_MIN`` and doubles up to the remote's
``reconnect`` delay, trying the remote's URLs in turn.
"""

from __future__ import annotations

import hmac
import logging
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from node.jsdelivery import LEAF_LINK, split_js_ack
from node.protocol.connection import ProtocolConnection, ProtocolViolation, Role
from node.protocol.events import Connect, Err, Info, Ping, Pong, RMsg, RSub, RUnsub
from node.protocol.wire import PING_BYTES, PONG_BYTES, info_bytes
from node.serverlink import ServerLink
from node.session import Subscription

if TYPE_CHECKING:
    from node.accounts import Account
    from node.configtypes import LeafRemote
    from node.server import Server

log = logging.getLogger(__name__)

RECV_BYTES_MAX = 262144
HANDSHAKE_S_MAX = 5.0
RECONNECT_DELAY_S_MIN = 0.05
LOOP_DELAY_S = 30.0
"""How long a solicited link waits after a loop was detected (nats-server: 30 s)."""
LEAF_PING_INTERVAL_S = 30.0
CRLF = b"\r\n"
JS_API_PREFIX = b"$JS.API."
JS_ACK_PREFIX = b"$JS.ACK."
LDS_PREFIX = b"$LDS."

Key = tuple[bytes, bytes | None]


def _eq(a: Any, b: Any) -> bool:
    """Constant-time equality of two strings (False when either is not one)."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return hmac.compare_digest(a.encode(), b.encode())


def parse_leaf_url(url: str) -> tuple[str, int, str | None, str | None]:
    """``nats-leaf://user:pass@host:port`` → (host, port, user, password)."""
    parts = urlsplit(url if "://" in url else "nats-leaf://" + url)
    if parts.hostname is None:
        raise ValueError(f"invalid leafnode URL {url!r}")
    return parts.hostname, parts.port or 7422, parts.username, parts.password


def _js_api(subject: bytes) -> bool:
    """Whether ``subject`` (a subscription) is or overlaps ``$JS.API.>``."""
    return subject.startswith(JS_API_PREFIX) or subject in (b"$JS.>", b"$JS.*.>", b">")


def _any_js_api(subject: bytes) -> bool:
    """Whether ``subject`` is a JetStream API subscription (``$JS.API.>`` or a domain's)."""
    return subject.startswith(b"$JS.") and (
        subject.startswith(JS_API_PREFIX) or subject.split(b".", 3)[2:3] == [b"API"]
    )


class LeafConn(ServerLink):
    """One leaf connection (either direction), a client of its bound account.

    Args:
        server: the owning server.
        stream: the connected stream.
        remote: the configured remote (a solicited link), else None.
        url: the URL dialled (solicited).
        peer: (ip, port) of the remote end.
    """

    internal = False
    echo = False  # never handed back a message it brought
    headers = True
    no_responders = False
    verbose = False
    resp_perms = None
    deliver_filter = LEAF_LINK
    protocol = 1
    lang = ""
    version = ""
    user = None
    perms = None

    def __init__(
        self,
        server: Server,
        stream: trio.abc.Stream,
        *,
        remote: LeafRemote | None,
        url: str | None,
        peer: tuple[str, int],
    ) -> None:
        self.server = server
        self.stream = stream
        self.remote = remote
        self.solicited = remote is not None
        self.url = url
        self.ip, self.port = peer
        self.cid = server.next_cid()
        self.account: Account = server.accounts.global_account
        if remote is not None and remote.account:
            acc = server.accounts.get(remote.account)
            if acc is not None:
                self.account = acc
        self.name = ""
        self.remote_id = ""
        self.remote_name = ""
        self.remote_info: dict[str, Any] = {}
        self.remote_js = False
        self.remote_domain = ""
        #: the peer's cluster name (a leaf cluster's links share it: never one to another)
        self.remote_cluster = ""
        #: a hub-side link's leaf cluster (bytes; b"" on a spoke link): its interest and
        #: messages are marked with it on routes, and never handed back to that cluster
        self.origin = b""
        self.start_wall = server.wall_time()
        self.last_activity_wall = self.start_wall
        self.rtt_s = 0.0
        self._pings_out = 0
        self.in_msgs = self.in_bytes = self.out_msgs = self.out_bytes = 0
        #: the peer's interest, as this link's subscriptions in the bound account
        self.subs: dict[Key, Subscription] = {}
        #: the weights of the peer's queue subscriptions (its ``LS+ subject queue weight``)
        self.weights: dict[Key, int] = {}
        #: what this link has announced to the peer (a queue group's: the weight sent)
        self.sent: dict[Key, int] = {}
        self.registered = False
        #: the link runs over TLS
        self.tls = False
        #: bytes read before the TLS handshake (the hub's INFO), parsed first
        self._pending_in = b""
        self.loop_detected = False
        self.closing: str | None = None
        self._info_on_connect = False
        self._connect_seen = False
        self._init_link(server.cfg.max_pending)
        self._proto = ProtocolConnection(
            Role.LEAF,
            max_payload=server.cfg.max_payload,
            max_control_line=max(server.cfg.max_control_line, 4096),
        )

    # -- what the router and the server call --------------------------------

    @property
    def deny_js_api(self) -> bool:
        """Both sides run JetStream: ``$JS.API.>`` stays on each side."""
        return self.remote_js and self.account.jetstream

    def plan_ok(self, targets: tuple[tuple[Any, bytes, Any], ...], routes: Any) -> bool:
        """Whether a delivery plan may take this link's message as it is: neither this
        link nor another link to the same leaf cluster among its targets, and no routes
        unless the link's messages go plain to routes (a spoke link's never go, a
        hub-side link's with a cluster go as ``LMSG <origin>``)."""
        if routes and (self.solicited or self.origin):
            return False
        o = self.origin
        for t in targets:
            c = t[0]
            if c is self or (o and c.deliver_filter is LEAF_LINK and c.origin == o):
                return False
        return True

    def send_msg(
        self,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        queues: list[bytes],
    ) -> None:
        """Queue one LMSG/HMSG for the peer (the router's delivery)."""
        if self.closing is not None:
            return
        parts = [subject]
        if queues:
            if reply:
                parts += [b"+", reply]
            else:
                parts.append(b"|")
            parts.extend(queues)
        elif reply:
            parts.append(reply)
        if headers is None:
            parts.append(b"%d" % len(payload))
            data = b"LMSG " + b" ".join(parts) + CRLF + payload + CRLF
        else:
            hl = len(headers)
            parts += [b"%d" % hl, b"%d" % (hl + len(payload))]
            data = b"HMSG " + b" ".join(parts) + CRLF + headers + payload + CRLF
        self.out_msgs += 1
        self.out_bytes += len(payload)
        self._push(data, msg=False)

    def enqueue(self, data: bytes, msg_bytes: int = 0) -> None:
        """A MSG/HMSG op built for a client (JetStream's delivery paths): this
        link's subscriptions have an empty sid, so ``MSG subject [reply] size``
        only needs its verb made ``LMSG`` (``HMSG`` is the same on a leaf)."""
        if self.closing is not None:
            return
        if data.startswith(b"MSG "):
            data = b"L" + data
        self.out_msgs += 1
        self.out_bytes += msg_bytes
        self._push(data, msg=False)

    def remove_sub(self, sub: Subscription) -> None:
        """A subscription of this link ends (the router's ``max_msgs``: never set)."""
        key = (sub.subject, sub.queue)
        if self.subs.get(key) is sub:
            del self.subs[key]
            self.server.remove_sub(sub, weight=self.weights.pop(key, 1))

    def announce(self, key: Key, n: int) -> None:
        """Tell the peer the account's interest in ``key`` now counts ``n`` (``LS+`` when it
        appears, and a queue group's each new weight, as nats-server; ``LS-`` when it goes)."""
        subject, queue = key
        if n > 0:
            if queue is None:
                if key in self.sent:
                    return
            elif self.sent.get(key) == n:
                return
            if self.deny_js_api and _js_api(subject):
                return
            if not self.account.jetstream and _any_js_api(subject):
                return  # the "not enabled for account" answers are for this server's clients
            self.sent[key] = n
            if queue is None:
                self.send(b"LS+ " + subject + CRLF)
            else:
                self.send(b"LS+ %b %b %d\r\n" % (subject, queue, n))
        else:
            if self.sent.pop(key, None) is None:
                return
            if queue is None:
                self.send(b"LS- " + subject + CRLF)
            else:
                self.send(b"LS- %b %b\r\n" % (subject, queue))

    # -- outbound ---------------------------------------------------------

    def _ping_interval(self) -> float:
        return min(self.server.cfg.ping_interval_s, LEAF_PING_INTERVAL_S)

    def _ping_due(self, now: float) -> bool:
        if self._pings_out >= max(self.server.cfg.ping_max, 1) + 1:
            self.close("Stale Connection")
            return False
        self._ping_sent_at = now
        self._pings_out += 1
        self.send(PING_BYTES)
        return True

    # -- lifecycle --------------------------------------------------------

    async def run(self) -> None:
        """Handshake, then serve the link until it closes."""
        try:
            info_sent = await self._tls_start()
            if self.closing is not None:
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                nursery.start_soon(self._reader)
                if not self.solicited and not info_sent:
                    self.send(info_bytes(self.server.leafnodes.info(self, first=True)))
                await self._closed.wait()
                with trio.move_on_after(1):
                    await self._writer_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            if self.closing is None:
                self.closing = "Server Shutdown"
            self.server.leafnodes.closed(self)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await trio.aclose_forcefully(self.stream)

    async def _tls_start(self) -> bool:
        """TLS as nats-server's leaf links: the accepting side sends its INFO in the clear
        (``tls_required``), then both sides handshake; returns whether INFO was sent.
        A failure closes the link (``closing`` set)."""
        server = self.server
        if not self.solicited:
            lcfg = server.cfg.leafnodes
            tls = lcfg.tls if lcfg is not None else None
            ctx = server.leafnodes.server_ssl
            if tls is None or ctx is None:
                return False
            try:
                await self.stream.send_all(info_bytes(server.leafnodes.info(self, first=True)))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.closing = "Write Error"
                return True
            await self._tls_handshake(trio.SSLStream(self.stream, ctx, server_side=True), tls)
            return True
        tls = self.remote.tls if self.remote is not None else None
        if tls is None:
            return False
        # the hub's INFO comes in the clear: read it (bounded), handshake, then parse it
        buf = b""
        with trio.move_on_after(HANDSHAKE_S_MAX):
            while b"\r\n" not in buf and len(buf) < RECV_BYTES_MAX:
                try:
                    data = await self.stream.receive_some(RECV_BYTES_MAX)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    break
                buf += data
        if b"\r\n" not in buf:
            self.closing = "Read Error"
            return False
        ctx = self.server.leafnodes.client_ssl(tls)
        host = self.ip
        await self._tls_handshake(trio.SSLStream(self.stream, ctx, server_hostname=host), tls)
        self._pending_in = buf
        return False

    async def _tls_handshake(self, ssl_stream: trio.SSLStream[Any], tls: Any) -> None:
        with trio.move_on_after(tls.timeout_s) as cs:
            try:
                await ssl_stream.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError) as exc:
                log.error("cid=%d event=leafnode_tls_handshake_failed error=%r", self.cid, exc)
                self.closing = "TLS Handshake Error"
                return
        if cs.cancelled_caught:
            log.error("cid=%d event=leafnode_tls_handshake_timeout", self.cid)
            self.closing = "TLS Handshake Error"
            return
        self.stream = ssl_stream
        self.tls = True

    async def _reader(self) -> None:
        deadline = trio.current_time() + HANDSHAKE_S_MAX
        router = self.account.router
        if self._pending_in:
            data, self._pending_in = self._pending_in, b""
            self._proto.feed(data, self._on_plain, self._on_event, self._on_plain_run)
        while self.closing is None:
            try:
                with trio.move_on_at(deadline if not self.registered else float("inf")):
                    data = await self.stream.receive_some(RECV_BYTES_MAX)
                    if not data:
                        self.close("Client Closed")
                        return
                    self.last_activity_wall = self.server.wall_time()
                    router = self.account.router
                    self._proto.feed(
                        bytes(data), self._on_plain, self._on_event, self._on_plain_run
                    )
                    router.flush()
                    continue
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.close("Read Error")
                return
            if not self.registered:
                self.close("Authentication Timeout", "Authentication Timeout")
                return

    def _on_plain(self, subject: bytes, reply: bytes | None, payload: bytes) -> None:
        """A plain LMSG (no queues, no headers): along the subject's delivery plan
        when it has one and this link is not in it, else as any leaf message."""
        if not self.registered:
            self.close("Protocol Violation")
            return
        self.in_msgs += 1
        self.in_bytes += len(payload)
        stats = self.server.stats
        stats.in_msgs += 1
        stats.in_bytes += len(payload)
        router = self.account.router
        if reply is None or not reply.startswith(JS_ACK_PREFIX):
            plan = router._plans.get(subject)
            if (
                plan is not None
                and plan[0] == router.gen
                and (plan[1] or plan[2])
                and self.plan_ok(plan[1], plan[2])
            ):
                router._deliver_one(subject, plan[1], plan[2], reply, payload)
                return
        self._deliver(RMsg(b"", subject, reply, (), None, payload))

    def _on_plain_run(
        self, subject: bytes, replies: list[bytes | None], payloads: list[bytes]
    ) -> None:
        """Plain LMSGs to one subject in a row: one plan check, one batched delivery."""
        router = self.account.router
        plan = router._plans.get(subject)
        if (
            self.registered
            and plan is not None
            and plan[0] == router.gen
            and (plan[1] or plan[2])
            and self.plan_ok(plan[1], plan[2])
            and not any(r is not None and r.startswith(JS_ACK_PREFIX) for r in replies)
        ):
            k = len(payloads)
            nbytes = sum(map(len, payloads))
            self.in_msgs += k
            self.in_bytes += nbytes
            stats = self.server.stats
            stats.in_msgs += k
            stats.in_bytes += nbytes
            router._run(self, subject, replies, payloads, True)
            return
        if (
            self.registered
            and all(r is not None and r.startswith(JS_ACK_PREFIX) for r in replies)
            and not (self.deny_js_api and subject.startswith(JS_API_PREFIX))
        ):
            # a consumer's deliveries (a source's catch-up): each routed by the inbox as
            # ``_deliver`` routes it, without the per-message plan check and event
            k = len(payloads)
            nbytes = sum(map(len, payloads))
            self.in_msgs += k
            self.in_bytes += nbytes
            stats = self.server.stats
            stats.in_msgs += k
            stats.in_bytes += nbytes
            deliver_as = router.deliver_as
            for reply, payload in zip(replies, payloads, strict=True):
                assert reply is not None
                split = split_js_ack(reply)
                if split is not None:
                    deliver_as(subject, split[1], split[0], None, payload, True, self)
                else:
                    router.publish(self, subject, reply, None, payload, None, ())
            return
        for reply, payload in zip(replies, payloads, strict=True):
            self._on_plain(subject, reply, payload)

    def _deliver(self, ev: RMsg) -> None:
        """A message from the peer, published in the bound account as a client's
        (never back to this link; only the queue groups it names)."""
        if self.deny_js_api and ev.subject.startswith(JS_API_PREFIX):
            return
        router = self.account.router
        reply = ev.reply
        if reply is not None and reply.startswith(JS_ACK_PREFIX):
            split = split_js_ack(reply)
            if split is not None:
                # a consumer's delivery: routed by the inbox, shown with the stream subject
                router.deliver_as(
                    ev.subject, split[1], split[0], ev.headers, ev.payload, True, self
                )
                return
        router.publish(self, ev.subject, reply, ev.headers, ev.payload, None, ev.queues)

    def _on_event(self, ev: Any) -> None:
        if self.closing is not None:
            return
        t = type(ev)
        if t is RMsg:
            if not self.registered:
                self.close("Protocol Violation")
                return
            self.in_msgs += 1
            self.in_bytes += len(ev.payload) + (len(ev.headers) if ev.headers else 0)
            self.server.stats.in_msgs += 1
            self.server.stats.in_bytes += len(ev.payload)
            self._deliver(ev)
        elif t is RSub:
            self._on_lsub(ev)
        elif t is RUnsub:
            self._on_lunsub(ev)
        elif t is Ping:
            self.send(PONG_BYTES)
        elif t is Pong:
            self._pings_out = 0
            if self._ping_sent_at:
                self.rtt_s = trio.current_time() - self._ping_sent_at
        elif t is Connect:
            if self.solicited or self._connect_seen:
                self.close("Protocol Violation")
            else:
                self._on_connect(ev.fields)
        elif t is Info:
            self._on_info(ev.fields)
        elif t is Err:
            log.error("cid=%d event=leafnode_error text=%r", self.cid, ev.text)
            if "loop detected" in ev.text.lower():
                self.loop_detected = True
            self.close("Protocol Violation")
        elif t is ProtocolViolation:
            self.close("Parse Error", ev.err)

    # -- handshake --------------------------------------------------------

    def _on_connect(self, f: dict[str, Any]) -> None:
        """The accepting side: the soliciting server's CONNECT."""
        server = self.server
        lcfg = server.cfg.leafnodes
        assert lcfg is not None
        account = lcfg.account
        user, password = f.get("user"), f.get("pass")
        if lcfg.users:
            found = next((u for u in lcfg.users if _eq(user, u.user)), None)
            ok = found is not None and _eq(password, found.password)
            if found is not None and found.account:
                account = found.account
        else:
            ok = lcfg.user is None or (_eq(user, lcfg.user) and _eq(password, lcfg.password or ""))
        if not ok:
            log.error("cid=%d event=leafnode_auth_failed ip=%s", self.cid, self.ip)
            self.close("Authentication Failure", "Authorization Violation")
            return
        acc = server.accounts.get(account or "$G")
        if acc is None:
            self.close("Authentication Failure", "Authorization Violation")
            return
        self.account = acc
        self._connect_seen = True
        sid = f.get("server_id")
        self.remote_id = sid if isinstance(sid, str) else ""
        name = f.get("name")
        self.remote_name = name if isinstance(name, str) and name else self.remote_id
        self.name = self.remote_name
        self.remote_info = dict(f)
        self.remote_js = f.get("jetstream") is True
        dom = f.get("domain")
        self.remote_domain = dom if isinstance(dom, str) else ""
        cluster = f.get("cluster")
        self.remote_cluster = cluster if isinstance(cluster, str) else ""
        self.origin = self.remote_cluster.encode()
        if self.remote_id == server.server_id:
            self.close("Duplicate Route", "Loop detected")
            return
        self.send(info_bytes(server.leafnodes.info(self, first=False)))
        self._register()

    def _on_info(self, f: dict[str, Any]) -> None:
        server = self.server
        if not self.solicited:
            return  # the soliciting side's INFO (compression negotiation): nothing to do
        if self.registered:
            return  # an async update (new leafnode URLs)
        if f.get("connect_info"):
            if self._connect_seen:
                self._register()
            return
        if self._connect_seen:
            return
        sid = f.get("server_id")
        if not isinstance(sid, str) or not sid:
            self.close("Protocol Violation")
            return
        if sid == server.server_id:
            self.close("Duplicate Route")
            return
        self.remote_id = sid
        name = f.get("server_name")
        self.remote_name = name if isinstance(name, str) and name else sid
        self.name = self.remote_name
        self.remote_info = dict(f)
        self.remote_js = f.get("jetstream") is True
        dom = f.get("domain")
        self.remote_domain = dom if isinstance(dom, str) else ""
        cluster = f.get("cluster")
        self.remote_cluster = cluster if isinstance(cluster, str) else ""
        self._info_on_connect = f.get("info_on_connect") is True
        comp = f.get("compression")
        if isinstance(comp, str) and comp not in ("", "off", "not supported"):
            # tell a compressing hub that this side does not compress
            self.send(info_bytes({"compression": "off"}))
        self.send(server.leafnodes.connect_bytes(self))
        self.send(PING_BYTES)
        self._connect_seen = True
        if not self._info_on_connect:
            self._register()

    def _register(self) -> None:
        if self.registered:
            return
        self.registered = True
        self.server.leafnodes.register(self)
        log.info(
            "%s:%d - lid:%d - Leafnode connection created%s %s",
            self.ip,
            self.port,
            self.cid,
            " for account: " + self.account.name,
            self.remote_name,
        )
        self._ping_sent_at = trio.current_time()
        self._pings_out += 1
        self.send(PING_BYTES)

    # -- the peer's interest ----------------------------------------------

    def _on_lsub(self, ev: RSub) -> None:
        if not self.registered:
            self.close("Protocol Violation")
            return
        subject = ev.subject
        if subject.startswith(LDS_PREFIX) and subject == self.account.lds:
            self._loop()
            return
        if self.deny_js_api and _js_api(subject):
            return
        key = (subject, ev.queue)
        # a queue group's weight: its members on the peer's side (updated by later LS+)
        weight = max(ev.weight, 1) if ev.queue is not None else 1
        existing = self.subs.get(key)
        if existing is not None:
            if ev.queue is not None:
                before = self.weights.get(key, 1)
                self.weights[key] = weight
                self.server.reweight_sub(existing, weight - before)
            return
        sub = Subscription(self, subject, ev.queue, b"")
        sub.sid_sp = b""
        self.subs[key] = sub
        if ev.queue is not None:
            self.weights[key] = weight
        self.server.add_sub(sub, weight=weight)

    def _on_lunsub(self, ev: RUnsub) -> None:
        key = (ev.subject, ev.queue)
        sub = self.subs.pop(key, None)
        if sub is not None:
            self.server.remove_sub(sub, weight=self.weights.pop(key, 1))

    def _loop(self) -> None:
        acc = self.account.name
        msg = f'Loop detected for leafnode account="{acc}". Delaying attempt to reconnect for 30s'
        log.error("cid=%d %s", self.cid, msg)
        self.loop_detected = True
        self.close("Leafnode Loop Detected", msg)

    def drop_interest(self) -> None:
        remove = self.server.remove_sub
        for key, sub in self.subs.items():
            remove(sub, weight=self.weights.get(key, 1))
        self.subs.clear()
        self.weights.clear()
