"""Eviction for the router's and the sublist's per-subject caches (plain dicts).

Theory of operation: the hot paths read these caches with ``dict.get`` and
nothing else, so a cache stays a plain ``dict`` and this module only decides,
on a miss, whether the new entry may go in (``Admission.room``).  Below its
bound every entry goes in.  At the bound the policy must survive the shape
that broke the old one -- a publisher rotating over more subjects than the
cache holds: dropping the oldest entries (FIFO, as LRU would) then throws out
each subject just before it comes round again, so every message missed.
Here a cache within one eviction batch of its bound admits one miss in
``ADMIT_EVERY`` only; an admission into a full cache first evicts a random
contiguous stretch (an ``EVICT_DIV``-th of the bound, at a random offset in
insertion order: in effect a random sample, as nats-server's sublist cache
sweeps random map entries), whose room is then filled at the same slow rate.
So the cache keeps most of what it holds and a rotation over N subjects hits
about ``bound / N`` of the time, while a new working set still replaces an
old one (one miss in ``ADMIT_EVERY`` goes in).  Skipping an admission costs nothing but the
entry: the caller uses the value it computed either way.

The choice of stretch uses the caller's seeded ``random.Random``, so runs
repeat.  Pure: no trio, no sockets.
"""

from __future__ import annotations

import random
from itertools import islice
from typing import Any

ADMIT_EVERY = 8
"""A full cache admits one miss in this many (the others are not cached)."""
EVICT_DIV = 16
"""An admission into a full cache evicts ``bound // EVICT_DIV`` entries (at least one)."""


class Admission:
    """The eviction policy of one dict used as a cache of at most ``bound`` entries.

    Args:
        bound: the most entries the cache holds.
        rng: randomness for the evicted stretch (seeded by the owner).
    """

    __slots__ = ("_misses", "_rng", "bound")

    def __init__(self, bound: int, rng: random.Random | None = None) -> None:
        if bound < 1:
            raise ValueError("bound must be at least 1")
        self.bound = bound
        self._rng = rng if rng is not None else random.Random(0)
        self._misses = 0

    def room(self, cache: dict[Any, Any]) -> bool:
        """Whether the caller may insert a new key into ``cache`` now (after
        this call it holds fewer than ``bound`` entries when True)."""
        n = len(cache)
        batch = max(1, self.bound // EVICT_DIV)
        if n < self.bound - batch:
            return True
        # (nearly) full: admit one miss in ADMIT_EVERY, so what is cached turns
        # over slowly (the room one eviction made is filled at that rate too)
        self._misses += 1
        if self._misses < ADMIT_EVERY:
            return False
        self._misses = 0
        if n >= self.bound:
            k = min(n, max(batch, n - self.bound + 1))
            start = self._rng.randrange(n - k + 1)
            for key in list(islice(cache, start, start + k)):
                del cache[key]
        return True
