"""Fault-injecting TCP proxies on the cluster (route) links, on trio.

Theory of operation: one proxy listens per ordered node pair (src, dst) and forwards to dst's
real cluster port; src's conf lists only these proxies as routes (``chaos.supervisor``).  A route
connection dialled by src carries traffic both ways, so a byte's *direction* is known from which
pump moves it: client→upstream is src→dst, upstream→client is dst→src.  Faults are data in one
``LinkFaults`` object, keyed by directed pair:

- ``blocked``: both directions of a pair blocked = partition.  Existing connections of that pair
  are reset at once and new ones are closed on accept, so both servers see the link die (like a
  host that is down).  One direction blocked alone = one-way partition: that pump stops moving
  bytes (they are held, as a black-holed TCP segment is retransmitted later), the other flows.
- ``delay``: (mean_s, jitter_s) per direction; each chunk is released at
  ``max(previous release, now + mean ± jitter)``, so order is kept.

No bytes are ever dropped from inside a stream (that would corrupt the protocol, not model a
network).  The proxies run in a trio loop on one background thread (the harness itself is on
asyncio, as nats-py is); ``set_faults`` hands a new ``LinkFaults`` to the trio thread, which
applies it (resetting newly partitioned connections).  Every proxy chooses its random jitter from
one ``random.Random`` seeded by the run.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
from dataclasses import dataclass, field

import trio

from chaos.supervisor import HOST, free_ports

CHUNK_BYTES = 65536
ACCEPTS_MAX = 10**7  # route connections per proxy in one run
CHUNKS_MAX = 10**12  # chunks per connection (the loops are bounded; these are never reached)
HOLD_POLL_S = 0.02  # how often a held (one-way blocked) pump looks at the faults again
Pair = tuple[str, str]


@dataclass(frozen=True)
class LinkFaults:
    """Faults on directed links: ``blocked`` pairs, ``delay[(src, dst)] = (mean_s, jitter_s)``."""

    blocked: frozenset[Pair] = frozenset()
    delay: dict[Pair, tuple[float, float]] = field(default_factory=dict)

    def cut(self, a: str, b: str) -> bool:
        """Are both directions between a and b blocked (a partition)?"""
        return (a, b) in self.blocked and (b, a) in self.blocked


def partition(groups: list[list[str]], delay: dict[Pair, tuple[float, float]] | None = None):
    """LinkFaults that cut every link between different ``groups``."""
    blocked = set()
    for i, g in enumerate(groups):
        for h in groups[i + 1 :]:
            for a in g:
                for b in h:
                    blocked |= {(a, b), (b, a)}
    return LinkFaults(frozenset(blocked), dict(delay or {}))


class _Conn:
    def __init__(self, src: str, dst: str, scope: trio.CancelScope) -> None:
        self.src, self.dst, self.scope = src, dst, scope


class ProxyMesh:
    """All route proxies of one cluster.

    Args:
        names: node names.
        cluster_ports: each node's real cluster listen port.
        rng: seeded randomness (jitter).
    """

    def __init__(self, names: tuple[str, ...], cluster_ports: dict[str, int], rng: random.Random):
        self.names = names
        self.cluster_ports = cluster_ports
        self.rng = rng
        pairs = [(a, b) for a in names for b in names if a != b]
        self.ports: dict[Pair, int] = dict(zip(pairs, free_ports(len(pairs)), strict=True))
        self.faults = LinkFaults()
        self.bytes_moved = 0
        self._conns: set[_Conn] = set()
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- control (called from the harness thread) -------------------------------------------

    def start(self, timeout_s: float = 10.0) -> None:
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("proxy thread did not start")
        if self._error is not None:
            raise RuntimeError(f"proxy failed: {self._error!r}")

    def set_faults(self, faults: LinkFaults) -> None:
        """Install ``faults`` now (resets connections across newly cut pairs)."""
        assert self._token is not None
        trio.from_thread.run_sync(self._apply, faults, trio_token=self._token)

    def heal(self) -> None:
        self.set_faults(LinkFaults())

    def close(self, timeout_s: float = 5.0) -> None:
        if self._token is not None and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- the trio side -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to start() or lost at close
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            for (src, dst), port in self.ports.items():
                listeners = await trio.open_tcp_listeners(port, host=HOST)
                nursery.start_soon(self._serve, listeners[0], src, dst)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def _apply(self, faults: LinkFaults) -> None:
        self.faults = faults
        for conn in list(self._conns):
            if faults.cut(conn.src, conn.dst):
                conn.scope.cancel()

    async def _serve(self, listener: trio.SocketListener, src: str, dst: str) -> None:
        async with listener, trio.open_nursery() as nursery:
            for _ in range(ACCEPTS_MAX):  # ends at close (cancelled) long before this count
                stream = await listener.accept()
                nursery.start_soon(self._handle, stream, src, dst)

    async def _handle(self, down: trio.SocketStream, src: str, dst: str) -> None:
        with trio.CancelScope() as scope:
            conn = _Conn(src, dst, scope)
            try:
                if self.faults.cut(src, dst):
                    return
                up: trio.SocketStream | None = None
                with trio.move_on_after(2.0):
                    up = await trio.open_tcp_stream(HOST, self.cluster_ports[dst])
                if up is None:
                    return
                self._conns.add(conn)
                async with up, trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, down, up, src, dst, scope)
                    nursery.start_soon(self._pump, up, down, dst, src, scope)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                self._conns.discard(conn)
        with contextlib.suppress(Exception):
            down.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(Exception):
            await trio.aclose_forcefully(down)

    async def _pump(
        self,
        rx: trio.SocketStream,
        tx: trio.SocketStream,
        a: str,
        b: str,
        scope: trio.CancelScope,
    ) -> None:
        release = 0.0
        try:
            for _ in range(CHUNKS_MAX):
                data = await rx.receive_some(CHUNK_BYTES)
                if not data:
                    break
                for _ in range(10**9):  # one-way block: hold the bytes until healed
                    if (a, b) not in self.faults.blocked:
                        break
                    await trio.sleep(HOLD_POLL_S)
                mean, jitter = self.faults.delay.get((a, b), (0.0, 0.0))
                if mean or jitter:
                    now = trio.current_time()
                    d = max(0.0, mean + self.rng.uniform(-jitter, jitter))
                    release = max(release, now + d)
                    await trio.sleep_until(release)
                await tx.send_all(data)
                self.bytes_moved += len(data)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        scope.cancel()  # one side ended: end the connection
