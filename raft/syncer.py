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
arg)`` leaves the job in an attribute and writes one byte into a socket pair
whose other end the thread blocks on; the thread writes one byte back when
``fn`` returns; the driver waits for that byte with
``trio.lowlevel.wait_readable`` (one wake-up of the event loop, no task
hand-over).  The job's wake-up is a socket write rather than a
``queue.SimpleQueue.put`` because the write lets go of the GIL: the woken
thread, often scheduled at once on a loaded machine (the kernel's wake-up
preemption), finds the GIL free and starts the write, instead of waking,
waiting for the GIL the event loop holds, and costing two more context
switches before the event loop's next system call lets it run.  ``run`` is shielded from cancellation: a sync, once started, is
waited for (the caller must not touch the journal while it runs), so no job is
ever outstanding when the next one comes; ``close`` during a ``run`` takes
effect when it ends.  What ``fn`` raised is raised again by ``run``.

Only the owner calls ``run`` (or ``submit`` then ``wait``) or ``start``, one
job at a time.  The same
thread serves an R1 stream's ``cluster.local.LocalGroup`` (its store's sync,
with ``start`` for batches whose results are handed out from the run loop).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["SyncThread"]

log = logging.getLogger(__name__)


class SyncThread:
    """One thread running blocking jobs for one owner; completion wakes trio.

    ``run(fn, *args)`` waits through the socket pair; ``start(fn, on_done)``
    does not wait: the thread hands the end of the job to trio's run loop
    (``run_sync_soon``), which calls ``on_done(error)`` (``error`` is what
    ``fn`` raised, or None).  No ``run`` or ``start`` until a job has ended.
    Create it in the trio thread.

    Args:
        name: the thread's name (for debuggers and py-spy).
    """

    def __init__(self, name: str) -> None:
        self._job: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        self._error: BaseException | None = None
        # _rsock: the owner's end (non-blocking); _wsock: the thread's (blocking)
        self._rsock, self._wsock = socket.socketpair()
        self._rsock.setblocking(False)
        self._running = False
        self._closing = False
        self._closed = False
        self._on_done: Callable[[BaseException | None], None] | None = None
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        wsock = self._wsock
        try:
            while True:
                try:
                    if not wsock.recv(1):  # the owner closed its end: stop
                        return
                except OSError:
                    return
                job, self._job = self._job, None
                if job is None:
                    continue
                fn, args = job
                error: BaseException | None = None
                try:
                    fn(*args)
                except BaseException as exc:  # handed to the waiting task or callback
                    error = exc
                on_done = self._on_done
                if on_done is not None:
                    try:
                        self._token.run_sync_soon(self._done, on_done, error)
                    except trio.RunFinishedError:  # the server is gone: nobody to tell
                        pass
                    continue
                self._error = error
                try:
                    wsock.send(b"\0")
                except OSError:  # closed under us at shutdown: nobody waits
                    return
        finally:
            wsock.close()

    def _done(
        self, on_done: Callable[[BaseException | None], None], error: BaseException | None
    ) -> None:
        """A ``start`` job ended (in the trio thread, from ``run_sync_soon``)."""
        self._on_done = None
        self._running = False
        if self._closing:
            self.close()
        try:
            on_done(error)
        except Exception:  # never into trio's run loop
            log.exception("event=sync_callback_failed thread=%s", self._thread.name)

    async def run(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` in the thread and wait for it.

        Raises:
            Exception: what ``fn`` raised.

        Cancellation: shielded; the job always completes before this returns.
        """
        self.submit(fn, *args)
        await self.wait()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Hand ``fn(*args)`` to the thread now; :meth:`wait` for its end."""
        self._hand_over(fn, args)

    def _hand_over(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if self._closed:
            raise RuntimeError("sync thread closed")
        self._job = (fn, args)
        self._running = True
        self._rsock.send(b"\0")  # one byte into an empty pair: never blocks

    async def wait(self) -> None:
        """Wait for the job :meth:`submit` handed over (as ``run`` does)."""
        # no shielded cancel scope on the way (one per fsync, on every
        # acknowledged write's critical path): a cancellation is rare (the
        # group closing) and then the rest of the wait is shielded
        try:
            try:
                while True:
                    try:
                        self._rsock.recv(1)
                        break
                    except BlockingIOError:
                        await trio.lowlevel.wait_readable(self._rsock)
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    while True:
                        try:
                            self._rsock.recv(1)
                            break
                        except BlockingIOError:
                            await trio.lowlevel.wait_readable(self._rsock)
                raise
        finally:
            self._running = False
            if self._closing:
                self.close()
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def start(
        self, fn: Callable[[], None], on_done: Callable[[BaseException | None], None]
    ) -> None:
        """Run ``fn()`` in the thread without waiting; ``on_done(error)`` follows
        in the trio thread."""
        if self._closed:
            raise RuntimeError("sync thread closed")
        self._on_done = on_done
        self._hand_over(fn, ())

    def close(self) -> None:
        """Stop the thread now, or when the job in progress ends (idempotent)."""
        if self._closed:
            return
        if self._running:
            self._closing = True
            return
        self._closing = False
        self._closed = True
        self._rsock.close()  # the thread reads the end of the pair, closes its own and stops
