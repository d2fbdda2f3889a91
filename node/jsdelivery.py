"""JetStream delivery paths of the router (a mixin of ``node.router.Router``).

Theory of operation: consumer deliveries are routed by their deliver subject
(an inbox or ``deliver_subject``) but shown to clients with the stream
subject (``deliver_as``; ``deliver_run_as`` writes a whole fetch batch with
one join when the inbox has one plain local subscriber).  Across a route they
travel as nats-server sends them: ``RMSG <deliver subject>
$JS.ACK.….<pending>@<stream subject>``; a message arriving on a route with
such a reply is delivered locally under the stream subject with the plain ack
reply (``split_js_ack``).  Acks (``$JS.ACK.<stream>.<consumer>.…``, every one
a unique subject) are handed straight to the consumer's internal ack
subscription while those subscriptions are the only interest overlapping
``$JS.ACK.>`` (``_ack_intake``), so they neither miss the match cache nor
leave plans behind.  The methods use the ``Router``'s state (sublists,
interest generation, counters, batch set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import random

    from node.session import Subscription
    from node.sublist import Sublist

CRLF = b"\r\n"
JS_ACK_PREFIX = b"$JS.ACK."


class _LeafLink:
    """The ``deliver_filter`` of a leaf connection (a marker: never called)."""

    def __call__(self, subject: bytes) -> bool:
        return True


LEAF_LINK = _LeafLink()
"""A leaf connection's ``deliver_filter``: the router hands it each message once
(``send_msg`` with the queue groups it was picked for) and no delivery plan
ever includes it."""


def pick_member(group: list[Any], rng: Any) -> Any:
    """One member of a queue group, as nats-server picks it: a local member (a client, a
    service, a consumer) at random while the group has one -- a leaf link is a fallback --
    and among leaf links only, by the weight each peer announced (``LS+ subject queue N``:
    the members it stands for).  A group without leaf links costs one draw."""
    n = len(group)
    if n == 1:
        return group[0]
    sub = group[rng.randrange(n)]
    if sub.client.deliver_filter is not LEAF_LINK:
        return sub  # each local member: 1/n here, the rest of its share below
    local = [s for s in group if s.client.deliver_filter is not LEAF_LINK]
    if local:
        return local[rng.randrange(len(local))] if len(local) > 1 else local[0]
    weights = [s.client.weights.get((s.subject, s.queue), 1) for s in group]
    pick = rng.randrange(sum(weights))
    for s, w in zip(group, weights, strict=True):
        pick -= w
        if pick < 0:
            return s
    return group[-1]


def leaf_groups(qsubs: list[list[Any]], no_spoke: bool, origin: bytes) -> list[list[Any]]:
    """Queue groups without the members a message may not reach: spoke links
    (``no_spoke``: a routed message) and the links to its leaf cluster ``origin``."""
    out = []
    for g in qsubs:
        kept = []
        for s in g:
            c = s.client
            if c.deliver_filter is LEAF_LINK and (
                (no_spoke and c.solicited) or (origin and c.origin == origin)
            ):
                continue
            kept.append(s)
        if kept:
            out.append(kept)
    return out


# the last five tokens of a consumer's ack subscription
_ACK_TAIL = [b"*"] * 5


def split_js_ack(reply: bytes) -> tuple[bytes, bytes] | None:
    """``(ack, subject)`` of a routed ``$JS.ACK.….<pending>@<subject>`` reply
    (the first ``@`` after the ack subject's eight dots), else None."""
    if not reply.startswith(JS_ACK_PREFIX):
        return None
    i = reply.find(b"@")
    while i > 0:
        if reply.count(b".", 0, i) >= 8:
            return (reply[:i], reply[i + 1 :]) if i < len(reply) - 1 else None
        i = reply.find(b"@", i + 1)
    return None


def _ack_sub(table: dict[bytes, Any], subject: bytes) -> Any:
    """The ack subscription ``table`` holds for ``subject`` when the subject
    has the shape one matches (``$JS.ACK.<stream>.<consumer>`` and five more
    non-empty tokens), else None."""
    if (
        not subject.startswith(JS_ACK_PREFIX)
        or subject.count(b".") != 8
        or b".." in subject
        or subject.endswith(b".")
    ):
        return None
    i = subject.find(b".", 8)
    return table.get(subject[8 : subject.find(b".", i + 1)])


class JetStreamDelivery:
    """The router's JetStream delivery methods (mixed into ``Router``)."""

    if TYPE_CHECKING:
        sublist: Sublist[Subscription]
        route_sublist: Sublist[Any]
        rng: random.Random
        gen: int
        out_msgs: int
        out_bytes: int
        _ack_gen: int
        _ack_subs: dict[bytes, Any]
        _touched: set[Any]

        def _to_routes(
            self,
            subject: bytes,
            reply: bytes | None,
            headers: bytes | None,
            payload: bytes,
            qsubs: Any,
            only_queues: tuple[bytes, ...] | None = None,
            origin: bytes = b"",
            taken: list[bytes] | None = None,
        ) -> int: ...

    def _ack_intake(self, src: Any, subject: bytes, reply: bytes | None, payload: bytes) -> bool:
        """Hand a ``$JS.ACK.<stream>.<consumer>.…`` publish straight to the
        consumer's internal ack subscription, without a sublist match (every
        ack subject is unique: each would miss the match cache and leave a
        plan behind).  Only while those subscriptions are the sole interest
        that overlaps ``$JS.ACK.>`` (no client or route interest, no queue);
        False sends the message down the normal path.
        """
        sub = _ack_sub(self._current_ack_table(), subject)
        if sub is None:
            return False  # not an ack subscription's shape, or no such consumer
        self.out_msgs += 1
        sub.client.deliver_internal(sub, subject, reply, None, payload, src)
        return True

    def ack_run(
        self,
        src: Any,
        subjects: list[bytes],
        payload: bytes,
        each: Callable[[bytes, bytes], object],
    ) -> None:
        """Reply-less messages without headers sharing ``payload`` (a client's
        run of acks): consecutive ones for one consumer go to its ack
        subscription in one ``deliver_internal_many`` call (as ``_ack_intake``
        hands over one); any other goes to ``each(subject, payload)``, in order.
        """
        table = self._current_ack_table()
        if not table:
            for subject in subjects:
                each(subject, payload)
            return
        first = subjects[0]
        i = first.find(b".", 8)
        j = first.find(b".", i + 1) if i > 0 else -1
        if first.startswith(JS_ACK_PREFIX) and 0 < j < len(first) - 1:
            # usually every ack of the run is for one consumer: one C-level check
            sub = table.get(first[8:j])
            prefix = b"\n" + first[: j + 1]
            if sub is not None and (b"\n" + b"\n".join(subjects)).count(prefix) == len(subjects):
                self._hand_acks(sub, subjects, payload, src, each)
                return
        cur: Any = None
        batch: list[bytes] = []
        for subject in subjects:
            sub = _ack_sub(table, subject)
            if sub is not cur:
                if batch:
                    self._hand_acks(cur, batch, payload, src, each)
                    batch = []
                cur = sub
            batch.append(subject)
        self._hand_acks(cur, batch, payload, src, each)

    def _hand_acks(
        self,
        sub: Any,
        subjects: list[bytes],
        payload: bytes,
        src: Any,
        each: Callable[[bytes, bytes], object],
    ) -> None:
        if sub is None:
            for subject in subjects:
                each(subject, payload)
            return
        self.out_msgs += len(subjects)
        sub.client.deliver_internal_many(sub, subjects, payload, src)

    def _current_ack_table(self) -> dict[bytes, Any]:
        """The ack intake table, rebuilt when the interest changed."""
        if self._ack_gen != self.gen:
            self._ack_subs = self._ack_table()
            self._ack_gen = self.gen
        return self._ack_subs

    def _ack_table(self) -> dict[bytes, Any]:
        """The ack intake table for the current interest ({} = not usable)."""
        if self.route_sublist.count and self.route_sublist.overlapping(b"$JS.ACK"):
            return {}
        table: dict[bytes, Any] = {}
        for sub in self.sublist.overlapping(b"$JS.ACK"):
            toks = sub.subject.split(b".")
            key = b".".join(toks[2:4])
            if (
                not getattr(sub.client, "internal", False)
                or sub.queue is not None
                or sub.max_msgs is not None
                or toks[4:] != _ACK_TAIL
                or any(t in (b"*", b">") for t in toks[2:4])
                or key in table
            ):
                return {}
            table[key] = sub
        return table

    def deliver_as(
        self,
        to: bytes,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        to_routes: bool = True,
        src: Any = None,
        origin: bytes = b"",
    ) -> int:
        """Deliver to the subscribers of ``to`` a message whose MSG line
        names ``subject`` (JetStream deliveries: routed by the inbox, shown
        with the stream subject).  One member per queue group.  Routes with
        interest in ``to`` get it as ``RMSG to reply@subject`` unless
        ``to_routes`` is False (it came from a route); leaf links as ``LMSG
        to reply@subject`` (never ``src``, the link it came from).  A delivery
        from a hub-side link to a leaf cluster goes to routes as nats-server sends
        it, ``LMSG <origin> ...`` (no route whose interest is that cluster's own),
        and ``origin`` (a routed one's cluster) keeps it off the links to that
        cluster, so a leaf cluster gets it once.  Returns the number of copies
        handed out (a route counts once).
        """
        r = self.sublist.match(to)
        routed = 0
        via = reply + b"@" + subject if reply else None
        leaf_src = src is not None and src.deliver_filter is LEAF_LINK
        spoke_src = leaf_src and src.solicited
        if leaf_src and not spoke_src:
            origin = src.origin  # its leaf cluster (a hub-side link's), marked on routes
        qgroups = r.qsubs
        if qgroups and (origin or not to_routes):  # links it may not take: no member
            qgroups = leaf_groups(qgroups, not to_routes, origin)
        if to_routes and self.route_sublist.count and not spoke_src:
            # (a spoke link's message stays on this server: its peers have their own links)
            # (the groups a route's member serves instead of a local one)
            taken: list[bytes] | None = [] if qgroups else None
            routed = self._to_routes(to, via, headers, payload, qgroups, None, origin, taken)
            if taken:
                qgroups = [g for g in qgroups if g[0].queue not in taken]
        targets = list(r.psubs)
        for group in qgroups:
            targets.append(pick_member(group, self.rng))
        mid = b" " + reply + b" " if reply else b" "
        plen = len(payload)
        n = 0
        for sub in targets:
            c = sub.client
            if c is src and src is not None:
                continue
            if c.deliver_filter is LEAF_LINK:
                if not to_routes and c.solicited:
                    continue  # a routed message: never out on a spoke link
                if origin and c.origin == origin:
                    continue  # never back into the leaf cluster it came from
                if via is None:
                    c.send_msg(to, None, headers, payload, [])
                else:
                    c.send_msg(to, via, headers, payload, [sub.queue] if sub.queue else [])
                n += 1
                continue
            if c.internal:
                if sub.local and not to_routes:
                    continue  # a server-local service: not for routed messages
                c.deliver_internal(sub, subject, reply, headers, payload, None)
            else:
                if headers is None or not c.headers:
                    body = mid + str(plen).encode() + CRLF + payload + CRLF
                    data = b"MSG " + subject + sub.sid_sp + body
                else:
                    hl = len(headers)
                    sizes = str(hl).encode() + b" " + str(hl + plen).encode()
                    data = (
                        b"HMSG "
                        + subject
                        + sub.sid_sp
                        + mid
                        + sizes
                        + CRLF
                        + headers
                        + payload
                        + CRLF
                    )
                c.enqueue(data, plen)
                sub.delivered += 1
                if sub.max_msgs is not None and sub.delivered >= sub.max_msgs:
                    c.remove_sub(sub)
            n += 1
        self.out_msgs += n
        self.out_bytes += plen * n
        return n + routed

    def deliver_run_as(
        self, to: bytes, msgs: list[tuple[bytes, bytes | None, bytes | None, bytes]]
    ) -> int:
        """``deliver_as`` for several messages ``(subject, reply, headers,
        payload)`` to one inbox.  When ``to`` has exactly one plain local
        subscriber and no route interest (a pull request's inbox), their ops
        are built with one join and appended in batch mode (the caller must
        ``flush()``); otherwise each goes through ``deliver_as``.  Returns the
        copies handed out.
        """
        sub = self.inbox_target(to)
        if sub is None:
            return sum(self.deliver_as(to, *m) for m in msgs)
        c = sub.client
        sid = sub.sid_sp
        with_headers = c.headers
        parts = []
        total = 0
        for subject, reply, headers, payload in msgs:
            plen = len(payload)
            total += plen
            mid = b" " + reply + b" " if reply else b" "
            if headers is None or not with_headers:
                parts.append(b"MSG %b%b%b%d\r\n%b\r\n" % (subject, sid, mid, plen, payload))
            else:
                hl = len(headers)
                parts.append(
                    b"HMSG %b%b%b%d %d\r\n%b%b\r\n"
                    % (subject, sid, mid, hl, hl + plen, headers, payload)
                )
        k = len(msgs)
        self.append_built(sub, b"".join(parts), k, total)
        return k

    def inbox_target(self, to: bytes) -> Any:
        """The subscription of ``to`` when it has exactly one plain local
        subscriber and no route interest (a pull request's inbox), so that
        deliveries to it may be built as bytes and appended with
        ``append_built``; else None (``deliver_as`` each)."""
        r = self.sublist.match(to)
        psubs = r.psubs
        if len(psubs) != 1 or r.qsubs:
            return None
        if self.route_sublist.count and self.route_sublist.has_interest(to):
            return None
        sub = psubs[0]
        c = sub.client
        if c.internal or c.deliver_filter is not None or sub.max_msgs is not None:
            return None
        return sub

    def append_built(self, sub: Any, data: bytes, k: int, payload_bytes: int) -> None:
        """Append ``k`` ready MSG/HMSG ops for ``sub`` (from ``inbox_target``)
        in batch mode (the caller must ``flush()``)."""
        c = sub.client
        c._out.append(data)
        c.out_msgs += k
        c.out_bytes += payload_bytes
        sub.delivered += k
        self._touched.add(c)
        self.out_msgs += k
        self.out_bytes += payload_bytes
