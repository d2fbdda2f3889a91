"""Core message delivery: match a published subject and hand copies out.

Theory of operation: ``Router.publish`` matches the subject in the sublist
(cached), builds the wire suffix (reply, sizes, headers, payload) once, and
appends one ``MSG``/``HMSG`` per interested subscription to that client's
outbound buffer — plain subscribers all get a copy, each queue group one
member chosen at random (skipping the publisher when it asked for no echo).
Internal subscribers (server services such as the JetStream API) are called
synchronously with the message instead.  Reply subjects of delivered
messages are remembered (bounded): the answer published to one is delivered
without caching its match or making a plan, which it would never use again.  Publishing with a reply subject to a
subject nobody listens on sends the publisher a ``503`` status message when it
asked for no-responders.  Never awaits: one publish is a handful of list
appends, so a session can route a whole received chunk before yielding.

JetStream's delivery paths (``deliver_as``, ``deliver_run_as``, the ack
intake) live in ``node.jsdelivery`` as a mixin of ``Router``; the handlers a
session's parser calls for batches of PUBs (``fast_publisher``,
``fast_mixed``, ``fast_routed``) in ``node.fastpub``; publishes to subjects used
once (PubAcks, answers to requests) in ``node.replyonce``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node.boundedcache import Admission
from node.fastpub import FastPublish, Plan
from node.jsdelivery import (
    JS_ACK_PREFIX,
    LEAF_LINK,
    JetStreamDelivery,
    leaf_groups,
    pick_member,
    split_js_ack,
)
from node.nextroute import MSG_NEXT_PREFIX, ForwardedPulls
from node.queueplan import QPLANS_MAX, QPlan, QueueDelivery
from node.replyonce import ReplyOnce
from node.routefwd import RouteForwarding
from node.sublist import Sublist

if TYPE_CHECKING:
    from node.session import Subscription

CRLF = b"\r\n"
PLANS_MAX = 65536
#: subject families noted by ``_family_plan`` (cleared when full)
FAMILIES_MAX = 4096
"""Delivery plans kept (one per literal subject; ~330 bytes each with one
subscriber, so ~21 MB at the bound); at the bound ``Admission`` decides."""
INTERNAL_MAX = 32768
"""Subjects whose subscribers are all internal (``_internal``) kept."""
INTERNAL_SHARED_MAX = 256
"""Distinct ``_internal`` entry values interned (cleared when full or stale)."""
SERVICE_REPLY_PREFIX = b"_R_."
"""A service import's reply subject (it may go out on a spoke leaf link when routed)."""


class Router(FastPublish, JetStreamDelivery, QueueDelivery, RouteForwarding, ReplyOnce):
    """Delivery over one account's sublist.

    Args:
        sublist: the account's subject trie.
        rng: seeded randomness for queue-member choice.
        account: the account's name, carried in ``RMSG``/``HMSG`` to routes.
    """

    def __init__(
        self, sublist: Sublist[Subscription], rng: random.Random, account: bytes = b"$G"
    ) -> None:
        self.sublist = sublist
        self.rng = rng
        self.account = account
        self._rmsg = b"RMSG " + account + b" "
        self._hmsg = b"HMSG " + account + b" "
        self.out_msgs = 0
        #: messages (and their bytes) this account received from routes and sent to them
        #: (/accstatz's ``routes``), counted per message or run beside the routes' own
        self.rt_in_msgs = self.rt_in_bytes = self.rt_out_msgs = self.rt_out_bytes = 0
        self.out_bytes = 0
        # peers' interest (node.route.RemoteSub entries), one per route/subject/queue
        self.route_sublist: Sublist[Any] = Sublist()
        # Delivery plans: subject -> (gen, ((client, b"MSG subject sid", sub), ...),
        # (route, ...)) for subjects whose interest is plain client
        # subscriptions with nothing special (no queue, filter, max, response
        # permissions, internal client) plus routes with plain interest only.
        # Any change to local or route interest or to a client's delivery
        # options bumps ``gen``, which retires every plan at once.
        self.gen = 0
        self._touched: set[Any] = set()  # buffers the fast path appended to
        self._deferred: list[Callable[[], None]] = []  # run at the next flush()
        self._flushing = False  # deferred work is running
        # ack intake: b"<stream>.<consumer>" -> the internal subscription on
        # ``$JS.ACK.<stream>.<consumer>.>``, decided at generation _ack_gen
        self._ack_subs: dict[bytes, Any] = {}
        self._ack_gen = -1
        self._plans: dict[bytes, Plan] = {}
        self._plans_admit = Admission(PLANS_MAX)
        # the plans of generation _simple_gen with one local target and no
        # route, as that target: subject -> (client, b"MSG <subject> <sid>", sub)
        # (fast_mixed takes a batch of them with C-level maps)
        self._simple: dict[bytes, tuple[Any, bytes, Any]] = {}
        self._simple_gen = -1
        self._simple_admit = Admission(PLANS_MAX)
        # subject -> queue plan (node.queueplan): plain subscribers plus queue groups
        self._qplans: dict[bytes, QPlan] = {}
        # reply subjects of delivered requests (an answer is published once)
        self._replies: dict[bytes, None] = {}
        self._qplans_admit = Admission(QPLANS_MAX)
        # subject -> (gen, its internal subscribers): see _internal_targets
        self._internal: dict[bytes, tuple[int, tuple[tuple[Any, Any], ...]]] = {}
        self._internal_shared: dict[tuple[Any, ...], tuple[int, tuple[tuple[Any, Any], ...]]] = {}
        self._internal_shared_gen = -1
        self._internal_admit = Admission(INTERNAL_MAX)
        # subject minus its last token -> (gen, (client, sub) or None): the one
        # plain local target every subject of that family has in generation gen
        # (None: the family does not match alike); see ``_family_plan``
        self._families: dict[bytes, tuple[int, tuple[Any, Any] | None]] = {}
        #: pulls sent to a consumer leader's route, answered if it closes (node.nextroute)
        self.forwarded = ForwardedPulls()

    def publish(
        self,
        src: Any,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        routed_queues: tuple[bytes, ...] | None = None,
        leaf_queues: tuple[bytes, ...] | None = None,
        origin: bytes = b"",
    ) -> int:
        """Deliver one message; returns the number of copies handed out.

        Args:
            src: the publishing client (for echo and no-responders), or None.
            subject: literal subject.
            reply: reply subject or None.
            headers: raw header block or None.
            payload: message body.
            routed_queues: set for a message that arrived on a route: the
                queue groups it should reach here; it is not forwarded again.
            leaf_queues: set for a message that arrived on a leaf connection
                (``src`` is the link): the queue groups it should reach
                (routes and other leafs included); unlike a routed message
                it goes on to routes and other leaf connections.
            origin: a routed message's leaf cluster (a route's ``LMSG``): not for
                the leaf links to that cluster.

        A message that follows a delivery plan is appended in batch mode:
        the caller must call ``flush()`` once its batch is done (sessions and
        routes do it after each received chunk, internal clients after each
        publish).
        """
        if routed_queues is not None and reply is not None and reply.startswith(JS_ACK_PREFIX):
            split = split_js_ack(reply)
            if split is not None:
                return self.deliver_as(
                    subject, split[1], split[0], headers, payload, False, None, origin
                )
        if (
            headers is None
            and subject.startswith(JS_ACK_PREFIX)
            and self._ack_intake(src, subject, reply, payload)
        ):
            return 1
        plain = routed_queues is None and leaf_queues is None and not origin
        if headers is not None and plain:
            targets = self._internal_targets(subject)
            if targets is not None:
                # all-internal interest (a stream's capture of publishes with a
                # Nats-Msg-Id): no match, no MSG built
                for c, sub in targets:
                    c.deliver_internal(sub, subject, reply, headers, payload, src)
                self.out_msgs += len(targets)
                return len(targets)
        if headers is None and not routed_queues and not origin:
            plan = self._plans.get(subject)
            if (
                plan is not None
                and plan[0] == self.gen
                and (src is None or src.echo)
                and (plan[1] or plan[2] or not reply)
            ):
                if routed_queues is None:
                    return self._deliver_one(subject, plan[1], plan[2], reply, payload)
                return self._deliver_one(subject, plan[3], (), reply, payload)
            if subject in self._replies:  # the answer to a request seen: used once
                del self._replies[subject]
                if self._once(src, subject, reply, payload):
                    return 1
        r = self.sublist.match(subject)
        psubs = r.psubs
        qsubs = r.qsubs
        if headers is None and not routed_queues:
            if not qsubs:
                self._make_plan(subject, psubs)
            elif routed_queues is None and (src is None or src.echo):
                self._make_qplan(subject, psubs, qsubs)
        elif plain and psubs and not qsubs and all(sub.client.internal for sub in psubs):
            self._note_internal(subject, psubs)  # the next such publish skips the match
        routed = 0
        if leaf_queues is not None and qsubs:
            qsubs = [g for g in qsubs if g[0].queue in leaf_queues]
        # a message from the hub on a spoke link goes no further than this server
        # (each server of a leaf cluster has its own link): not to routes
        leaf_src = leaf_queues is not None and src is not None
        if leaf_src:
            origin = src.origin  # its leaf cluster (a hub-side link's), marked on routes
        # a routed message never goes out on a spoke link (its server's peers have their
        # own), unless it is a service import's reply
        no_spoke = routed_queues is not None and not subject.startswith(SERVICE_REPLY_PREFIX)
        if qsubs and (no_spoke or origin):
            qsubs = leaf_groups(qsubs, no_spoke, origin)
        if routed_queues is None:
            if self.route_sublist.count and not (leaf_src and src.solicited):
                # (the groups a route's member serves instead of a local one)
                taken: list[bytes] | None = [] if qsubs else None
                routed = self._to_routes(
                    subject, reply, headers, payload, qsubs, leaf_queues, origin, taken
                )
                if taken:
                    qsubs = [g for g in qsubs if g[0].queue not in taken]
        elif qsubs:
            qsubs = [g for g in qsubs if g[0].queue in routed_queues]
        if not psubs and not qsubs:
            if not routed and reply and src is not None and src.no_responders:
                self.no_responders(src, subject, reply)
            return routed
        mid = b" " + reply + b" " if reply else b" "
        plen = len(payload)
        if headers is None:
            suffix = mid + str(plen).encode() + CRLF + payload + CRLF
            hsuffix = suffix
            verb = b"MSG "
        else:
            hl = len(headers)
            suffix = (
                mid
                + str(hl).encode()
                + b" "
                + str(hl + plen).encode()
                + CRLF
                + headers
                + payload
                + CRLF
            )
            hsuffix = mid + str(plen).encode() + CRLF + payload + CRLF  # for no-header clients
            verb = b"HMSG "
        n = 0
        nbytes = 0
        no_echo = src is not None and not src.echo
        leafs: dict[Any, list[bytes]] | None = None
        for sub in psubs:
            c = sub.client
            if no_echo and c is src:
                continue
            if c.internal:
                if sub.local and routed_queues is not None:
                    continue  # a server-local service: not for routed messages
                c.deliver_internal(sub, subject, reply, headers, payload, src)
                n += 1
                continue
            if c.deliver_filter is not None:
                if c.deliver_filter is LEAF_LINK:
                    # a leaf connection: one LMSG per message, whatever matched
                    if (no_spoke and c.solicited) or (origin and c.origin == origin):
                        continue
                    if leafs is None:
                        leafs = {}
                    leafs.setdefault(c, [])
                    continue
                if not c.deliver_filter(subject):
                    continue
            if headers is not None and not c.headers:
                data = b"MSG " + subject + sub.sid_sp + hsuffix
            else:
                data = verb + subject + sub.sid_sp + suffix
            c.enqueue(data, plen)
            n += 1
            nbytes += plen
            if sub.max_msgs is not None:
                sub.delivered += 1
                if sub.delivered >= sub.max_msgs:
                    c.remove_sub(sub)
            else:
                sub.delivered += 1
            if reply and c.resp_perms is not None:
                c.allow_reply(reply)
        for group in qsubs:
            if no_echo:
                group = [s for s in group if s.client is not src]
                if not group:
                    continue
            sub = pick_member(group, self.rng)
            c = sub.client
            if c.internal:
                if sub.local and routed_queues is not None:
                    continue
                c.deliver_internal(sub, subject, reply, headers, payload, src)
                n += 1
                continue
            if c.deliver_filter is LEAF_LINK:
                if leafs is None:
                    leafs = {}
                leafs.setdefault(c, []).append(sub.queue)
                continue
            if headers is not None and not c.headers:
                data = b"MSG " + subject + sub.sid_sp + hsuffix
            else:
                data = verb + subject + sub.sid_sp + suffix
            c.enqueue(data, plen)
            n += 1
            nbytes += plen
            sub.delivered += 1
            if sub.max_msgs is not None and sub.delivered >= sub.max_msgs:
                c.remove_sub(sub)
            if reply and c.resp_perms is not None:
                c.allow_reply(reply)
        if leafs is not None:
            for c, queues in leafs.items():
                c.send_msg(subject, reply, headers, payload, queues)
                n += 1
                nbytes += plen
        self.out_msgs += n
        self.out_bytes += nbytes
        if reply and n:
            self._note_reply(reply)
        return n

    def _one(
        self, src: Any, subject: bytes, reply: bytes | None, payload: bytes, to_routes: bool
    ) -> None:
        """``_run`` for a single message, without the lists."""
        plan = self._plans.get(subject)
        if plan is None or plan[0] != self.gen:
            if subject in self._replies and not subject.startswith(JS_ACK_PREFIX):
                del self._replies[subject]  # the answer to a request seen: used once
                if self._once(src, subject, reply, payload):
                    return
            if self._internal_targets(subject) is not None:
                self._to_internal(src, subject, [reply], [payload], not to_routes)
            elif to_routes and (qplan := self._qplan(subject)) is not None:
                self._qone(qplan, reply, payload)  # a local publisher's (routed: no queues)
            else:
                self.publish(src, subject, reply, None, payload, None if to_routes else ())
            return
        targets = plan[1] if to_routes else plan[3]
        routes = plan[2] if to_routes else ()
        if not targets and not routes:
            if reply and src is not None and src.no_responders:
                self.no_responders(src, subject, reply)
            return
        self._deliver_one(subject, targets, routes, reply, payload)

    def _deliver_one(
        self,
        subject: bytes,
        targets: tuple[tuple[Any, bytes, Any], ...],
        routes: tuple[Any, ...],
        reply: bytes | None,
        payload: bytes,
    ) -> int:
        """Append one header-less message along a plan (batched: callers ``flush()``)."""
        plen = len(payload)
        tail = (
            b" %d\r\n%b\r\n" % (plen, payload)
            if reply is None
            else b" %b %d\r\n%b\r\n" % (reply, plen, payload)
        )
        if reply is not None:
            self._note_reply(reply)
        touch = self._touched.add
        for c, head, sub in targets:
            c._out.append(head + tail)
            c.out_msgs += 1
            c.out_bytes += plen
            sub.delivered += 1
            touch(c)
        if routes:
            data = self._rmsg + subject + tail
            for route in routes:
                route._out.append(data)
                route.out_msgs += 1
                route.out_bytes += plen
                touch(route)
            self.rt_out_msgs += len(routes)
            self.rt_out_bytes += plen * len(routes)
        n = len(targets)
        self.out_msgs += n
        self.out_bytes += plen * n
        return n + len(routes)

    def _run(
        self,
        src: Any,
        subject: bytes,
        replies: list[bytes | None],
        payloads: list[bytes],
        to_routes: bool,
    ) -> None:
        """Deliver header-less messages to one subject along its plan, batched."""
        plan = self._plans.get(subject)
        if plan is None or plan[0] != self.gen:
            if self._internal_targets(subject) is not None:
                self._to_internal(src, subject, replies, payloads, not to_routes)
                return
            if to_routes and (qplan := self._qplan(subject)) is not None:
                self._qrun(qplan, replies, payloads)  # a local publisher's (routed: no queues)
                return
            routed = None if to_routes else ()
            for reply, payload in zip(replies, payloads, strict=True):
                self.publish(src, subject, reply, None, payload, routed)
            return
        targets = plan[1] if to_routes else plan[3]
        routes = plan[2] if to_routes else ()
        if not targets and not routes:
            if src is not None and src.no_responders:
                for reply in replies:
                    if reply:
                        self.no_responders(src, subject, reply)
            return
        k = len(payloads)
        sizes = set(map(len, payloads))
        total = sum(map(len, payloads))
        if len(sizes) == 1 and replies.count(None) == k:
            # uniform run (one size, no replies): every op is head + " <size>\r\n"
            # + payload + "\r\n", so one join per subscriber builds them all
            size_line = b" %d\r\n" % sizes.pop()
            sep = b"\r\n" + b"%b" + size_line
            tails = None
        else:
            self._note_replies(replies)
            tails = [
                b" %d\r\n%b\r\n" % (len(p), p)
                if r is None
                else b" %b %d\r\n%b\r\n" % (r, len(p), p)
                for r, p in zip(replies, payloads, strict=True)
            ]
        touch = self._touched.add
        for c, head, sub in targets:
            if tails is None:
                c._out.append(head + size_line + (sep % head).join(payloads) + CRLF)
            else:
                c._out.append(head + head.join(tails))
            c.out_msgs += k
            c.out_bytes += total
            sub.delivered += k
            touch(c)
        if routes:
            rhead = self._rmsg + subject
            if tails is None:
                data = rhead + size_line + (sep % rhead).join(payloads) + CRLF
            else:
                data = rhead + rhead.join(tails)
            for route in routes:
                route._out.append(data)
                route.out_msgs += k
                route.out_bytes += total
                touch(route)
            self.rt_out_msgs += k * len(routes)
            self.rt_out_bytes += total * len(routes)
        n = len(targets)
        self.out_msgs += k * n
        self.out_bytes += total * n

    def touch(self, c: Any) -> None:
        """Note that ``c``'s buffer was appended to in batch mode (``flush()``
        accounts it and wakes or writes it)."""
        self._touched.add(c)

    @property
    def flushing(self) -> bool:
        """Deferred work is running: the enclosing ``flush()`` wakes what it touches."""
        return self._flushing

    def batched(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` as one batch: the buffers it publishes to are woken
        (a client session's: written) once, when it returns, rather than once
        per message -- a replicated stream hands out a committed batch's
        PubAcks from its Raft driver this way (one socket write per batch,
        not per PubAck)."""
        if self._flushing:
            fn()
            return
        self._flushing = True
        try:
            fn()
        finally:
            self._flushing = False
            self.flush()

    def defer(self, fn: Callable[[], None]) -> None:
        """Have ``fn()`` called at the next ``flush()``, before the buffers are
        woken: work that a batch of messages being routed gathers (a stream's
        captured publishes) is then done once per batch, by the routing task.
        ``fn`` must not raise."""
        self._deferred.append(fn)

    def flush(self) -> None:
        """Run deferred work, then account and wake every buffer the fast path
        appended to."""
        if self._deferred and not self._flushing:
            self._flushing = True
            try:
                while self._deferred:
                    fns, self._deferred = self._deferred, []
                    for fn in fns:
                        fn()
            finally:
                self._flushing = False
        touched = self._touched
        if touched:
            for c in touched:
                c.flush_batch()
            touched.clear()

    def _internal_targets(self, subject: bytes) -> tuple[tuple[Any, Any], ...] | None:
        """``(client, subscription)`` of each subscriber of ``subject`` when
        ``publish`` found them all internal (a stream's capture, a service),
        with no queue and no route interest, in this interest generation;
        else None.  A dict lookup: the first message of a subject takes
        ``publish``, which notes it (``_note_internal``)."""
        entry = self._internal.get(subject)
        if entry is not None and entry[0] == self.gen:
            return entry[1]
        return None

    def _note_internal(self, subject: bytes, psubs: list[Subscription]) -> None:
        """Remember ``subject``'s all-internal subscribers (see ``_internal_targets``).
        Never for ``$JS.ACK.`` subjects (one-off: the ack intake takes them)."""
        if subject.startswith(JS_ACK_PREFIX):
            return
        if self.route_sublist.count and self.route_sublist.has_interest(subject):
            return
        if self._internal_admit.room(self._internal):
            # subjects with the same internal subscribers (a stream's capture of
            # every key of a KV bucket) share one entry value
            key = tuple(psubs)
            shared = self._internal_shared
            if self._internal_shared_gen != self.gen or len(shared) >= INTERNAL_SHARED_MAX:
                shared.clear()
                self._internal_shared_gen = self.gen
            entry = shared.get(key)
            if entry is None:
                entry = shared[key] = (self.gen, tuple((sub.client, sub) for sub in psubs))
            self._internal[subject] = entry

    def _to_internal(
        self,
        src: Any,
        subject: bytes,
        replies: list[bytes | None],
        payloads: list[bytes],
        routed: bool = False,
    ) -> None:
        """Hand header-less messages to ``subject``'s internal subscribers
        (``_internal_targets``), without a match per message; if interest
        changes on the way (a handler subscribes or leaves), the rest take
        ``publish``."""
        gen = self.gen
        targets = self._internal_targets(subject)
        assert targets is not None
        if routed:
            targets = tuple(t for t in targets if not t[1].local)
        if len(targets) == 1 and len(payloads) > 1:
            # one subscriber taking runs (a stream's capture): one call
            c, sub = targets[0]
            if c.deliver_internal_run(sub, subject, replies, payloads, src):
                self.out_msgs += len(payloads)
                return
        n = 0
        for i, payload in enumerate(payloads):
            if self.gen != gen:
                again = () if routed else None
                for reply, rest in zip(replies[i:], payloads[i:], strict=True):
                    self.publish(src, subject, reply, None, rest, again)
                break
            reply = replies[i]
            for c, sub in targets:
                c.deliver_internal(sub, subject, reply, None, payload, src)
                n += 1
        self.out_msgs += n

    def _make_plan(self, subject: bytes, psubs: list[Subscription]) -> Plan | None:
        """``subject``'s delivery plan for plain subscribers ``psubs`` (kept
        when the plan cache admits it); None when the interest is not plain
        (an all-internal one is noted for ``_internal_targets`` instead)."""
        if subject.startswith(MSG_NEXT_PREFIX) and self.route_sublist.count:
            return None  # its route depends on the consumer's leader (``_to_routes``)
        if psubs and all(sub.client.internal for sub in psubs):
            self._note_internal(subject, psubs)
            return None
        targets = []
        leafs: set[Any] = set()
        spoke = False
        for sub in psubs:
            c = sub.client
            if not c.internal and c.deliver_filter is LEAF_LINK:
                # a leaf link: one plain LMSG per message, whatever matched
                if c not in leafs:
                    leafs.add(c)
                    targets.append((c, b"LMSG " + subject, sub))
                    spoke = spoke or c.solicited
                continue
            if (
                c.internal
                or c.deliver_filter is not None
                or sub.max_msgs is not None
                or c.resp_perms is not None
            ):
                return None
            targets.append((c, b"MSG " + subject + sub.sid_sp, sub))
        routes: tuple[Any, ...] = ()
        if self.route_sublist.count:
            rr = self.route_sublist.match(subject)
            if rr.qsubs:
                return None
            routes = tuple(dict.fromkeys(rs.route for rs in rr.psubs))
        all_targets = tuple(targets)
        # a routed message's targets: no spoke link (the leaf cluster's other servers
        # have their own)
        routed_targets = (
            tuple(
                t for t in all_targets if not (t[0].deliver_filter is LEAF_LINK and t[0].solicited)
            )
            if spoke and not subject.startswith(SERVICE_REPLY_PREFIX)
            else all_targets
        )
        plan = (self.gen, all_targets, routes, routed_targets)
        self._keep_plan(subject, plan, targets[0] if len(targets) == 1 and not routes else None)
        return plan

    def _keep_plan(self, subject: bytes, plan: Plan, simple: tuple[Any, bytes, Any] | None) -> None:
        """Cache ``subject``'s new plan (and its one target as ``_simple``) when admitted."""
        if self._plans_admit.room(self._plans):
            self._plans[subject] = plan
        if simple is not None:
            if self._simple_gen != self.gen:
                self._simple.clear()
                self._simple_gen = self.gen
            if self._simple_admit.room(self._simple):
                self._simple[subject] = simple

    def _family_plan(self, subject: bytes, prefix: bytes, plan: Plan | None) -> None:
        """Note whether every subject ``prefix.<token>`` gets a plan like
        ``subject``'s: one plain local subscriber, no route, no queue, nothing
        internal.  True when no subscription has a literal token where the
        last one goes (``Sublist._last_token_free``: the match cannot differ)
        and no route carries interest; only for subjects outside the ``$`` and
        ``_`` spaces (acks, API, inboxes and replies have paths of their own).
        Then the first message of each new subject of the family (an id per
        message: ``orders.<id>``) builds its plan without a match."""
        families = self._families
        if len(families) >= FAMILIES_MAX:
            families.clear()
        target = None
        if (
            plan is not None
            and len(plan[1]) == 1
            and not plan[2]
            and plan[1] is plan[3]
            and subject[:1] not in (b"$", b"_")
            and not self.route_sublist.count
        ):
            c, head, sub = plan[1][0]
            if head.startswith(b"MSG ") and self.sublist._last_token_free(subject.split(b".")):
                target = (c, sub)
        families[prefix] = (self.gen, target)

    def _fresh_plan(self, src: Any, subject: bytes) -> Plan | None:
        """A plan for a reply-less, header-less message to ``subject`` that has
        no current one (``fast_mixed``): a match and ``_make_plan``, with the
        match not cached separately; for the answer to a request seen (a
        reply inbox, ``_replies``), a plan of its one plain subscriber that is
        used for this message only.  None when the message needs ``_one``
        (JetStream acks, internal subscribers, queue groups, anything not
        plain)."""
        if subject in self._replies:
            del self._replies[subject]
            target = self._once_target(src, subject)
            if target is None:
                return None
            c, sub = target
            target = ((c, b"MSG " + subject + sub.sid_sp, sub),)
            return (self.gen, target, (), target)
        prefix, dot, _ = subject.rpartition(b".")
        if dot:
            family = self._families.get(prefix)
            if family is not None and family[0] == self.gen:
                if family[1] is not None:  # the family's one target: no match needed
                    c, sub = family[1]
                    one = (c, b"MSG " + subject + sub.sid_sp, sub)
                    targets = (one,)
                    plan = (self.gen, targets, (), targets)
                    self._keep_plan(subject, plan, one)
                    return plan
                dot = b""  # known not to match alike
        if (
            subject.startswith(JS_ACK_PREFIX)
            or self._internal_targets(subject) is not None
            or self._qplan(subject) is not None
        ):
            return None
        r = self.sublist.match_uncached(subject)
        if r.qsubs:
            return None
        plan = self._make_plan(subject, r.psubs)
        if dot:
            self._family_plan(subject, prefix, plan)
        return plan

    def deliver_routed(self, ev: Any) -> None:
        """Deliver a message that arrived on a route (an ``RMsg`` event)."""
        self.publish(None, ev.subject, ev.reply, ev.headers, ev.payload, ev.queues, None, ev.origin)

    def no_responders(self, src: Any, subject: bytes, reply: bytes) -> None:
        """Send ``src`` a 503 status on ``reply`` (to its own subscriptions)."""
        r = self.sublist.match(reply)
        hdr = b"NATS/1.0 503\r\nNats-Subject: " + subject + b"\r\n\r\n"
        for sub in (*r.psubs, *(s for group in r.qsubs for s in group)):
            if sub.client is src:
                sizes = b" %d %d\r\n" % (len(hdr), len(hdr))
                src.enqueue(b"HMSG " + reply + sub.sid_sp + sizes + hdr + CRLF)
                return
