"""Peer links: how Raft frames travel between nodes.

Theory of operation
-------------------
:class:`PeerLinks` is what a group driver needs: register a handler for its
group id, and ``send(peer, group, payload)`` without blocking (a full queue
drops — Raft retransmits). Implementations: :class:`TcpPeerLinks` here,
``chaos.net.FakePeerLinks`` for tests and simulation.

:class:`TcpPeerLinks` keeps **one TCP connection per peer pair** carrying every
group (frames of :mod:`raft.wire`, multiplexed by group id). The member with
the smaller node id dials; the other accepts — so there is never a duplicate
pair. A dialer reconnects with exponential backoff and jitter. Each
connection has a bounded send queue (``peer_queue_bytes_max``); frames that do
not fit are dropped and counted. While a peer is disconnected, frames for it
are dropped.

``send`` writes a frame straight into the socket (one non-blocking
``os.write``, what the kernel takes) when nothing is queued for that peer and
its writer task is not in the middle of a write, so a driver's append-entries
or answer is on the wire before the driver goes on to its fsync, with no task
hand-over; whatever the kernel does not take right away is queued for the
writer task, which keeps the byte order.  Over TLS every frame goes through
the writer task.

Link events for hibernating groups (:mod:`raft.quiet`, :mod:`raft.liveness`):
a link that sent nothing in a beat (``beat_s``) sends a ping frame, so a
peer's silence means trouble; a link that comes up, goes down, or whose peer
falls silent for ``silence_s`` is reported to every group that ``watch``-es.

Handshake (bounded sizes, ``handshake_timeout_s``; nothing else from the peer
is decoded before it succeeds)::

    dialer   -> acceptor  LINK_MAGIC | u8 len | dialer_id | nonce_d (32 B)
    acceptor -> dialer    u8 len | acceptor_id | nonce_a (32 B)
    dialer   -> acceptor  HMAC(secret, "dialer"   | nonce_d | nonce_a | ids)
    acceptor -> dialer    HMAC(secret, "acceptor" | nonce_d | nonce_a | ids)

The dialer proves knowledge of the cluster secret first, so an acceptor never
hands an HMAC to an unauthenticated party. A wrong proof closes the connection
and is logged (``event=link_auth_failed``); the groups carry on over their
other links.

The node's single cluster port is shared with NATS routes: a dialing raft link
sends :data:`LINK_MAGIC` first, the node's listener sniffs it and hands the
connection over with :meth:`TcpPeerLinks.serve_stream` (passing the bytes it
already read). :meth:`TcpPeerLinks.serve` runs a listener of its own for
standalone use. TLS is optional: pass an ``ssl.SSLContext``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import random
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

import trio

from raft.liveness import BEAT_S, PING_GROUP, SILENCE_S, PeerLiveness
from raft.wire import FRAME_BYTES_MAX_DEFAULT, FrameDecoder, WireError, encode_frame

__all__ = ["LINK_MAGIC", "PeerLinks", "TcpPeerLinks"]

log = logging.getLogger(__name__)

LINK_MAGIC = b"TJRAFT1\n"
NONCE_BYTES = 32
NODE_ID_BYTES_MAX = 255

FrameHandler = Callable[[str, bytes], None]
PeerEventHandler = Callable[[str], None]
#: after a late beat, how long the readers get before silence is judged
STALL_READ_S = 0.01
#: one read of a link takes at most this much
LINK_RECV_BYTES_MAX = 1 << 20
#: a link reader that keeps finding data at once yields this often
READ_YIELD_S = 0.001


class PeerLinks(Protocol):
    """Frame transport between this node and its peers, shared by all groups."""

    node_id: str

    def register(self, group_id: str, handler: FrameHandler) -> None:
        """Deliver frames for ``group_id`` to ``handler(peer_id, payload)`` (must not block)."""

    def unregister(self, group_id: str) -> None:
        """Stop delivering frames for ``group_id`` (later frames are dropped)."""

    def send(self, peer_id: str, group_id: str, payload: bytes) -> bool:
        """Queue a frame for ``peer_id``; False if dropped (no link, queue full)."""


class WatchedPeerLinks(PeerLinks, Protocol):
    """Peer links that also report link events (what hibernating groups need,
    :mod:`raft.quiet`): optional; a driver over links without them never
    lets its group hibernate."""

    def watch(self, group_id: str, handler: PeerEventHandler) -> None:
        """Call ``handler(peer_id)`` (must not block) whenever the link to a
        peer comes up, goes down or falls silent; until ``unregister(group_id)``."""

    def last_heard(self, peer_id: str) -> float | None:
        """trio clock time of the last bytes from ``peer_id`` (None: never)."""


class HandshakeError(Exception):
    """The peer did not complete the link handshake."""


class _Reader:
    """Exact reads over a stream with some bytes already read."""

    def __init__(self, stream: trio.abc.Stream, initial: bytes = b"") -> None:
        self.stream = stream
        self.buf = bytearray(initial)

    async def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise HandshakeError("connection closed during handshake")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def rest(self) -> bytes:
        out = bytes(self.buf)
        self.buf.clear()
        return out


def _ids(dialer: str, acceptor: str) -> bytes:
    d, a = dialer.encode(), acceptor.encode()
    return bytes((len(d),)) + d + bytes((len(a),)) + a


def _proof(secret: bytes, role: bytes, nonce_d: bytes, nonce_a: bytes, ids: bytes) -> bytes:
    return hmac.new(secret, role + nonce_d + nonce_a + ids, hashlib.sha256).digest()


class _Conn:
    def __init__(self, peer_id: str, stream: trio.abc.Stream) -> None:
        self.peer_id = peer_id
        self.stream = stream
        self.queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self.wake = trio.Event()
        self.closed = False
        #: frames sent (the beat pings a link that sent nothing since the last)
        self.frames = 0
        self.frames_at_beat = 0
        #: the socket's descriptor for direct writes (None: TLS, writer task only)
        self.fd: int | None = (
            stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None
        )
        #: the writer task is inside ``send_all`` (direct writes would interleave)
        self.writing = False


class TcpPeerLinks:
    """Authenticated TCP links to every peer, one connection per pair.

    Args:
        node_id: this node's id (1..255 utf-8 bytes).
        secret: the shared cluster secret.
        peers: ``{peer_id: (host, port)}``; addresses are needed only for peers
            this node dials (those with a larger id).
        ssl_context: optional TLS for both directions.
        frame_bytes_max: bound on one frame.
        peer_queue_bytes_max: bound on a peer's send queue.
        handshake_timeout_s: bound on the handshake.
        backoff_s_min, backoff_s_max: reconnect backoff range (full jitter).
        rng: seeded RNG for jitter and nonces' companion randomness (nonces use os.urandom).
        beat_s: a link that sent nothing else for this long sends a ping.
        silence_s: a peer heard nothing from for this long is reported to the
            watchers (:mod:`raft.liveness`; at most any group's minimum election timeout).
    """

    def __init__(
        self,
        node_id: str,
        secret: bytes,
        peers: dict[str, tuple[str, int]] | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
        frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT,
        peer_queue_bytes_max: int = 64 * 1024 * 1024,
        handshake_timeout_s: float = 5.0,
        backoff_s_min: float = 0.05,
        backoff_s_max: float = 2.0,
        rng: random.Random | None = None,
        beat_s: float = BEAT_S,
        silence_s: float = SILENCE_S,
    ) -> None:
        if not 0 < len(node_id.encode()) <= NODE_ID_BYTES_MAX:
            raise ValueError("bad node id")
        if not secret:
            raise ValueError("empty cluster secret")
        self.node_id = node_id
        self._secret = secret
        self._peers = dict(peers or {})
        self._ssl = ssl_context
        self.frame_bytes_max = frame_bytes_max
        self.peer_queue_bytes_max = peer_queue_bytes_max
        self.handshake_timeout_s = handshake_timeout_s
        self.backoff_s_min = backoff_s_min
        self.backoff_s_max = backoff_s_max
        self._rng = rng or random.Random()
        self._handlers: dict[str, FrameHandler] = {}
        self._watchers: dict[str, PeerEventHandler] = {}
        self.beat_s = beat_s
        self.liveness = PeerLiveness(silence_s)
        self._conns: dict[str, _Conn] = {}
        self._nursery: trio.Nursery | None = None
        self._dialing: set[str] = set()
        #: a dial loop waiting out its backoff: set to dial now (``redial``)
        self._redial: dict[str, trio.Event] = {}
        #: a redial asked while its loop was dialing (see ``redial``)
        self._redial_asked: set[str] = set()
        self._connected_events: dict[str, trio.Event] = {}
        self.stats = {"sent_frames": 0, "dropped_frames": 0, "auth_failures": 0, "bad_frames": 0}
        #: called with a peer's id when its link closes (a crashed peer's at once)
        self._down_listeners: list[Callable[[str], None]] = []

    # ------------------------------------------------------------ PeerLinks

    def register(self, group_id: str, handler: FrameHandler) -> None:
        self._handlers[group_id] = handler

    def unregister(self, group_id: str) -> None:
        self._handlers.pop(group_id, None)
        self._watchers.pop(group_id, None)

    def watch(self, group_id: str, handler: PeerEventHandler) -> None:
        self._watchers[group_id] = handler

    def last_heard(self, peer_id: str) -> float | None:
        return self.liveness.last_heard(peer_id)

    def _peer_event(self, peer_id: str) -> None:
        for gid, handler in list(self._watchers.items()):
            try:
                handler(peer_id)
            except Exception:
                log.exception("event=peer_event_handler_raised group=%s", gid)

    def send(self, peer_id: str, group_id: str, payload: bytes) -> bool:
        c = self._conns.get(peer_id)
        if c is None or c.closed:
            self.stats["dropped_frames"] += 1
            return False
        try:
            frame = encode_frame(group_id, payload, self.frame_bytes_max)
        except WireError:
            log.error("event=frame_too_large peer=%s group=%s", peer_id, group_id)
            self.stats["dropped_frames"] += 1
            return False
        c.frames += 1
        if c.fd is not None and not c.queue and not c.writing:
            try:
                n = os.write(c.fd, frame)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                n = 0  # the writer task meets the error and closes the link
            if n == len(frame):
                self.stats["sent_frames"] += 1
                return True
            if n:  # the rest of a frame begun must follow, in order, whatever the bound
                frame = frame[n:]
                c.queue.append(frame)
                c.queued_bytes += len(frame)
                c.wake.set()
                self.stats["sent_frames"] += 1
                return True
        if c.queued_bytes + len(frame) > self.peer_queue_bytes_max:
            self.stats["dropped_frames"] += 1
            return False
        c.queue.append(frame)
        c.queued_bytes += len(frame)
        c.wake.set()
        self.stats["sent_frames"] += 1
        return True

    # ------------------------------------------------------------ peers

    def add_peer(self, peer_id: str, address: tuple[str, int]) -> None:
        """Learn (or change) a peer's address; starts dialing if this node dials it
        (a new address is dialed at once, not after the backoff)."""
        changed = self._peers.get(peer_id) != address
        self._peers[peer_id] = address
        self._maybe_dial(peer_id)
        if changed:
            self.redial(peer_id)

    def remove_peer(self, peer_id: str) -> None:
        """Forget a peer and close its link."""
        self._peers.pop(peer_id, None)
        c = self._conns.pop(peer_id, None)
        if c is not None:
            self._close(c)

    def on_peer_down(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(peer_id)`` whenever a peer's link closes (a peer
        process that dies closes it at once); returns the undo."""
        self._down_listeners.append(listener)
        return lambda: self._down_listeners.remove(listener)

    def is_connected(self, peer_id: str) -> bool:
        c = self._conns.get(peer_id)
        return c is not None and not c.closed

    async def wait_connected(self, peer_id: str) -> None:
        """Wait until an authenticated link to ``peer_id`` is up."""
        while not self.is_connected(peer_id):
            ev = self._connected_events.setdefault(peer_id, trio.Event())
            await ev.wait()

    def _maybe_dial(self, peer_id: str) -> None:
        if (
            self._nursery is not None
            and peer_id in self._peers
            and self.node_id < peer_id
            and peer_id not in self._dialing
        ):
            self._dialing.add(peer_id)
            self._nursery.start_soon(self._dial_loop, peer_id)

    # ------------------------------------------------------------ running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dial peers (with a larger id) and keep the links up until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for pid in list(self._peers):
                self._maybe_dial(pid)
            nursery.start_soon(self._beat_loop)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                for c in list(self._conns.values()):
                    self._close(c)

    async def _beat_loop(self) -> None:
        """Ping every link that sent nothing in the last beat; report silent peers."""
        last = trio.current_time()
        while True:
            await trio.sleep(self.beat_s)
            for c in list(self._conns.values()):
                if not c.closed and c.frames == c.frames_at_beat:
                    self.send(c.peer_id, PING_GROUP, b"")
                c.frames_at_beat = c.frames
            now = trio.current_time()
            if now - last > 2 * self.beat_s:
                # this loop ran late (the event loop was busy): what the peers
                # sent meanwhile may still sit unread in the sockets; let the
                # readers take it before judging anyone silent
                await trio.sleep(STALL_READ_S)
                now = trio.current_time()
            last = now
            for pid in self.liveness.newly_silent(now, set(self._conns)):
                log.info("event=link_silent peer=%s after_s=%.3f", pid, self.liveness.silence_s)
                self._peer_event(pid)

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run a listener of our own; ``task_status.started`` gets the listeners."""

        async def handler(stream: trio.SocketStream) -> None:
            await self.serve_stream(stream, b"")

        await trio.serve_tcp(handler, port, host=host, task_status=task_status)

    async def serve_stream(self, stream: trio.abc.Stream, already_read: bytes = b"") -> None:
        """Take over an accepted inbound connection and serve it until it closes.

        ``already_read`` are the bytes a sniffing listener consumed (they start
        with :data:`LINK_MAGIC`). With an ``ssl_context`` and a plain socket
        stream, TLS is negotiated first (then ``already_read`` must be empty).
        """
        try:
            if self._ssl is not None and not already_read:
                stream = trio.SSLStream(stream, self._ssl, server_side=True)
            with trio.fail_after(self.handshake_timeout_s):
                peer_id, rest = await self._accept_handshake(stream, already_read)
        except (HandshakeError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
            log.warning("event=link_handshake_failed role=acceptor error=%r", e)
            await trio.aclose_forcefully(stream)
            return
        await self._run_conn(peer_id, stream, rest)

    async def _accept_handshake(self, stream: trio.abc.Stream, initial: bytes) -> tuple[str, bytes]:
        r = _Reader(stream, initial)
        if await r.read_exact(len(LINK_MAGIC)) != LINK_MAGIC:
            raise HandshakeError("bad magic")
        n = (await r.read_exact(1))[0]
        if n == 0:
            raise HandshakeError("empty node id")
        try:
            dialer = (await r.read_exact(n)).decode()
        except UnicodeDecodeError as e:
            raise HandshakeError("node id not utf-8") from e
        nonce_d = await r.read_exact(NONCE_BYTES)
        nonce_a = os.urandom(NONCE_BYTES)
        me = self.node_id.encode()
        await stream.send_all(bytes((len(me),)) + me + nonce_a)
        ids = _ids(dialer, self.node_id)
        proof_d = await r.read_exact(32)
        if not hmac.compare_digest(proof_d, _proof(self._secret, b"dialer", nonce_d, nonce_a, ids)):
            self.stats["auth_failures"] += 1
            log.warning("event=link_auth_failed role=acceptor claimed_peer=%s", dialer)
            raise HandshakeError(f"bad proof from {dialer!r}")
        await stream.send_all(_proof(self._secret, b"acceptor", nonce_d, nonce_a, ids))
        return dialer, r.rest()

    async def _dial_handshake(self, stream: trio.abc.Stream, peer_id: str) -> bytes:
        nonce_d = os.urandom(NONCE_BYTES)
        me = self.node_id.encode()
        await stream.send_all(LINK_MAGIC + bytes((len(me),)) + me + nonce_d)
        r = _Reader(stream)
        n = (await r.read_exact(1))[0]
        try:
            acceptor = (await r.read_exact(n)).decode()
        except UnicodeDecodeError as e:
            raise HandshakeError("node id not utf-8") from e
        if acceptor != peer_id:
            raise HandshakeError(f"dialed {peer_id!r} but {acceptor!r} answered")
        nonce_a = await r.read_exact(NONCE_BYTES)
        ids = _ids(self.node_id, acceptor)
        await stream.send_all(_proof(self._secret, b"dialer", nonce_d, nonce_a, ids))
        proof_a = await r.read_exact(32)
        if not hmac.compare_digest(
            proof_a, _proof(self._secret, b"acceptor", nonce_d, nonce_a, ids)
        ):
            self.stats["auth_failures"] += 1
            log.warning("event=link_auth_failed role=dialer peer=%s", peer_id)
            raise HandshakeError(f"bad proof from {peer_id!r}")
        return r.rest()

    async def _dial_loop(self, peer_id: str) -> None:
        failures = 0
        try:
            while peer_id in self._peers:
                host, port = self._peers[peer_id]
                stream: trio.abc.Stream | None = None
                try:
                    with trio.fail_after(self.handshake_timeout_s):
                        stream = await trio.open_tcp_stream(host, port)
                        if self._ssl is not None:
                            stream = trio.SSLStream(stream, self._ssl, server_hostname=host)
                        rest = await self._dial_handshake(stream, peer_id)
                except (OSError, HandshakeError, trio.TooSlowError, trio.BrokenResourceError) as e:
                    if stream is not None:
                        await trio.aclose_forcefully(stream)
                    failures += 1
                    if failures in (1, 10) or failures % 100 == 0:
                        log.info(
                            "event=link_dial_failed peer=%s failures=%d error=%r",
                            peer_id,
                            failures,
                            e,
                        )
                else:
                    failures = 0
                    await self._run_conn(peer_id, stream, rest)
                cap = min(self.backoff_s_max, self.backoff_s_min * 2 ** min(failures, 16))
                if peer_id in self._redial_asked:  # told while it was dialing: once more now
                    self._redial_asked.discard(peer_id)
                    continue
                wake = self._redial[peer_id] = trio.Event()
                with trio.move_on_after(
                    self._rng.uniform(self.backoff_s_min / 2, max(cap, self.backoff_s_min))
                ):
                    await wake.wait()
                self._redial.pop(peer_id, None)
        finally:
            self._redial.pop(peer_id, None)
            self._redial_asked.discard(peer_id)
            self._dialing.discard(peer_id)

    def redial(self, peer_id: str) -> None:
        """The peer is reachable again (its route came up): a dial loop waiting
        out its backoff dials now.  After a restart the backoff had grown to
        ``backoff_s_max`` while the peer was down; without this the peer's
        groups wait that long for this link (and a follower that hears no
        leader meanwhile stands for election)."""
        ev = self._redial.get(peer_id)
        if ev is not None:
            ev.set()
        elif peer_id in self._dialing:
            # in the middle of a dial (maybe one that is failing): the loop
            # skips its next backoff once
            self._redial_asked.add(peer_id)

    # ------------------------------------------------------------ connections

    def _close(self, c: _Conn) -> None:
        c.closed = True
        c.queue.clear()
        c.queued_bytes = 0
        c.wake.set()

    async def _run_conn(self, peer_id: str, stream: trio.abc.Stream, rest: bytes) -> None:
        old = self._conns.get(peer_id)
        if old is not None:
            self._close(old)
        c = _Conn(peer_id, stream)
        self._conns[peer_id] = c
        ev = self._connected_events.pop(peer_id, None)
        if ev is not None:
            ev.set()
        log.info("event=link_up peer=%s", peer_id)
        self.liveness.heard(peer_id, trio.current_time())
        self._peer_event(peer_id)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, c, nursery.cancel_scope)
                await self._reader(c, rest)
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as eg:
            log.info("event=link_down peer=%s error=%r", peer_id, eg.exceptions[0])
        finally:
            self._close(c)
            if self._conns.get(peer_id) is c:
                del self._conns[peer_id]
                for listener in list(self._down_listeners):
                    listener(peer_id)
                self._peer_event(peer_id)
            await trio.aclose_forcefully(stream)

    async def _reader(self, c: _Conn, rest: bytes) -> None:
        dec = FrameDecoder(self.frame_bytes_max)
        data: bytes | bytearray = rest
        fd = c.fd
        read = os.read
        wait_readable = trio.lowlevel.wait_readable
        checkpoint = trio.lowlevel.checkpoint
        now = trio.lowlevel.current_clock().current_time
        clock = time.perf_counter
        yielded = clock()
        while not c.closed:
            if data:
                try:
                    dec.feed(bytes(data))
                    while (f := dec.next_frame()) is not None:
                        h = self._handlers.get(f[0])
                        if h is not None:
                            h(c.peer_id, f[1])
                except WireError as e:
                    self.stats["bad_frames"] += 1
                    log.warning("event=link_bad_frame peer=%s error=%s", c.peer_id, e)
                    return
            if fd is None:
                data = await c.stream.receive_some(LINK_RECV_BYTES_MAX)
            else:
                # ``receive_some`` inlined for a plain socket, as the client
                # sessions' reader does: a frame's read is on every replicated
                # write's path (the follower's append-entries, the leader's
                # answer); a read that found data at once yields only when this
                # task last yielded ``READ_YIELD_S`` ago
                try:
                    data = read(fd, LINK_RECV_BYTES_MAX)
                except BlockingIOError:
                    await wait_readable(fd)
                    yielded = clock()
                    data = b""
                    continue
                t = clock()
                if t - yielded >= READ_YIELD_S:
                    await checkpoint()
                    yielded = t
            if not data:
                return
            self.liveness.heard(c.peer_id, now())

    async def _writer(self, c: _Conn, scope: trio.CancelScope) -> None:
        while True:
            if c.closed:
                scope.cancel()
                return
            if not c.queue:
                c.wake = trio.Event()
                await c.wake.wait()
                continue
            parts, size = [], 0
            while c.queue and size < (1 << 20):
                f = c.queue.popleft()
                parts.append(f)
                size += len(f)
            c.queued_bytes -= size
            c.writing = True
            try:
                await c.stream.send_all(b"".join(parts))
            finally:
                c.writing = False
