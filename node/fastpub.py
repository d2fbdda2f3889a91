"""The router's handlers for batches of plain publishes (a mixin of ``node.router.Router``).

Theory of operation: a session's parser (``ProtocolConnection.feed``) hands
well-formed PUBs over in batches -- one message, a run to one subject, small
acks to many subjects, reply-less singles to changing subjects -- and these
handlers deliver them along the router's delivery plans (``Router._plans``:
per subject, its plain local subscribers as ``(client, b"MSG <subject>
<sid>", subscription)`` and its routes), appending straight to the
subscribers' outbound buffers in batch mode (the caller ``flush()``es after
the batch).  Anything without a current plan falls back to ``_one`` /
``publish``.

Rotating subjects (``fast_mixed``): when every subject of the batch has a
plan with one local target on one connection and no route (``_simple``,
kept by ``_make_plan`` for the current interest generation), the whole batch
is taken with C-level maps -- the targets looked up with ``map``, the ops
built as one interleaved list (heads, the shared size line, payloads, CRLFs)
and joined once -- so nothing runs in Python per message.  Otherwise a loop
gathers each connection's ops (one join per connection and stretch); a
subject without a plan gets one made on the spot (``_fresh_plan``: a match
read through the sublist cache without adding to it), and the answer to a
request seen (a reply inbox) joins the same batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from node.jsdelivery import JS_ACK_PREFIX

CRLF = b"\r\n"

Plan = tuple[
    int, tuple[tuple[Any, bytes, Any], ...], tuple[Any, ...], tuple[tuple[Any, bytes, Any], ...]
]
"""A delivery plan: ``(gen, ((client, b"MSG <subject> <sid>", sub), ...), (route, ...),
routed targets)``; the routed targets (a routed message's) are the targets without spoke
leaf links (node.leaf)."""

PubFn = Callable[[bytes, bytes | None, bytes], None]
PubRunFn = Callable[[bytes, list[bytes | None], list[bytes]], None]
PubsFn = Callable[[list[bytes], bytes], None]

_CONN, _HEAD, _SUB = itemgetter(0), itemgetter(1), itemgetter(2)
_OP = b"%b %d\r\n%b\r\n".__mod__
"""``_OP((b"MSG <subject> <sid>", size, payload))``: one whole MSG op."""


class FastPublish:
    """The ``Router``'s batch handlers (see the module doc)."""

    if TYPE_CHECKING:
        gen: int
        out_msgs: int
        rt_in_msgs: int
        rt_in_bytes: int
        out_bytes: int
        _plans: dict[bytes, Plan]
        _simple: dict[bytes, tuple[Any, bytes, Any]]
        _simple_gen: int
        _touched: set[Any]

        def publish(
            self,
            src: Any,
            subject: bytes,
            reply: bytes | None,
            headers: bytes | None,
            payload: bytes,
            routed_queues: tuple[bytes, ...] | None = None,
        ) -> int: ...

        def ack_run(
            self,
            src: Any,
            subjects: list[bytes],
            payload: bytes,
            each: Callable[[bytes, bytes], None],
        ) -> None: ...

        def _one(
            self, src: Any, subject: bytes, reply: bytes | None, payload: bytes, to_routes: bool
        ) -> None: ...

        def _run(
            self,
            src: Any,
            subject: bytes,
            replies: list[bytes | None],
            payloads: list[bytes],
            to_routes: bool,
        ) -> None: ...

        def _deliver_one(
            self,
            subject: bytes,
            targets: tuple[tuple[Any, bytes, Any], ...],
            routes: tuple[Any, ...],
            reply: bytes | None,
            payload: bytes,
        ) -> int: ...

        def _fresh_plan(self, src: Any, subject: bytes) -> Plan | None: ...

        def _once_target(self, src: Any, subject: bytes) -> tuple[Any, Any] | None: ...

        _replies: dict[bytes, None]

    def fast_publisher(self, src: Any) -> tuple[PubFn, PubRunFn, PubsFn]:
        """PUB handlers for a client with no per-message checks to make.

        Returns ``(pub, pub_run, pubs)`` for ``ProtocolConnection.feed``: one
        message, a run of messages to one subject, or reply-less messages
        sharing a payload to several subjects (acks: ``ack_run``).  Valid while the
        client's options stay as they are (the session asks for new ones after
        CONNECT).  With a current delivery plan they append straight to the
        subscribers' (and routes') buffers and remember them — the caller must
        call ``flush()`` after the batch; otherwise they fall back to
        ``publish``.  They count ``in_msgs``/``in_bytes`` on ``src``.
        """
        echo = src.echo
        one = self._one

        def pub(subject: bytes, reply: bytes | None, payload: bytes) -> None:
            src.in_msgs += 1
            src.in_bytes += len(payload)
            if echo:
                one(src, subject, reply, payload, True)
            else:
                self.publish(src, subject, reply, None, payload)

        def pub_run(subject: bytes, replies: list[bytes | None], payloads: list[bytes]) -> None:
            src.in_msgs += len(payloads)
            src.in_bytes += sum(map(len, payloads))
            if echo:
                self._run(src, subject, replies, payloads, True)
            else:
                for reply, payload in zip(replies, payloads, strict=True):
                    self.publish(src, subject, reply, None, payload)

        def each(subject: bytes, payload: bytes) -> None:
            if echo:
                one(src, subject, None, payload, True)
            else:
                self.publish(src, subject, None, None, payload)

        def pubs(subjects: list[bytes], payload: bytes) -> None:
            src.in_msgs += len(subjects)
            src.in_bytes += len(payload) * len(subjects)
            self.ack_run(src, subjects, payload, each)

        return pub, pub_run, pubs

    def fast_mixed(self, src: Any) -> Callable[[list[bytes], list[bytes]], None]:
        """The ``on_mixed`` handler for ``fast_publisher``'s client: reply-less
        messages each to its own subject, delivered along their plans in one
        loop (a subject without a current plan takes ``_one``).  Same contract
        as ``fast_publisher``'s handlers."""
        echo = src.echo
        one, deliver, plans, fresh = self._one, self._deliver_one, self._plans, self._fresh_plan
        once_target = self._once_target
        simple = self._simple.get

        def mixed(subjects: list[bytes], payloads: list[bytes]) -> None:
            src.in_msgs += len(subjects)
            sizes = list(map(len, payloads))
            nbytes = sum(sizes)
            src.in_bytes += nbytes
            if not echo:
                for subject, payload in zip(subjects, payloads, strict=True):
                    self.publish(src, subject, None, None, payload)
                return
            if self._simple_gen == self.gen:
                # the commonest shape: every subject's plan is one local
                # subscriber of one connection, no route -- the whole batch
                # with C-level maps and one join, nothing per message in Python
                targets: list[Any] = list(map(simple, subjects))
                if None not in targets:
                    conns = set(map(_CONN, targets))
                    if len(conns) == 1:
                        (c,) = conns
                        k = len(targets)
                        if sizes.count(sizes[0]) == k:  # one size (the bulk parse's shape)
                            ops = [b" %d\r\n" % sizes[0]] * (4 * k)
                            ops[0::4] = map(_HEAD, targets)
                            ops[2::4] = payloads
                            ops[3::4] = [CRLF] * k
                            c._out.append(b"".join(ops))
                        else:
                            c._out.append(
                                b"".join(
                                    map(_OP, zip(map(_HEAD, targets), sizes, payloads, strict=True))
                                )
                            )
                        c.out_msgs += k
                        c.out_bytes += nbytes
                        self._touched.add(c)
                        self.out_msgs += k
                        self.out_bytes += nbytes
                        for sub, m in Counter(map(_SUB, targets)).items():
                            sub.delivered += m
                        return
            # the common shape: each subject's plan has one local subscriber and
            # no route, mostly the same connection: its ops are gathered and
            # appended with one join (kept in order: anything else first hands
            # over what was gathered)
            gen = self.gen
            last: Any = None
            parts: list[bytes] = []
            nbytes = 0
            replies = self._replies
            # answers to one requester's inbox family (``_INBOX.<id>.<n>``) share one
            # target while no interest changes: the first one's is reused for the
            # rest of the batch, only outside a cluster (there each inbox's own
            # route interest counts) and only while the family's match is cached
            memo = not self.route_sublist.count
            memo_prefix: bytes | None = None
            memo_target: Any = None
            memo_hits = 0
            family = self.sublist.family
            for subject, payload in zip(subjects, payloads, strict=True):
                plan = plans.get(subject)
                if plan is None or plan[0] != gen:
                    if subject in replies:
                        # the answer to a request seen (a reply inbox): its one plain
                        # subscriber, matched without caching (``_fresh_plan``'s case,
                        # without building a plan)
                        del replies[subject]
                        if memo:
                            prefix, dot, _ = subject.rpartition(b".")
                            if dot and prefix == memo_prefix:
                                target = memo_target
                                memo_hits += 1
                            else:
                                target = once_target(src, subject)
                                if target is not None and dot and family(prefix) is not None:
                                    memo_prefix, memo_target = prefix, target
                        else:
                            target = once_target(src, subject)
                        if target is not None:
                            c, sub = target
                            if c is not last:
                                if last is not None:
                                    self._give_parts(last, parts, nbytes)
                                    parts = []
                                    nbytes = 0
                                last = c
                            plen = len(payload)
                            parts.append(
                                b"MSG %b%b %d\r\n%b\r\n" % (subject, sub.sid_sp, plen, payload)
                            )
                            nbytes += plen
                            sub.delivered += 1
                            continue
                        plan = None
                    else:
                        plan = fresh(src, subject)  # a match; changes no interest
                if plan is not None and len(plan[1]) == 1 and not plan[2]:
                    c, head, sub = plan[1][0]
                    if c is not last:
                        if last is not None:
                            self._give_parts(last, parts, nbytes)
                            parts = []
                            nbytes = 0
                        last = c
                    plen = len(payload)
                    parts.append(b"%b %d\r\n%b\r\n" % (head, plen, payload))
                    nbytes += plen
                    sub.delivered += 1
                    continue
                if last is not None:
                    self._give_parts(last, parts, nbytes)
                    last, parts, nbytes = None, [], 0
                memo_prefix = None  # what follows may change interest (an internal handler)
                if plan is None:
                    one(src, subject, None, payload, True)
                    gen = self.gen
                elif plan[1] or plan[2]:
                    deliver(subject, plan[1], plan[2], None, payload)
            if memo_hits:
                self.sublist.count_hits(memo_hits)
            if last is not None:
                self._give_parts(last, parts, nbytes)

        return mixed

    def _give_parts(self, c: Any, parts: list[bytes], nbytes: int) -> None:
        """Append ``parts`` (whole ops) to ``c`` with one join (batched: callers ``flush()``)."""
        k = len(parts)
        c._out.append(b"".join(parts) if k > 1 else parts[0])
        c.out_msgs += k
        c.out_bytes += nbytes
        self._touched.add(c)
        self.out_msgs += k
        self.out_bytes += nbytes

    def fast_routed(self, route: Any) -> tuple[PubFn, PubRunFn]:
        """Handlers for plain messages arriving on ``route`` (no queues, no headers).

        Same contract as ``fast_publisher``; never forwards to other routes.
        """

        one = self._one

        def routed(subject: bytes, reply: bytes | None, payload: bytes) -> None:
            route.in_msgs += 1
            route.in_bytes += len(payload)
            self.rt_in_msgs += 1
            self.rt_in_bytes += len(payload)
            if reply is not None and reply.startswith(JS_ACK_PREFIX):
                self.publish(None, subject, reply, None, payload, ())
                return
            one(None, subject, reply, payload, False)

        def routed_run(subject: bytes, replies: list[bytes | None], payloads: list[bytes]) -> None:
            nbytes = sum(map(len, payloads))
            route.in_msgs += len(payloads)
            route.in_bytes += nbytes
            self.rt_in_msgs += len(payloads)
            self.rt_in_bytes += nbytes
            if any(r is not None and r.startswith(JS_ACK_PREFIX) for r in replies):
                for reply, payload in zip(replies, payloads, strict=True):
                    self.publish(None, subject, reply, None, payload, ())
                return
            self._run(None, subject, replies, payloads, False)

        return routed, routed_run
