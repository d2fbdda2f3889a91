"""One client connection: a reader task and a writer task in one nursery.

Theory of operation: the reader feeds received bytes to the sans-IO
``ProtocolConnection`` and acts on every complete operation of the chunk before
it reads again — publishes are routed synchronously into the subscribers'
outbound buffers, so there is never a task per message.  Each session owns an
outbound buffer (a list of byte strings and its byte count); ``enqueue``
appends and wakes the writer, which joins everything pending into one write
(write coalescing).  Over ``max_pending`` bytes the client is a slow consumer:
its buffer is dropped and it is closed, as nats-server does; a write that
takes longer than ``write_deadline`` is a slow consumer too.  Before that, a
reader whose chunk met a backed-up connection waits for it (``node.stall``),
then reads at most ``STALLED_RECV_BYTES_MAX`` at a time while that lasts.

The writer also keeps the session's timers: the auth deadline (no valid
CONNECT in time → ``Authentication Timeout``) and the ping timer (first PING
after at most 2 s plus jitter, then every ``ping_interval``; skipped while the
client is active once its RTT is known; after ``ping_max`` unanswered PINGs,
``Stale Connection``).  Time is trio's clock, so tests drive it with
``MockClock``.

Closing: whoever detects the end calls ``close(reason, err)``; an ``-ERR`` is
queued, the writer flushes it (bounded), then the nursery is cancelled and the
stream closed.  The server is told once, via ``server.client_closed``.
"""

from __future__ import annotations

import enum
import logging
import os
import ssl
import time
from typing import TYPE_CHECKING, Any

import trio

from node.auth import AuthedUser, Permissions
from node.outbound import Outbound
from node.protocol.connection import ProtocolConnection, ProtocolViolation, Role
from node.protocol.events import Connect, Err, HPub, Ping, Pong, Sub, Unsub
from node.protocol.wire import OK_BYTES, PING_BYTES, PONG_BYTES, err_bytes, info_bytes
from node.session_interest import SessionInterest, Subscription
from node.stall import wait_for_gates
from node.subjects import valid_literal_subject

if TYPE_CHECKING:
    from node.server import Server

log = logging.getLogger(__name__)
#: ``raft.trace`` stamps wanted (imported only then: a standalone server needs no raft)
_TRACE = bool(os.environ.get("TRIJET_RAFT_TRACE"))

RECV_BYTES_MAX = 262144
STALLED_RECV_BYTES_MAX = 65536
"""A reader whose last chunk stalled reads at most this much next (nats-server's
largest read buffer): the stall budget is per chunk, so a stalled producer is
held back per 64 KiB as there, not per 256 KiB."""
READ_YIELD_S = 0.001
"""A reader that finds its next chunk already there yields to the scheduler
only if it last yielded this long ago: a sync publisher's next publish (sent
as soon as its PubAck arrived) is read without a scheduling pass (an
``epoll_wait`` and trio's run-loop bookkeeping, ~20 us of CPU per publish),
while a client that keeps the socket full still lets the others in every
millisecond."""
FIRST_PING_S_MAX = 2.0
RTT_MEASUREMENT_INTERVAL_S = 3600.0
CLOSE_FLUSH_S_MAX = 1.0
DIRECT_WRITE_BYTES_MAX = 65536
"""Largest router batch for another client written by the routing task itself."""


_LITERAL_OK_CACHE: dict[bytes, bool] = {}
_LITERAL_OK_CACHE_MAX = 4096


def _literal_ok(subject: bytes) -> bool:
    """``valid_literal_subject`` with a bounded cache (pedantic publishers)."""
    ok = _LITERAL_OK_CACHE.get(subject)
    if ok is None:
        if len(_LITERAL_OK_CACHE) >= _LITERAL_OK_CACHE_MAX:
            _LITERAL_OK_CACHE.clear()
        ok = _LITERAL_OK_CACHE[subject] = valid_literal_subject(subject)
    return ok


class ClosedReason(enum.Enum):
    """Why a connection ended (strings as nats-server's /connz reports them)."""

    CLIENT_CLOSED = "Client Closed"
    AUTH_TIMEOUT = "Authentication Timeout"
    AUTH_VIOLATION = "Authentication Failure"
    SLOW_CONSUMER_PENDING = "Slow Consumer (Pending Bytes)"
    SLOW_CONSUMER_DEADLINE = "Slow Consumer (Write Deadline)"
    STALE = "Stale Connection"
    PARSE_ERROR = "Parse Error"
    PROTOCOL_VIOLATION = "Protocol Violation"
    MAX_PAYLOAD = "Maximum Message Payload Exceeded"
    MAX_CONTROL_LINE = "Maximum Control Line Exceeded"
    MAX_CONNECTIONS = "Maximum Connections Exceeded"
    MAX_SUBSCRIPTIONS = "Maximum Subscriptions Exceeded"
    TLS_HANDSHAKE = "TLS Handshake Failure"
    READ_ERROR = "Read Error"
    WRITE_ERROR = "Write Error"
    SERVER_SHUTDOWN = "Server Shutdown"
    BAD_CLIENT_PROTOCOL = "Bad Client Protocol Version"
    INTERNAL_ERROR = "Internal Error"


_CONNECT_BOOLS = (
    "verbose",
    "pedantic",
    "echo",
    "headers",
    "no_responders",
    "tls_required",
    "new_account",
)
_CONNECT_STRS = (
    "name",
    "lang",
    "version",
    "user",
    "pass",
    "auth_token",
    "jwt",
    "nkey",
    "sig",
    "account",
)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def connect_fields_typed(f: dict[str, Any]) -> bool:
    """Whether CONNECT's known fields (nulls already dropped) have the Go
    types nats-server's ``ClientOpts`` gives them (bool, string, int64)."""
    for key in _CONNECT_BOOLS:
        if key in f and not isinstance(f[key], bool):
            return False
    for key in _CONNECT_STRS:
        if key in f and not isinstance(f[key], str):
            return False
    p = f.get("protocol", 0)
    return type(p) is int and _INT64_MIN <= p <= _INT64_MAX


class ClientSession(Outbound, SessionInterest):
    """A client connection's state and tasks.

    Args:
        server: the owning server (sublist, router, auth, config, stats).
        stream: the connected byte stream (socket, TLS or in-memory).
        cid: the connection id.
        peer: (ip, port) of the remote end.
    """

    internal = False

    def __init__(self, server: Server, stream: trio.abc.Stream, cid: int, peer: tuple[str, int]):
        cfg = server.cfg
        self.server = server
        self.stream = stream
        self.cid = cid
        self.ip, self.port = peer
        self.start_wall = server.wall_time()
        self.start = trio.current_time()
        self.last_in = self.start
        self.last_activity_wall = self.start_wall
        # client options (nats-server defaults before CONNECT)
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.protocol = 0
        self.name = ""
        self.lang = ""
        self.version = ""
        self.connected = False
        self.user: AuthedUser | None = None
        self.connect_fields: dict[str, Any] | None = None
        self.perms: Permissions | None = None
        self.deliver_filter: Any = None
        self.resp_perms: Any = None
        self._replies: dict[bytes, list[float]] = {}
        self.tls_info: dict[str, Any] | None = None
        # subscriptions
        self.subs: dict[bytes, Subscription] = {}
        self.final_subs: list[Subscription] = []  # set at close, for /connz
        # stats
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self._init_outbound(cfg.max_pending, server.stall_gates)
        self._fd = -1  # a plain socket's descriptor (set after the handshake), else -1
        self._sending = False  # the writer is in send_all (a partial send's rest)
        self._closed = trio.Event()
        self._writer_done = trio.Event()
        self.closing: ClosedReason | None = None
        self.stop_wall: float | None = None
        # timers
        self.rtt_s = 0.0
        self._rtt_start = 0.0
        self._ping_interval = cfg.ping_interval_s
        self._pings_out = 0
        first = min(self._ping_interval, FIRST_PING_S_MAX)
        self._ping_at = self.start + first + server.rng.random() * first / 5
        auth_required = server.authenticator.required
        self._auth_deadline = self.start + cfg.auth.timeout_s if auth_required else float("inf")
        self._needs_auth = auth_required
        self.account = server.accounts.global_account  # bound at CONNECT
        self._bind(self.account)
        # PUB handler: the checking one until CONNECT says no checks are needed
        self._pub_handler: Any = self._on_pub
        self._pub_run_handler: Any = None
        self._mixed_handler: Any = None
        self._pubs_handler: Any = None
        self._first_pong_sent = False
        self.nonce: str | None = server.make_nonce() if server.authenticator.needs_nonce else None
        self._proto = ProtocolConnection(
            Role.SERVER,
            max_payload=cfg.max_payload,
            max_control_line=cfg.max_control_line,
        )

    def _bind(self, acc: Any) -> None:
        """Bind the connection to ``acc`` (before it has subscribed or published)."""
        self.account = acc
        router = acc.router
        self._publish = router.publish
        self._flush = router.flush
        self._touch = router.touch

    # -- lifecycle --------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it closes.

        Cancellation: cancelling closes the connection without flushing.
        """
        try:
            if not await self._handshake():
                return
            if isinstance(self.stream, trio.SocketStream):
                self._fd = self.stream.socket.fileno()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader)
                nursery.start_soon(self._writer)
                await self._closed.wait()
                with trio.move_on_after(CLOSE_FLUSH_S_MAX):
                    await self._writer_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            if self.closing is None:
                self.closing = ClosedReason.SERVER_SHUTDOWN
            self._drop_subs()
            self.server.client_closed(self)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await trio.aclose_forcefully(self.stream)

    async def _handshake(self) -> bool:
        """Send INFO and perform the TLS upgrade when configured."""
        tls = self.server.ssl_context
        cfg = self.server.cfg
        try:
            if tls is not None and cfg.tls is not None and cfg.tls.handshake_first:
                if not await self._tls_upgrade(tls):
                    return False
                await self.stream.send_all(info_bytes(self.server.client_info(self)))
                return True
            await self.stream.send_all(info_bytes(self.server.client_info(self)))
            if tls is not None:
                return await self._tls_upgrade(tls)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closing = ClosedReason.WRITE_ERROR
            return False
        return True

    async def _tls_upgrade(self, ctx: ssl.SSLContext) -> bool:
        cfg = self.server.cfg
        timeout = cfg.tls.timeout_s if cfg.tls is not None else 2.0
        ssl_stream = trio.SSLStream(self.stream, ctx, server_side=True)
        with trio.move_on_after(timeout) as cs:
            try:
                await ssl_stream.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError) as exc:
                log.info("cid=%d event=tls_handshake_failed error=%r", self.cid, exc)
                self.closing = ClosedReason.TLS_HANDSHAKE
                return False
        if cs.cancelled_caught:
            self.closing = ClosedReason.TLS_HANDSHAKE
            return False
        self.stream = ssl_stream
        version = ssl_stream.version() or ""
        cipher = ssl_stream.cipher()
        self.tls_info = {
            "tls_version": version.replace("TLSv", ""),
            "tls_cipher_suite": cipher[0] if cipher else "",
        }
        return True

    def close(self, reason: ClosedReason, err: str | None = None, *, flush: bool = True) -> None:
        """Begin closing: queue ``-ERR err`` (if given) and stop both tasks.

        Safe to call more than once; the first reason wins.
        """
        if self.closing is not None:
            return
        self.closing = reason
        self._proto.halt()
        self._open_gate()  # producers stalled on this connection go on
        self.stop_wall = self.server.wall_time()
        self._flush_on_close = flush
        if not flush:
            self._drop_pending()
        if err is not None:
            self._out.append(err_bytes(err))
        if reason in (ClosedReason.SLOW_CONSUMER_PENDING, ClosedReason.SLOW_CONSUMER_DEADLINE):
            self.server.stats.slow_consumers += 1
            self.account.slow_consumers += 1
            log.warning("cid=%d event=slow_consumer reason=%r", self.cid, reason.value)
        self._wake.set()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Return once the session has begun closing (``closing`` is set)."""
        await self._closed.wait()

    def _drop_subs(self) -> None:
        self.final_subs = list(self.subs.values())  # what /connz shows once closed
        remove = self.server.remove_sub
        for sub in self.subs.values():
            remove(sub)
        self.subs.clear()

    # -- outbound ---------------------------------------------------------

    def enqueue(self, data: bytes, msg_bytes: int = 0) -> None:
        """Append one message's bytes to the outbound buffer (the router's
        delivery), in batch mode: the router's ``flush()`` at the end of the
        batch accounts it, checks ``max_pending`` (over it the client is
        closed as a slow consumer) and writes it or wakes the writer.

        Args:
            data: the complete MSG/HMSG op.
            msg_bytes: its headers + payload size (``out_bytes``, as nats-server counts).
        """
        if self.closing is not None:
            return
        self.out_bytes += msg_bytes
        self.out_msgs += 1
        self._out.append(data)
        self._touch(self)

    def _overflow(self) -> None:
        self.close(ClosedReason.SLOW_CONSUMER_PENDING, flush=False)

    @property
    def first_pong_sent(self) -> bool:
        """The PONG to the client's first PING went out (async INFOs may follow)."""
        return self._first_pong_sent

    def send_info_update(self) -> None:
        """Send an async INFO (cluster topology changed: new connect_urls)."""
        info = self.server.client_info(self)
        info.pop("nonce", None)
        self._send_proto(info_bytes(info))

    def _send_proto(self, data: bytes) -> None:
        if self.closing is not None:
            return
        self._push(data, msg=False)

    async def _writer(self) -> None:
        stream = self.stream
        fd = self._fd
        deadline_s = self.server.cfg.write_deadline_s
        try:
            while True:
                with trio.move_on_at(min(self._ping_at, self._auth_deadline)):
                    await self._wake.wait()
                data = self._take()
                if data:
                    try:
                        if fd >= 0:  # one non-blocking send, no trio checkpoint
                            n = self._send_now(fd, data)
                            data = data[n:] if n < len(data) else b""
                        if data:
                            self._sending = True
                            with trio.fail_after(deadline_s):
                                await stream.send_all(data)
                            self._sending = False
                    except trio.TooSlowError:
                        self.close(ClosedReason.SLOW_CONSUMER_DEADLINE, flush=False)
                        return
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        self.close(ClosedReason.WRITE_ERROR, flush=False)
                        return
                    if self._gate is not None:
                        self._open_gate()  # all taken is written: stalled producers go on
                    if self.closing is not None and not self._out:
                        return  # the final -ERR is out: close now, not at the flush bound
                    continue  # drain again before looking at timers
                if self.closing is not None:
                    return
                now = trio.current_time()
                if now >= self._auth_deadline:
                    self.close(ClosedReason.AUTH_TIMEOUT, "Authentication Timeout")
                    continue
                if now >= self._ping_at:
                    self._ping_timer(now)
        finally:
            self._writer_done.set()

    @staticmethod
    def _send_now(fd: int, data: bytes) -> int:
        """Bytes of ``data`` one non-blocking send took (0 when the socket is full).

        Raises:
            OSError: the connection is broken.
        """
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0

    def flush_batch(self) -> None:
        """``Outbound.flush_batch`` with the common case of a request/reply
        hop done in one step: a router batch of another client's reader
        (a request for this responder, an answer for this requester) while
        this writer is idle and nothing else is queued is written at once --
        one non-blocking send, the rest (if any) left to the writer -- without
        the accounting, wake and take steps the general path goes through
        (``_account``, ``_batch_wake``, ``_write_held``, ``_take_held``).
        Anything else (a wake-up pending, this client's own reader holding,
        a send in progress, TLS, closing, a large batch) takes the general path.
        """
        out = self._out
        fd = self._fd
        if (
            self._wake_set
            or self._holding
            or self._counted
            or self._sending
            or fd < 0
            or self.closing is not None
            or self._gate is not None
        ):
            Outbound.flush_batch(self)
            return
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        size = len(data)
        out.clear()
        if size > DIRECT_WRITE_BYTES_MAX or size > self._max_pending:
            out.append(data)
            Outbound.flush_batch(self)
            return
        try:
            n = os.write(fd, data)
        except BlockingIOError:
            n = 0
        except OSError:
            self.close(ClosedReason.WRITE_ERROR, flush=False)
            return
        if n < size:
            rest = data[n:] if n else data
            out.append(rest)
            self._counted = 1
            self.pending_bytes = len(rest)
            if self.pending_bytes > self._stall_at:
                self._close_gate()
            self._wake_now()

    def _write_held(self, bytes_max: float = float("inf")) -> None:
        """Write what is queued now instead of waking the writer, when it can.

        After a chunk, the reader writes what the chunk queued for its own
        client; a router batch of another task (``_batch_wake``) writes a
        small one.  Only on a plain socket with the writer idle, and at most
        ``bytes_max`` pending: one non-blocking send, the rest (if any) left
        to the writer.
        """
        fd = self._fd
        if fd < 0 or self._sending or self.closing is not None or self.pending_bytes > bytes_max:
            self._wake_now()
            return
        data = self._take_held()
        try:
            n = self._send_now(fd, data)
        except OSError:
            self.close(ClosedReason.WRITE_ERROR, flush=False)
            return
        if n < len(data):
            rest = data[n:]
            self._out.insert(0, rest)
            self._counted += 1
            self.pending_bytes += len(rest)
            self._wake_now()
        elif self._gate is not None:
            self._open_gate()  # all taken is written: stalled producers go on

    def _batch_wake(self) -> None:
        """A router batch (another client's chunk, a stream's PubAcks) queued
        messages: a small batch is written at once when the writer is idle,
        saving the writer's wake-up (nats-server's readLoop flushes the
        clients it delivered to in the same way)."""
        self._write_held(DIRECT_WRITE_BYTES_MAX)

    def _ping_timer(self, now: float) -> None:
        need_rtt = (
            self.rtt_s == 0
            or not self._rtt_start
            or now - self._rtt_start > RTT_MEASUREMENT_INTERVAL_S
        )
        if need_rtt or now - self.last_in >= self._ping_interval:
            if self._pings_out + 1 > self.server.cfg.ping_max:
                self.server.stats.stale_connections += 1
                self.close(ClosedReason.STALE, "Stale Connection")
                return
            self._pings_out += 1
            self._rtt_start = now
            self._send_proto(PING_BYTES)
        self._ping_at = now + self._ping_interval

    # -- inbound ----------------------------------------------------------

    async def _receive(self) -> bytes:
        """The next chunk (b"" at end of stream).

        On a plain socket: non-blocking reads, waiting for readability only
        when there is nothing to read, and one checkpoint when data was there
        at once (the reader yields once per chunk, so a busy client never
        starves the others) — trio's ``receive_some`` adds a scheduling
        pass after every read, which a request/response exchange pays each
        time.  Other streams (TLS, in-memory) use ``receive_some``.  (Waiting
        for readability first after a read that emptied the socket saves the
        failing read, but measured slower under load in core_bench: less CPU
        share for the one-subject publisher, 0.41-0.56x against 0.56-0.99x.)

        Raises:
            trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError,
            OSError: the connection is broken.
        """
        fd = self._fd
        if fd < 0:
            data = await self.stream.receive_some(RECV_BYTES_MAX)
            return data if type(data) is bytes else bytes(data)  # TLS, memory: bytearray
        waited = False
        while True:
            try:
                data = os.read(fd, RECV_BYTES_MAX)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                waited = True
                continue
            if not waited:
                await trio.lowlevel.checkpoint()
            return data

    async def _reader(self) -> None:
        proto = self._proto
        now = trio.lowlevel.current_clock().current_time
        fd = self._fd
        read = os.read
        wait_readable = trio.lowlevel.wait_readable
        checkpoint = trio.lowlevel.checkpoint
        clock = time.perf_counter
        yielded = clock()
        gates = self.server.stall_gates
        held_back = False  # the last chunk stalled: read less
        while self.closing is None:
            try:
                if fd >= 0:
                    # ``_receive`` inlined for a plain socket (one coroutine less
                    # per chunk); a chunk that was there at once yields only when
                    # this task last yielded ``READ_YIELD_S`` ago
                    try:
                        data = read(fd, STALLED_RECV_BYTES_MAX if held_back else RECV_BYTES_MAX)
                    except BlockingIOError:
                        await wait_readable(fd)
                        yielded = clock()
                        continue
                    t = clock()
                    if t - yielded >= READ_YIELD_S:
                        await checkpoint()
                        yielded = t
                else:
                    data = await self._receive()
            except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError, OSError):
                self.close(ClosedReason.READ_ERROR, flush=False)
                return
            if not data:
                self.close(ClosedReason.CLIENT_CLOSED, flush=False)
                return
            self.last_in = now()
            if (
                not self.connected
                and self._auth_deadline != float("inf")
                and not proto.buffered_bytes()
                and data[:1] not in (b"C", b"c")
            ):
                # nats-server: before authenticating, an op must start with 'C'
                self._auth_violation()
                return
            in_msgs, in_bytes = self.in_msgs, self.in_bytes
            if _TRACE:  # bench.r3_trace: a client's bytes read (raft.trace)
                from raft import trace

                trace.stamp("cread", "-", 0, 0)
            self._holding = True  # ``_hold()``
            gates.producing = True  # a client producer's pass: gated buffers are noted
            try:
                proto.feed(
                    data,
                    self._pub_handler,
                    self._on_event,
                    self._pub_run_handler,
                    self._pubs_handler,
                    self._mixed_handler,
                )
                self._flush()
            except Exception:
                # last resort: a bug met while handling this client's input
                # closes this connection, never the server
                self.server.internal_error("client_input", cid=self.cid)
                self.close(ClosedReason.INTERNAL_ERROR)
                gates.met.clear()
                return
            finally:
                gates.producing = False
                self._holding = False  # ``_release()``
                if self._wake_set and not self._wake.is_set():
                    self._write_held()
            st = self.server.stats
            st.in_msgs += self.in_msgs - in_msgs
            st.in_bytes += self.in_bytes - in_bytes
            if gates.met:
                held_back = await wait_for_gates(self, gates.met)
            elif held_back:
                held_back = False

    def _on_pub(self, subject: bytes, reply: bytes | None, payload: bytes) -> None:
        """One PUB (the hot path): checks, +OK, delivery."""
        if self._needs_auth:
            self._auth_violation()
            return
        self.in_msgs += 1
        self.in_bytes += len(payload)
        if self.pedantic and not _literal_ok(subject):
            self._send_proto(err_bytes("Invalid Publish Subject"))
        # nats-server: permission check, then +OK, then delivery
        if self.perms is None or self._pub_permitted(subject):
            if self.verbose:
                self._send_proto(OK_BYTES)
            self._publish(self, subject, reply, None, payload)

    def _on_event(self, ev: Any) -> None:
        """Every operation other than PUB."""
        t = type(ev)
        if t is HPub:
            if self._needs_auth:
                self._auth_violation()
                return
            self.in_msgs += 1
            self.in_bytes += len(ev.headers) + len(ev.payload)
            if self.pedantic and not _literal_ok(ev.subject):
                self._send_proto(err_bytes("Invalid Publish Subject"))
            # nats-server: permission check, then +OK, then delivery
            if self.perms is None or self._pub_permitted(ev.subject):
                if self.verbose:
                    self._send_proto(OK_BYTES)
                self._publish(self, ev.subject, ev.reply, ev.headers, ev.payload)
        elif t is Ping:
            if self._needs_auth:
                self._auth_violation()
                return
            self._send_proto(PONG_BYTES)
            if not self._first_pong_sent:
                self._first_pong_sent = True
                if self.protocol >= 1 and self.connected:
                    self._send_proto(info_bytes(self.server.connect_info(self)))
        elif t is Pong:
            self._pings_out = 0
            if self._rtt_start:
                self.rtt_s = max(trio.current_time() - self._rtt_start, 1e-6)
        elif t is Sub:
            if self._needs_auth:
                self._auth_violation()
                return
            self._on_sub(ev)
        elif t is Unsub:
            if self._needs_auth:
                self._auth_violation()
                return
            self._on_unsub(ev)
        elif t is Connect:
            self._on_connect(ev.fields)
        elif t is ProtocolViolation:
            self._on_violation(ev)
        elif t is Err:
            self.close(ClosedReason.PROTOCOL_VIOLATION)
        # +OK from a client is ignored

    def _auth_violation(self) -> None:
        self.close(ClosedReason.AUTH_VIOLATION, "Authorization Violation")

    def _on_violation(self, ev: ProtocolViolation) -> None:
        if ev.err == "Maximum Payload Violation":
            reason = ClosedReason.MAX_PAYLOAD
        elif ev.err == "maximum control line exceeded":
            reason = ClosedReason.MAX_CONTROL_LINE
        elif ev.err is None:
            reason = ClosedReason.PARSE_ERROR
        else:
            reason = ClosedReason.PROTOCOL_VIOLATION
        log.debug("cid=%d event=protocol_violation detail=%r", self.cid, ev.detail)
        self.close(reason, ev.err)

    def _on_connect(self, f: dict[str, Any]) -> None:
        # nats-server: unmarshal into typed fields (a type error closes
        # silently; null leaves a field as it was), then authenticate, then
        # check the protocol version
        f = {k: v for k, v in f.items() if v is not None}
        if not connect_fields_typed(f):
            self.close(ClosedReason.PARSE_ERROR)
            return
        server = self.server
        #: what authenticates it, checked again when the configuration is reloaded
        self.connect_fields = f
        if server.authenticator.required:
            user = server.authenticator.check(f, self.nonce)
            if user is None:
                log.info("cid=%d event=auth_failed ip=%s", self.cid, self.ip)
                self._auth_violation()
                return
            self.user = user
            acc = server.accounts.get(user.account)
            if acc is None:  # a configured user always names a known account
                self._auth_violation()
                return
            if acc is not self.account:
                # a second CONNECT into another account: what was subscribed in the first
                # stays there no longer (nats-server delivers it nothing either)
                remove = server.remove_sub
                for sub in list(self.subs.values()):
                    remove(sub)
                self.subs.clear()
                self._bind(acc)
            if user.permissions is not None:
                self.perms = Permissions(user.permissions)
                self.resp_perms = self.perms.allow_responses
        if not 0 <= f.get("protocol", 0) <= 1:
            self.close(ClosedReason.BAD_CLIENT_PROTOCOL, "invalid client protocol")
            return
        self.verbose = f.get("verbose", self.verbose)
        self.pedantic = f.get("pedantic", self.pedantic)
        self.echo = f.get("echo", self.echo)
        self.headers = bool(f.get("headers", self.headers)) and not server.cfg.no_header_support
        self.no_responders = f.get("no_responders", self.no_responders)
        self.protocol = f.get("protocol", self.protocol)
        for key in ("name", "lang", "version"):
            v = f.get(key)
            if isinstance(v, str):
                setattr(self, key, v)
        if self.no_responders and not self.headers:
            self.close(ClosedReason.PROTOCOL_VIOLATION, "no responders requires headers support")
            return
        self._proto.headers = self.headers
        self.account.router.gen += 1  # echo, permissions: retire delivery plans
        self.connected = True
        server.client_events.connected(self)
        # nats-server's first RTT estimate: accept to CONNECT (until a PONG measures it)
        self.rtt_s = max(trio.current_time() - self.start, 1e-9)
        self.choose_pub_handlers()
        self._auth_deadline = float("inf")
        self._needs_auth = False
        if self.verbose:
            self._send_proto(OK_BYTES)

    def set_max_payload(self, max_payload: int) -> None:
        """A reloaded ``max_payload`` applies to this connection's next messages."""
        self._proto.max_payload = max_payload

    def send_err(self, line: bytes) -> None:
        """Queue a ``-ERR`` line built by ``err_bytes``."""
        self._send_proto(line)

    def choose_pub_handlers(self) -> None:
        """The fast publish paths when nothing is checked per message, else the checking one."""
        if not (self.verbose or self.pedantic or self.perms is not None):
            self._pub_handler, self._pub_run_handler, self._pubs_handler = (
                self.account.router.fast_publisher(self)
            )
            self._mixed_handler = self.account.router.fast_mixed(self)
        else:
            self._pub_handler, self._pub_run_handler, self._pubs_handler = self._on_pub, None, None
            self._mixed_handler = None
