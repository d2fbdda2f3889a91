"""The one place that points pysyncobj's module-level clock and RNG at ours.

Theory of operation
-------------------
pysyncobj reads time through the module global ``pysyncobj.syncobj.monotonicTime``
and draws election timeouts from the module global ``random``. Both are
process-wide, but trijet runs many groups per process (and ``chaos.sim`` runs
many simulated nodes on one fake clock), each with its own injected clock and
seeded RNG (DESIGN rule 7).

:func:`install` replaces the two globals once with dispatchers. Every call
into a ``SyncObj`` is made inside :func:`bound` (``with bound(now, rng): ...``),
which sets the clock and RNG the dispatchers forward to for the duration of
that synchronous call. Calls are synchronous and single-threaded (one driver
at a time runs pysyncobj code), so a plain module global is enough; bindings
nest and restore. Outside any binding the dispatchers fall back to
``time.monotonic`` and the stdlib RNG (the stock behaviour), so the stock
threaded ``SyncObj`` used by the benchmark still works in the same process.
"""

from __future__ import annotations

import random as _stdlib_random
import time
from collections.abc import Callable

import pysyncobj.syncobj as _syncobj_module

__all__ = ["bound", "install"]

_now: Callable[[], float] | None = None
#: the time of the binding (``bound(..., at=t)``): pysyncobj reads it a score of
#: times per cycle, and a cycle is tens of microseconds
_at: float | None = None
_rng: _stdlib_random.Random | None = None
_installed = False


def _monotonic() -> float:
    t = _at
    if t is not None:
        return t
    f = _now
    return f() if f is not None else time.monotonic()


class _RandomDispatch:
    """Stands in for the ``random`` module inside pysyncobj.syncobj."""

    def random(self) -> float:
        r = _rng
        return r.random() if r is not None else _stdlib_random.random()

    def __getattr__(self, name: str) -> object:
        r = _rng if _rng is not None else _stdlib_random
        return getattr(r, name)


def install() -> None:
    """Install the dispatchers into pysyncobj (idempotent)."""
    global _installed
    if _installed:
        return
    _syncobj_module.monotonicTime = _monotonic  # type: ignore[attr-defined]
    _syncobj_module.random = _RandomDispatch()  # type: ignore[assignment]
    _installed = True


class bound:  # lower case: used as ``with bound(now, rng):``, as the function it was
    """Route pysyncobj's clock and RNG to ``now`` and ``rng`` inside the block.

    A plain class rather than a ``contextlib.contextmanager`` generator: it is
    entered several times per Raft cycle, on every acknowledged write's path.

    ``at``: pysyncobj's clock reads this fixed time inside the block (one
    Raft cycle: the time it started) instead of calling ``now``.
    """

    __slots__ = ("_at", "_now", "_prev_at", "_prev_now", "_prev_rng", "_rng")

    def __init__(
        self, now: Callable[[], float], rng: _stdlib_random.Random, at: float | None = None
    ) -> None:
        self._now = now
        self._rng = rng
        self._at = at

    def __enter__(self) -> None:
        global _now, _rng, _at
        if not _installed:
            install()
        self._prev_now, self._prev_rng, self._prev_at = _now, _rng, _at
        _now, _rng, _at = self._now, self._rng, self._at

    def __exit__(self, *exc: object) -> None:
        global _now, _rng, _at
        _now, _rng, _at = self._prev_now, self._prev_rng, self._prev_at
