"""Subject trie with a bounded match cache.

Theory of operation: subscriptions are stored in a trie keyed by subject
token; each level has literal children plus one ``*`` child and one ``>``
child.  ``match(subject)`` walks the literal subject through the trie and
returns a ``SublistResult``: plain subscriptions, and queue subscriptions
merged by queue name (a message goes to one member of each queue group, as
nats-server does across all matching patterns).

Results are cached per literal subject in a dict bounded by
``cache_entries_max`` (sized for tens of thousands of subjects); at the
bound, ``node.boundedcache.Admission`` decides (it admits one miss in a few,
evicting a random stretch, so a rotation over more subjects than the bound
still hits in proportion).  ``match_uncached`` reads the cache but adds
nothing (the router caches the delivery plans it derives instead).  Subjects used
once (reply inboxes) take ``match_once`` instead: no entry of their own, but
a result shared by their family (same tokens but the last) when the last
token cannot change it; any insert or remove drops those.  Inserting or
removing a literal subscription invalidates only that subject's entry; a
wildcard subscription invalidates the cached subjects it matches (a cache
bigger than ``SWEEP_MAX`` is cleared instead: one C-level clear, not a match
per entry).  Results are
shared: callers must not mutate them.  A new result with plain
subscriptions only is interned (``_shared``, keyed by the subscriptions, at
most ``SHARED_MAX``, dropped whenever a subscription is removed): subjects that
match alike -- every key of a KV bucket under its stream's ``kv.>`` capture --
share one result, so a cached subject costs its dict slot and key only.

Interest watches (``watch``) call a function whenever a subscription whose
subject is exactly the watched literal subject is inserted or removed (as
nats-server's sublist notifications: wildcards never fire them).  The check
is one dict lookup per insert/remove while watches exist, none per match.
The watcher decides what the change means (``has_exact``).

Pure: imports neither trio nor socket.  Items stored need ``subject`` and
``queue`` attributes (``queue`` is ``None`` for plain subscriptions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from node.boundedcache import Admission
from node.subjects import has_wildcard, match

CACHE_MAX = 32768
"""Cached match results (literal subjects); at the bound ``Admission`` decides."""
SWEEP_MAX = 2048
"""Above this many cached results a wildcard change clears the cache."""
SHARED_MAX = 1024
"""Interned plain-only results kept (cleared when full or on any remove)."""


class SubLike(Protocol):
    """What the sublist needs of an item: its subject and queue (or None)."""

    @property
    def subject(self) -> bytes: ...

    @property
    def queue(self) -> bytes | None: ...


S = TypeVar("S", bound=SubLike)


class SublistResult(Generic[S]):
    """A match: ``psubs`` (plain) and ``qsubs`` (one list per queue name)."""

    __slots__ = ("psubs", "qsubs")

    def __init__(self, psubs: list[S], qsubs: list[list[S]]) -> None:
        self.psubs = psubs
        self.qsubs = qsubs

    def __len__(self) -> int:
        return len(self.psubs) + sum(len(q) for q in self.qsubs)


class _Node(Generic[S]):
    __slots__ = ("fwc", "literal", "psubs", "pwc", "qsubs")

    def __init__(self) -> None:
        self.literal: dict[bytes, _Node[S]] = {}
        self.pwc: _Node[S] | None = None
        self.fwc: _Node[S] | None = None
        self.psubs: dict[S, None] = {}
        self.qsubs: dict[bytes, dict[S, None]] = {}

    def empty(self) -> bool:
        return not (self.literal or self.pwc or self.fwc or self.psubs or self.qsubs)


class Sublist(Generic[S]):
    """The subject trie.  Not thread-safe; one owner (the server's router)."""

    def __init__(self, cache_entries_max: int = CACHE_MAX, cache_enabled: bool = True) -> None:
        self._root: _Node[S] = _Node()
        self._cache: dict[bytes, SublistResult[S]] = {}
        # subject minus its last token -> the match of its family (match_once)
        self._families: dict[bytes, SublistResult[S]] = {}
        # the subscriptions of a plain-only match -> its one shared result
        self._shared: dict[tuple[S, ...], SublistResult[S]] = {}
        self.cache_entries_max = cache_entries_max
        self._admit = Admission(cache_entries_max)
        self.cache_enabled = cache_enabled
        self.count = 0
        self.inserts = 0
        self.removes = 0
        self.matches = 0
        self.cache_hits = 0
        self._watch: dict[bytes, list[Callable[[], None]]] = {}

    # -- interest watches -------------------------------------------------

    def watch(self, subject: bytes, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after each insert/remove of a subscription on exactly
        ``subject`` (a literal subject); ``unwatch`` with the same pair."""
        self._watch.setdefault(subject, []).append(fn)

    def unwatch(self, subject: bytes, fn: Callable[[], None]) -> None:
        """Stop a ``watch`` (no error if it is not registered)."""
        fns = self._watch.get(subject)
        if fns is not None and fn in fns:
            fns.remove(fn)
            if not fns:
                del self._watch[subject]

    def has_exact(self, subject: bytes, queue: bytes | None) -> bool:
        """A subscription on exactly ``subject`` exists: a plain one when
        ``queue`` is None, else one in queue group ``queue``."""
        r = self.match(subject)
        if queue is None:
            return any(s.subject == subject for s in r.psubs)
        return any(g[0].queue == queue and any(s.subject == subject for s in g) for g in r.qsubs)

    def _notify(self, subject: bytes) -> None:
        for fn in list(self._watch.get(subject, ())):
            fn()

    # -- mutation ---------------------------------------------------------

    def insert(self, sub: S) -> None:
        """Add ``sub`` under ``sub.subject`` (caller validated the subject)."""
        node = self._root
        for tok in sub.subject.split(b"."):
            if tok == b"*":
                if node.pwc is None:
                    node.pwc = _Node()
                node = node.pwc
            elif tok == b">":
                if node.fwc is None:
                    node.fwc = _Node()
                node = node.fwc
            else:
                nxt = node.literal.get(tok)
                if nxt is None:
                    nxt = node.literal[tok] = _Node()
                node = nxt
        q = sub.queue
        if q is None:
            node.psubs[sub] = None
        else:
            group = node.qsubs.get(q)
            if group is None:
                group = node.qsubs[q] = {}
            group[sub] = None
        self.count += 1
        self.inserts += 1
        self._invalidate(sub.subject)
        if self._watch:
            self._notify(sub.subject)

    def remove(self, sub: S) -> bool:
        """Remove ``sub``; returns False when it was not present."""
        path: list[tuple[_Node[S], bytes]] = []
        node: _Node[S] | None = self._root
        for tok in sub.subject.split(b"."):
            assert node is not None
            parent = node
            if tok == b"*":
                node = parent.pwc
            elif tok == b">":
                node = parent.fwc
            else:
                node = parent.literal.get(tok)
            if node is None:
                return False
            path.append((parent, tok))
        assert node is not None
        q = sub.queue
        if q is None:
            if sub not in node.psubs:
                return False
            del node.psubs[sub]
        else:
            group = node.qsubs.get(q)
            if group is None or sub not in group:
                return False
            del group[sub]
            if not group:
                del node.qsubs[q]
        # prune empty nodes bottom-up
        child = node
        for parent, tok in reversed(path):
            if not child.empty():
                break
            if tok == b"*":
                parent.pwc = None
            elif tok == b">":
                parent.fwc = None
            else:
                del parent.literal[tok]
            child = parent
        self.count -= 1
        self.removes += 1
        if self._shared:
            self._shared.clear()  # holds no removed subscription
        self._invalidate(sub.subject)
        if self._watch:
            self._notify(sub.subject)
        return True

    def _invalidate(self, pattern: bytes) -> None:
        if self._families:
            self._families.clear()
        cache = self._cache
        if not cache:
            return
        if has_wildcard(pattern):
            if len(cache) > SWEEP_MAX:
                cache.clear()
                return
            for subj in [s for s in cache if match(pattern, s)]:
                del cache[subj]
        else:
            cache.pop(pattern, None)

    # -- queries ----------------------------------------------------------

    def match(self, subject: bytes) -> SublistResult[S]:
        """Return the subscriptions interested in the literal ``subject``."""
        self.matches += 1
        cached = self._cache.get(subject)
        if cached is not None:
            self.cache_hits += 1
            return cached
        psubs: list[S] = []
        qmap: dict[bytes, list[S]] = {}
        if not _empty_token(subject):
            self._walk(self._root, subject.split(b"."), 0, psubs, qmap)
        if not self.cache_enabled or not self._admit.room(self._cache):
            return SublistResult(psubs, list(qmap.values()))
        if qmap:
            result: SublistResult[S] = SublistResult(psubs, list(qmap.values()))
        else:
            key = tuple(psubs)
            shared = self._shared
            got = shared.get(key)
            if got is None:
                if len(shared) >= SHARED_MAX:
                    shared.clear()
                got = shared[key] = SublistResult(psubs, [])
            result = got
        self._cache[subject] = result
        return result

    def match_uncached(self, subject: bytes) -> SublistResult[S]:
        """``match`` that reads the cache but adds nothing to it: for a caller
        that caches what it derives from the result (the router's delivery
        plans), so a subject does not take an entry in both caches."""
        self.matches += 1
        cached = self._cache.get(subject)
        if cached is not None:
            self.cache_hits += 1
            return cached
        psubs: list[S] = []
        qmap: dict[bytes, list[S]] = {}
        if not _empty_token(subject):
            self._walk(self._root, subject.split(b"."), 0, psubs, qmap)
        return SublistResult(psubs, list(qmap.values()))

    def family(self, prefix: bytes) -> SublistResult[S] | None:
        """The cached match shared by every subject ``prefix.<token>`` (see
        ``match_once``), or None when no such family is cached now.  Valid
        until the next insert or remove."""
        return self._families.get(prefix)

    def count_hits(self, k: int) -> None:
        """Count ``k`` matches answered from a cached result by a caller that
        reused one (``family``) instead of calling ``match_once`` again."""
        self.matches += k
        self.cache_hits += k

    def match_once(self, subject: bytes) -> SublistResult[S]:
        """``match`` for a subject used once (a reply inbox, ``_INBOX.<id>.<n>``).

        Its own result is not cached (it would only push others out).  The
        subjects of one family (the same tokens but the last) all match alike
        when no trie node the walk reaches before the last token has literal
        children; such a family's result is cached until the next insert or
        remove, so answers to one requester's inbox cost a dict lookup.
        """
        self.matches += 1
        cached = self._cache.get(subject)
        if cached is not None:
            self.cache_hits += 1
            return cached
        prefix, dot, _ = subject.rpartition(b".")
        if dot:
            family = self._families.get(prefix)
            if family is not None:
                self.cache_hits += 1
                return family
        toks = subject.split(b".")
        psubs: list[S] = []
        qmap: dict[bytes, list[S]] = {}
        if _empty_token(subject):
            return SublistResult(psubs, [])
        self._walk(self._root, toks, 0, psubs, qmap)
        result: SublistResult[S] = SublistResult(psubs, list(qmap.values()))
        if dot and self.cache_enabled and self._last_token_free(toks):
            families = self._families
            if len(families) >= self.cache_entries_max:
                families.clear()
            families[prefix] = result
        return result

    def _last_token_free(self, toks: list[bytes]) -> bool:
        """No node reached by ``toks[:-1]`` (literal and ``*`` edges) has
        literal children: the last token cannot change the match."""
        nodes = [self._root]
        for tok in toks[:-1]:
            nxt: list[_Node[S]] = []
            for node in nodes:
                lit = node.literal.get(tok)
                if lit is not None:
                    nxt.append(lit)
                if node.pwc is not None:
                    nxt.append(node.pwc)
            if not nxt:
                return True
            nodes = nxt
        return not any(node.literal for node in nodes)

    def _walk(
        self,
        node: _Node[S],
        toks: list[bytes],
        i: int,
        psubs: list[S],
        qmap: dict[bytes, list[S]],
    ) -> None:
        """Collect every subscription matching ``toks[i:]`` below ``node``.

        Iterative (a subject may hold thousands of tokens): a ``*`` branch is
        followed first and the literal branch waits on ``pending``, which
        keeps the order the recursive walk had (``>``, then ``*``, then the
        literal token at every level).
        """
        n = len(toks)
        pending: list[tuple[_Node[S], int]] = [(node, i)]
        collect = self._collect
        while pending:
            node, i = pending.pop()
            while i < n:
                if node.fwc is not None:
                    collect(node.fwc, psubs, qmap)
                nxt = node.literal.get(toks[i])
                if node.pwc is not None:
                    if nxt is not None:
                        pending.append((nxt, i + 1))
                    node = node.pwc
                elif nxt is None:
                    break
                else:
                    node = nxt
                i += 1
            else:
                collect(node, psubs, qmap)

    @staticmethod
    def _collect(node: _Node[S], psubs: list[S], qmap: dict[bytes, list[S]]) -> None:
        if node.psubs:
            psubs.extend(node.psubs)
        for q, group in node.qsubs.items():
            dst = qmap.get(q)
            if dst is None:
                qmap[q] = list(group)
            else:
                dst.extend(group)

    def has_interest(self, subject: bytes) -> bool:
        """True when at least one subscription matches ``subject``."""
        r = self.match(subject)
        return bool(r.psubs or r.qsubs)

    def all(self) -> list[S]:
        """Every stored subscription (for monitoring)."""
        out: list[S] = []
        stack = [self._root]
        while stack:
            node = stack.pop()
            out.extend(node.psubs)
            for group in node.qsubs.values():
                out.extend(group)
            stack.extend(node.literal.values())
            if node.pwc is not None:
                stack.append(node.pwc)
            if node.fwc is not None:
                stack.append(node.fwc)
        return out

    def overlapping(self, prefix: bytes) -> list[S]:
        """Every subscription that matches some subject ``prefix.<more tokens>``.

        ``prefix`` is literal tokens (``$JS.ACK``); wildcards on the way
        (``*``, ``>``) count, as does everything stored below the prefix.
        """
        out: list[S] = []
        nodes = [self._root]
        for tok in prefix.split(b"."):
            nxt: list[_Node[S]] = []
            for node in nodes:
                if node.fwc is not None:
                    out.extend(self._everything(node.fwc))
                if node.pwc is not None:
                    nxt.append(node.pwc)
                lit = node.literal.get(tok)
                if lit is not None:
                    nxt.append(lit)
            nodes = nxt
        for node in nodes:  # at least one token follows: not the node's own subs
            below = [*node.literal.values(), node.pwc, node.fwc]
            for child in below:
                if child is not None:
                    out.extend(self._everything(child))
        return out

    @staticmethod
    def _everything(root: _Node[S]) -> list[S]:
        out: list[S] = []
        stack = [root]
        while stack:
            node = stack.pop()
            out.extend(node.psubs)
            for group in node.qsubs.values():
                out.extend(group)
            stack.extend(node.literal.values())
            if node.pwc is not None:
                stack.append(node.pwc)
            if node.fwc is not None:
                stack.append(node.fwc)
        return out

    def cache_size(self) -> int:
        """Number of cached match results."""
        return len(self._cache)

    def cached_results(self) -> list[SublistResult[S]]:
        """The cached match results (for /subsz fanout statistics)."""
        return list(self._cache.values())

    def stats(self) -> dict[str, Any]:
        """Counters in /subsz's vocabulary."""
        hit_rate = self.cache_hits / self.matches if self.matches else 0.0
        return {
            "num_subscriptions": self.count,
            "num_cache": len(self._cache),
            "num_inserts": self.inserts,
            "num_removes": self.removes,
            "num_matches": self.matches,
            "cache_hit_rate": hit_rate,
        }


def _empty_token(subject: bytes) -> bool:
    """Whether a subject has an empty token (``a..b``, ``.a``, ``a.``, or is
    empty): nats-server matches such a subject to no subscription at all, not
    even a ``*`` or ``>`` one (a request to it gets no-responders)."""
    return not subject or b".." in subject or subject[0] == 46 or subject[-1] == 46
