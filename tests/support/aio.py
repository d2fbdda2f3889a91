"""Run nats-py (asyncio) code from sync tests (pytest-trio owns ``async def`` tests).

``run(coro_fn, timeout)`` runs ``coro_fn()`` under ``asyncio.run`` with an overall
bound; ``ErrorLog`` collects the errors nats-py hands to ``error_cb`` and lets a
coroutine await the next one (an event, not a poll).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
RUN_TIMEOUT_S = 60.0


def run(coro_fn: Callable[[], Awaitable[T]], timeout: float = RUN_TIMEOUT_S) -> T:
    """``asyncio.run(coro_fn())`` bounded by ``timeout`` seconds."""

    async def main() -> T:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(main())


class ErrorLog:
    """Collects the errors nats-py reports to ``error_cb`` and wakes waiters."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []
        self._cond: asyncio.Condition | None = None

    async def cb(self, exc: Exception) -> None:
        """Pass as ``error_cb=log.cb`` (nats-py wants a coroutine function)."""
        self.errors.append(exc)
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:
            self._cond.notify_all()

    async def wait_for(self, pred: Callable[[Exception], bool], within_s: float = 5.0) -> Exception:
        """The first recorded error satisfying ``pred`` (waits, bounded)."""
        if self._cond is None:
            self._cond = asyncio.Condition()

        def found() -> Exception | None:
            return next((e for e in self.errors if pred(e)), None)

        async with self._cond:
            await asyncio.wait_for(self._cond.wait_for(lambda: found() is not None), within_s)
        e = found()
        assert e is not None
        return e

    def texts(self) -> list[str]:
        return [str(e) for e in self.errors]


async def noop_cb(*_: Any) -> None:
    """A callback that does nothing (silences nats-py's default printing)."""


def with_client(
    server: Any,
    body: Callable[[Any], Awaitable[T]],
    *,
    stop: bool = True,
    timeout: float = RUN_TIMEOUT_S,
) -> T:
    """Run ``body(nc)`` with a nats-py connection to ``server`` (closed
    afterwards, errors silenced), then stop the server unless ``stop`` is False.
    """
    import nats  # the test client; imported here so plain helpers need not load it

    async def main() -> T:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        try:
            return await body(nc)
        finally:
            await nc.close()

    try:
        return run(main, timeout)
    finally:
        if stop:
            server.stop()


async def answers_to(
    nc: Any, subject: str, payload: bytes, wait_s: float, after: float
) -> tuple[list[bytes], float | None]:
    """Every answer to one request on its own inbox, and the seconds to the first
    (None: unanswered): the first waited for up to ``wait_s`` s, then a bounded
    look of ``after`` s for a second one."""
    inbox = nc.new_inbox()
    got: list[bytes] = []
    came = asyncio.Event()

    async def cb(m: Any) -> None:
        got.append(m.data)
        came.set()

    sub = await nc.subscribe(inbox, cb=cb)
    try:
        t0 = time.monotonic()
        await nc.publish(subject, payload, reply=inbox)
        try:
            await asyncio.wait_for(came.wait(), wait_s)
        except TimeoutError:
            return got, None
        first = time.monotonic() - t0
        await asyncio.sleep(after)
        return got, first
    finally:
        await sub.unsubscribe()
