"""Sublist against a naive matcher (hypothesis), including cache invalidation."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from node.subjects import (
    has_wildcard,
    match,
    overlaps,
    subset,
    valid_literal_subject,
    valid_queue,
    valid_subject,
)
from node.sublist import Sublist

_ids = iter(range(10**9))


@dataclass(eq=False)
class FakeSub:
    subject: bytes
    queue: bytes | None
    ident: int = field(default_factory=lambda: next(_ids))


def naive(subs: list[FakeSub], subject: bytes) -> tuple[set[int], dict[bytes, set[int]]]:
    plain: set[int] = set()
    queues: dict[bytes, set[int]] = {}
    for s in subs:
        if match(s.subject, subject):
            if s.queue is None:
                plain.add(s.ident)
            else:
                queues.setdefault(s.queue, set()).add(s.ident)
    return plain, queues


def observed(
    sl: Sublist[FakeSub], subject: bytes, once: bool = False
) -> tuple[set[int], dict[bytes, set[int]]]:
    r = sl.match_once(subject) if once else sl.match(subject)
    plain = {s.ident for s in r.psubs}
    assert len(plain) == len(r.psubs)
    queues: dict[bytes, set[int]] = {}
    for group in r.qsubs:
        assert group
        names = {s.queue for s in group}
        assert len(names) == 1  # merged by queue name
        q = group[0].queue
        assert q is not None
        assert q not in queues
        queues[q] = {s.ident for s in group}
    return plain, queues


TOKENS = [b"a", b"b", b"c"]
literal_subjects = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4).map(b".".join)


@st.composite
def patterns(draw: st.DrawFn) -> bytes:
    toks = draw(st.lists(st.sampled_from([*TOKENS, b"*"]), min_size=1, max_size=4))
    if draw(st.booleans()):
        toks = [*toks[:-1], b">"]
    return b".".join(toks)


class SublistMachine(RuleBasedStateMachine):
    @initialize(cache=st.sampled_from([2, 8, 1024]))
    def setup(self, cache: int) -> None:
        self.sl: Sublist[FakeSub] = Sublist(cache_entries_max=cache)
        self.subs: list[FakeSub] = []

    @rule(p=patterns(), q=st.sampled_from([None, b"q1", b"q2"]))
    def insert(self, p: bytes, q: bytes | None) -> None:
        s = FakeSub(p, q)
        self.sl.insert(s)
        self.subs.append(s)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        if not self.subs:
            return
        s = data.draw(st.sampled_from(self.subs))
        assert self.sl.remove(s)
        self.subs.remove(s)
        assert not self.sl.remove(s)

    @rule(subject=literal_subjects)
    def check_match(self, subject: bytes) -> None:
        assert observed(self.sl, subject) == naive(self.subs, subject)

    @rule(subject=literal_subjects)
    def check_match_uncached(self, subject: bytes) -> None:
        """Read through the cache, nothing added to it."""
        before = self.sl.cache_size()
        r = self.sl.match_uncached(subject)
        assert self.sl.cache_size() == before
        assert (
            {s.ident for s in r.psubs},
            {g[0].queue: {s.ident for s in g} for g in r.qsubs},
        ) == (naive(self.subs, subject))

    @rule(subject=literal_subjects)
    def check_match_once(self, subject: bytes) -> None:
        """Subjects used once: family results shared only where the last token cannot matter."""
        assert observed(self.sl, subject, once=True) == naive(self.subs, subject)

    @invariant()
    def count(self) -> None:
        assert self.sl.count == len(self.subs)
        assert len(self.sl.all()) == len(self.subs)
        assert self.sl.cache_size() <= self.sl.cache_entries_max


TestSublist = SublistMachine.TestCase
TestSublist.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_cache_hits_and_invalidation() -> None:
    sl: Sublist[FakeSub] = Sublist()
    a = FakeSub(b"foo.bar", None)
    sl.insert(a)
    assert [s.ident for s in sl.match(b"foo.bar").psubs] == [a.ident]
    sl.match(b"foo.bar")
    assert sl.cache_hits == 1
    w = FakeSub(b"foo.*", None)
    sl.insert(w)  # wildcard insert invalidates matching cached subjects
    assert {s.ident for s in sl.match(b"foo.bar").psubs} == {a.ident, w.ident}
    sl.remove(a)
    assert [s.ident for s in sl.match(b"foo.bar").psubs] == [w.ident]
    sl.remove(w)
    assert not sl.has_interest(b"foo.bar")
    assert sl.stats()["num_subscriptions"] == 0


def test_match_once_shares_a_family_result_until_interest_changes() -> None:
    sl: Sublist[FakeSub] = Sublist()
    inbox = FakeSub(b"_INBOX.x.*", None)
    sl.insert(inbox)
    first = sl.match_once(b"_INBOX.x.1")
    assert sl.match_once(b"_INBOX.x.2") is first  # one family, one result
    assert sl.cache_size() == 0  # nothing per subject
    exact = FakeSub(b"_INBOX.x.3", None)
    sl.insert(exact)  # a literal last token: the family is no longer uniform
    assert {s.ident for s in sl.match_once(b"_INBOX.x.3").psubs} == {inbox.ident, exact.ident}
    assert [s.ident for s in sl.match_once(b"_INBOX.x.4").psubs] == [inbox.ident]
    assert sl.match_once(b"_INBOX.x.5") is not sl.match_once(b"_INBOX.x.6")
    sl.remove(exact)
    assert sl.match_once(b"_INBOX.x.7") is sl.match_once(b"_INBOX.x.8")


def test_pruning_leaves_empty_trie() -> None:
    sl: Sublist[FakeSub] = Sublist()
    subs = [FakeSub(p, None) for p in (b"a.b.c", b"a.*.c", b"a.>", b">")]
    for s in subs:
        sl.insert(s)
    for s in subs:
        sl.remove(s)
    assert sl._root.empty()


def test_subject_validation() -> None:
    assert valid_subject(b"foo.bar")
    assert valid_subject(b"foo.*.>")
    assert valid_subject(b"fo*o")  # wildcard chars inside a token are literal
    for bad in (b"", b"foo..bar", b".foo", b"foo.", b"foo.>.bar", b"foo bar", b"a\tb"):
        assert not valid_subject(bad), bad
    assert valid_literal_subject(b"foo.bar")
    assert not valid_literal_subject(b"foo.*")
    assert not valid_literal_subject(b"foo.>")
    assert valid_queue(b"q*") and not valid_queue(b"") and not valid_queue(b"a b")
    assert has_wildcard(b"a.*") and not has_wildcard(b"a*")


def _literals(maxlen: int = 5) -> list[bytes]:
    out: list[bytes] = []

    def rec(prefix: list[bytes]) -> None:
        if prefix:
            out.append(b".".join(prefix))
        if len(prefix) < maxlen:
            for t in TOKENS:
                rec([*prefix, t])

    rec([])
    return out


ALL_LITERALS = _literals()


def test_subset_and_overlap_against_enumeration() -> None:
    from hypothesis import given

    @settings(max_examples=300, deadline=None)
    @given(patterns(), patterns())
    def check(a: bytes, b: bytes) -> None:
        ma = {s for s in ALL_LITERALS if match(a, s)}
        mb = {s for s in ALL_LITERALS if match(b, s)}
        assert overlaps(a, b) == bool(ma & mb)
        if subset(a, b):
            assert ma <= mb

    check()


def test_subjects_with_an_empty_token_match_nothing() -> None:
    """As nats-server: ``a..c``, ``.a``, ``a.`` reach no subscription, not even
    ``*`` or ``>`` ones (a request to them gets no-responders)."""
    sl: Sublist[FakeSub] = Sublist()
    subs = [FakeSub(subject, None) for subject in (b"a.*.c", b"a.>", b">", b"*.b")]
    for sub in subs:
        sl.insert(sub)
    for subject in (b"a..c", b"a.b.", b".b", b"a..", b"", b".", b".."):
        assert sl.match(subject).psubs == [], subject
        assert sl.match_once(subject).psubs == [], subject
    got = sorted(s.subject for s in sl.match(b"a.b.c").psubs)
    assert got == [b">", b"a.*.c", b"a.>"]


def test_subjects_that_match_alike_share_one_cached_result() -> None:
    sl: Sublist[FakeSub] = Sublist()
    cap = FakeSub(b"kv.>", None)
    sl.insert(cap)
    a, b = sl.match(b"kv.key.1"), sl.match(b"kv.key.2")
    assert a is b and a.psubs == [cap]  # one result for every key of the bucket
    one = FakeSub(b"kv.key.1", None)
    sl.insert(one)
    assert {s.ident for s in sl.match(b"kv.key.1").psubs} == {cap.ident, one.ident}
    assert sl.match(b"kv.key.2").psubs == [cap]
    sl.remove(cap)  # a removed subscription is held by no shared result
    assert sl.match(b"kv.key.1").psubs == [one]
    assert sl.match(b"kv.key.2").psubs == []
    q = FakeSub(b"kv.>", b"workers")
    sl.insert(q)
    r3, r4 = sl.match(b"kv.key.3"), sl.match(b"kv.key.4")
    assert r3.qsubs == [[q]] and r4.qsubs == [[q]]
