"""A group's own sync thread: the journal's append + fsync off the event loop, cheaply.

Theory of operation
-------------------
``trio.to_thread.run_sync`` costs ~250 µs per call on a loaded two-core
machine (a worker thread taken from trio's cache, the job handed over, the
result brought back through ``run_sync_soon``), and more when the trio thread
keeps the GIL busy.  A Raft member syncs once per cycle that changed its
journal, on the critical path of every acknowledged write (the leader's
append, each follower's append before it answers), so the hand-over matters.

:class:`SyncThread` is one long-lived thread per driver.  ``await run(fn,
arg)`` puts the job on a queue the thread blocks on, and the thread writes one
byte into a socket pair when ``fn`` returns; the driver waits for that byte with
``trio.lowlevel.wait_readable`` (one wake-up of the event loop, no task
hand-over).  ``run`` is shielded from cancellation: a sync, once started, is
waited for (the caller must not touch the journal while it runs), so no job is
ever outstanding when the next one comes; ``close`` during a ``run`` takes
effect when it ends.  What ``fn`` raised is raised again by ``run``.

Only the driver that owns the thread calls ``run``, one job at a time.
"""

from __future__ import annotations

import queue
import socket
import threading
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["SyncThread"]


class SyncThread:
    """One thread running blocking jobs for one owner; completion wakes trio through a socket pair.

    Args:
        name: the thread's name (for debuggers and py-spy).
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[Any], None], Any] | None] = (
            queue.SimpleQueue()
        )
        self._error: BaseException | None = None
        self._rsock, self._wsock = socket.socketpair()
        self._rsock.setblocking(False)
        self._running = False
        self._closing = False
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, arg = job
            try:
                fn(arg)
            except BaseException as exc:  # handed to the waiting task
                self._error = exc
            try:
                self._wsock.send(b"\0")
            except OSError:  # closed under us at shutdown: nobody waits
                return

    async def run(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Run ``fn(arg)`` in the thread and wait for it.

        Raises:
            Exception: what ``fn`` raised.

        Cancellation: shielded; the job always completes before this returns.
        """
        if self._closed:
            raise RuntimeError("sync thread closed")
        self._jobs.put((fn, arg))
        self._running = True
        try:
            with trio.CancelScope(shield=True):
                while True:
                    try:
                        self._rsock.recv(1)
                        break
                    except BlockingIOError:
                        await trio.lowlevel.wait_readable(self._rsock)
        finally:
            self._running = False
            if self._closing:
                self.close()
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def close(self) -> None:
        """Stop the thread now, or when the job in progress ends (idempotent)."""
        if self._closed:
            return
        if self._running:
            self._closing = True
            return
        self._closed = True
        self._jobs.put(None)
        self._rsock.close()
        self._wsock.close()
