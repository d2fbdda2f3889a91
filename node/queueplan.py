"""Queue-group delivery plans (a mixin of ``node.router.Router``).

Theory of operation: a subject whose interest includes queue groups gets no
ordinary delivery plan (``Router._make_plan``): each message must go to one
member of each group, chosen at random, so ``publish`` used to match, pick
and build every message on its own.  A *queue plan* is the same idea as a
delivery plan with the groups added: for a subject whose interest is plain
client subscriptions and queue groups of plain client subscriptions (no
internal client, delivery filter, ``max_msgs`` or response permissions), and
no route interest at all, it keeps the plain targets and, per group, its
members as ``(client, b"MSG <subject> <sid>", subscription)``.  Runs of
messages to the subject (``_qrun``) pick a member per message and per group
with the router's seeded ``rng`` (uniform, as ``publish`` picks), then give
each chosen member its messages with one join, as ``_run`` does for plain
subscribers; a single message (``_qone``) takes one pick per group.  Plans
carry the interest generation (``Router.gen``): any change to interest or to
a client's delivery options retires them all at once, like delivery plans.

Only for publishers whose own messages may come back to them (``echo``), as
with delivery plans: a no-echo publisher that is a member of a group must be
left out of the draw, which ``publish`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import random

    from node.boundedcache import Admission
    from node.session import Subscription
    from node.sublist import Sublist

Target = tuple[Any, bytes, Any]
"""``(client, b"MSG <subject> <sid>", subscription)``."""
QPlan = tuple[int, tuple[Target, ...], tuple[tuple[Target, ...], ...]]
"""``(gen, plain targets, groups)``."""

QPLANS_MAX = 8192
"""Queue plans kept; at the bound ``node.boundedcache.Admission`` decides."""


def _plain(sub: Subscription) -> bool:
    c = sub.client
    return not (
        c.internal
        or c.deliver_filter is not None
        or sub.max_msgs is not None
        or c.resp_perms is not None
    )


class QueueDelivery:
    """Queue plans over the ``Router``'s state (see the module doc)."""

    if TYPE_CHECKING:
        gen: int
        rng: random.Random
        out_msgs: int
        out_bytes: int
        route_sublist: Sublist[Any]
        _touched: set[Any]
        _qplans: dict[bytes, QPlan]
        _qplans_admit: Admission

        def _note_reply(self, reply: bytes) -> None: ...

    def _make_qplan(
        self, subject: bytes, psubs: list[Subscription], qsubs: list[list[Subscription]]
    ) -> None:
        """Remember ``subject``'s queue plan when everything in it is plain."""
        if self.route_sublist.count or not all(map(_plain, psubs)):
            return
        groups = []
        for group in qsubs:
            if not all(map(_plain, group)):
                return
            groups.append(tuple((s.client, b"MSG " + subject + s.sid_sp, s) for s in group))
        if not self._qplans_admit.room(self._qplans):
            return
        targets = tuple((s.client, b"MSG " + subject + s.sid_sp, s) for s in psubs)
        self._qplans[subject] = (self.gen, targets, tuple(groups))

    def _qplan(self, subject: bytes) -> QPlan | None:
        """``subject``'s current queue plan, or None."""
        plan = self._qplans.get(subject)
        if plan is None or plan[0] != self.gen:
            return None
        return plan

    def _qone(self, plan: QPlan, reply: bytes | None, payload: bytes) -> None:
        """One header-less message along a queue plan (batched: callers ``flush()``)."""
        plen = len(payload)
        tail = (
            b" %d\r\n%b\r\n" % (plen, payload)
            if reply is None
            else b" %b %d\r\n%b\r\n" % (reply, plen, payload)
        )
        if reply is not None:
            self._note_reply(reply)
        touch = self._touched.add
        n = 0
        randrange = self.rng.randrange
        # plain subscribers first, then one member per queue group (as publish)
        for c, head, sub in plan[1]:
            c._out.append(head + tail)
            c.out_msgs += 1
            c.out_bytes += plen
            sub.delivered += 1
            touch(c)
            n += 1
        for group in plan[2]:
            c, head, sub = group[randrange(len(group))] if len(group) > 1 else group[0]
            c._out.append(head + tail)
            c.out_msgs += 1
            c.out_bytes += plen
            sub.delivered += 1
            touch(c)
            n += 1
        self.out_msgs += n
        self.out_bytes += plen * n

    def _qrun(self, plan: QPlan, replies: list[bytes | None], payloads: list[bytes]) -> None:
        """Header-less messages to one subject along its queue plan, batched:
        one pick per message and group, one join per chosen member."""
        tails = [
            b" %d\r\n%b\r\n" % (len(p), p) if r is None else b" %b %d\r\n%b\r\n" % (r, len(p), p)
            for r, p in zip(replies, payloads, strict=True)
        ]
        for r in replies:
            if r is not None:
                self._note_reply(r)
        sizes = list(map(len, payloads))
        total = sum(sizes)
        k = len(tails)
        touch = self._touched.add
        randrange = self.rng.randrange
        n = 0
        nbytes = 0
        for group in plan[2]:
            m = len(group)
            if m == 1:
                self._give(group[0], tails, k, total)
                touch(group[0][0])
                n += k
                nbytes += total
                continue
            picks: list[list[int]] = [[] for _ in range(m)]
            for i in range(k):
                picks[randrange(m)].append(i)
            for member, idx in zip(group, picks, strict=True):
                if not idx:
                    continue
                got = [tails[i] for i in idx]
                size = sum(sizes[i] for i in idx)
                self._give(member, got, len(idx), size)
                touch(member[0])
                n += len(idx)
                nbytes += size
        for target in plan[1]:
            self._give(target, tails, k, total)
            touch(target[0])
            n += k
            nbytes += total
        self.out_msgs += n
        self.out_bytes += nbytes

    @staticmethod
    def _give(target: Target, tails: list[bytes], k: int, size: int) -> None:
        c, head, sub = target
        c._out.append(head + head.join(tails))
        c.out_msgs += k
        c.out_bytes += size
        sub.delivered += k
