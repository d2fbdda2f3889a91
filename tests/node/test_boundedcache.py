"""``node.boundedcache.Admission``: the bound holds, nothing but evictions
leaves, and a rotation over more keys than the bound still hits (counted,
not timed)."""

from __future__ import annotations

import random
from itertools import cycle, islice

from hypothesis import given, settings
from hypothesis import strategies as st

from node.boundedcache import ADMIT_EVERY, Admission


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40),
    st.lists(st.integers(0, 120), max_size=400),
    st.integers(0, 2**32),
)
def test_bound_holds_and_only_admitted_keys_stay(bound: int, keys: list[int], seed: int) -> None:
    """A dict filled only through ``room`` never passes the bound; every key in
    it was inserted and maps to its value; below the bound everything goes in."""
    admit = Admission(bound, random.Random(seed))
    cache: dict[int, int] = {}
    refused = 0
    for k in keys:
        if k in cache:
            assert cache[k] == k * 7
            continue
        was = len(cache)
        if admit.room(cache):
            assert len(cache) < bound
            cache[k] = k * 7
        else:
            assert was >= bound - max(1, bound // 16)  # only a (nearly) full cache refuses
            refused += 1
        assert len(cache) <= bound


def test_a_full_cache_admits_one_miss_in_a_few_and_evicts_a_stretch() -> None:
    admit = Admission(64, random.Random(3))
    cache = {i: i for i in range(64)}
    answers = [admit.room(cache) for _ in range(ADMIT_EVERY)]
    assert answers == [False] * (ADMIT_EVERY - 1) + [True]
    assert len(cache) == 60  # 64 // 16 evicted
    assert all(cache[k] == k for k in cache)


def test_a_shrunk_bound_is_enforced_at_the_next_admission() -> None:
    admit = Admission(10, random.Random(1))
    cache = {i: i for i in range(25)}  # filled past the bound by someone else
    while not admit.room(cache):
        pass
    assert len(cache) < 10


def test_rotation_over_more_keys_than_the_bound_still_hits() -> None:
    """A publisher rotating over 2x and 4x as many subjects as the cache holds:
    evicting the oldest (FIFO, or LRU) would miss on every lookup; here about
    bound/N of the lookups hit (the first round misses throughout)."""
    bound = 1024
    for factor, hit_min in ((2, 0.30), (4, 0.15)):
        admit = Admission(bound, random.Random(7))
        cache: dict[int, int] = {}
        n = bound * factor
        hits = 0
        lookups = n * 6
        for k in islice(cycle(range(n)), lookups):
            if k in cache:
                hits += 1
            elif admit.room(cache):
                cache[k] = k
        assert hits / lookups >= hit_min, (factor, hits / lookups)


def test_a_new_working_set_replaces_an_old_one() -> None:
    """Keys that stopped coming go: after enough misses of a new set of keys
    (as large as the bound) most of the cache holds the new set."""
    bound = 256
    admit = Admission(bound, random.Random(5))
    cache: dict[int, int] = {}
    for k in islice(cycle(range(bound)), bound * 40):
        if k not in cache and admit.room(cache):
            cache[k] = k
    assert len(cache) >= bound - bound // 16
    new = range(10_000, 10_000 + bound)
    for k in islice(cycle(new), bound * 80):
        if k not in cache and admit.room(cache):
            cache[k] = k
    assert sum(1 for k in cache if k >= 10_000) >= 0.9 * len(cache)
