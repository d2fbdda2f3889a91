"""What a connection between two servers shares, route or leaf link.

``ServerLink`` (on ``Outbound``'s queued writes) holds the parts that do not
depend on the protocol spoken: ``send`` of control lines, ``close`` (an
optional ``-ERR`` first, then the writer drains and the link ends),
``wait_closed``, and the writer task with its ping timer.  Each kind says how
often it pings (``_ping_interval``) and what a due ping does
(``_ping_due``: send it, or close a stale link).
"""

from __future__ import annotations

from typing import Any

import trio

from node.outbound import Outbound
from node.protocol.wire import err_bytes

__all__ = ["ServerLink"]


class ServerLink(Outbound):
    """The writer side of a server-to-server link (see the module doc)."""

    server: Any
    stream: trio.abc.Stream
    closing: str | None
    _proto: Any

    def _init_link(self, max_pending: int) -> None:
        # a client producer delivering to a backed-up link is stalled (nats-server
        # gates every connection's outbound); the link's own reader never stalls
        self._init_outbound(max_pending, getattr(self.server, "stall_gates", None))
        self._closed = trio.Event()
        self._writer_done = trio.Event()
        self._ping_sent_at = 0.0

    def send(self, data: bytes) -> None:
        if self.closing is not None:
            return
        self._push(data, msg=False)

    def _overflow(self) -> None:
        self.close("Slow Consumer (Pending Bytes)")

    def close(self, reason: str, err: str | None = None) -> None:
        if self.closing is not None:
            return
        self.closing = reason
        self._proto.halt()
        self._open_gate()
        if err is not None:
            self._out.append(err_bytes(err))
        self._wake.set()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Return once the link has begun closing."""
        await self._closed.wait()

    def _ping_interval(self) -> float:
        raise NotImplementedError

    def _ping_due(self, now: float) -> bool:
        """A ping is due at ``now``: send it (True), or close a stale link (False)."""
        raise NotImplementedError

    async def _writer(self) -> None:
        try:
            await self._write_loop()
        finally:
            self._writer_done.set()

    async def _write_loop(self) -> None:
        interval = self._ping_interval()
        next_ping = trio.current_time() + interval
        while True:
            with trio.move_on_at(next_ping):
                await self._wake.wait()
            data = self._take()
            if data:
                try:
                    with trio.fail_after(self.server.cfg.write_deadline_s):
                        await self.stream.send_all(data)
                except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
                    self.close("Write Error")
                    return
                self._open_gate()  # all taken is written: stalled producers go on
                continue
            if self.closing is not None:
                return
            now = trio.current_time()
            if now >= next_ping:
                if not self._ping_due(now):
                    continue
                next_ping = now + interval
