"""Consumer delivery on one node: the consumers' manager, sending, acks.

Theory of operation
-------------------
``ConsumerManager`` starts each consumer (``cluster.consumers``), subscribes
its ack subjects ``$JS.ACK.<stream>.<consumer>.*.*.*.*.*`` (nine tokens, as
nats-server: other shapes find no listener) and, for pull consumers, runs a
``PullDispatcher`` (``node/jetstream/pull.py``: the waiting list of
``MSG.NEXT`` requests, status messages, heartbeats, expiry), and deletes
ephemeral consumers after ``inactive_threshold`` without requests.

A delivered message goes to the request's inbox with the *stream subject* in
its MSG line (``ConsumerManager.send``: a pull request's inbox gets the ops
built in one pass, anything else goes through ``Router.deliver_as``) and the
ack subject
``$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>`` as reply.
Acks are parsed here (``+ACK``/empty/``+OK``, ``-NAK`` [delay], ``+WPI``,
``+TERM`` [reason], ``+NXT`` [request]) and queued to the consumer; an ack
with a reply subject is answered with an empty message once applied.  A
client's run of reply-less acks (``Router.ack_run``) arrives as one call and
its plain ``+ACK``s are parsed in C-level passes.

Consumer advisories (CREATED, DELETED, MSG_NAKED, MSG_TERMINATED,
MAX_DELIVERIES, PAUSE -- on a change of ``pause_until`` and when a pause
ends) and, with ``sample_freq``, ack metrics
(``$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>``, explicit acks of
pending messages) are published as nats-server does: only with interest,
NUID ids, Go-escaped JSON in its struct order.

Consumers of replicated streams are made by their stream's log and worked
only on its leader (``node/jetstream/replicated_consumers.py``): their ack
subscription and dispatcher are attached (``attach``) and detached
(``detach``) as the lead moves.

Push consumers get a ``PushDispatcher`` (``node/jetstream/push.py``: deliver
subject interest, flow control, idle heartbeats, pacing) instead of a
waiting list; both send through ``ConsumerManager.send``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from cluster.consumer_fsm import (
    ConsumerOutcome,
    Delivery,
    MaxDeliveries,
    Nakked,
    Terminated,
    rfc3339_to_ns,
)
from cluster.consumer_model import AckPolicy, ConsumerConfig
from cluster.consumer_registry import ConsumerRegistry
from cluster.consumers import Consumer
from cluster.opfields import UINT64_MAX
from cluster.ops import AckItem, AckKind
from cluster.streams import Stream
from node.jetstream.common import dumps
from node.jetstream.pull import PullDispatcher, status
from node.jetstream.pullframes import build_frames, build_raw_frames, count_new
from node.jetstream.pullreq import parse_pull as parse_pull  # re-exported
from node.jetstream.push import PushDispatcher
from node.jetstream.replicated_consumers import ReplicatedConsumers
from node.jsapi.render import rfc3339_ns
from node.nextroute import LEADER_PREFIX
from node.protocol.boundedjson import loads as bounded_loads
from node.session import Subscription
from store.api import RawRun, StoredMsg

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService


def _plain_ack_seqs(subjects: list[bytes], nl_prefix: bytes) -> tuple[list[int], list[int]] | None:
    """The stream and consumer sequences of ack subjects that all have
    ``nl_prefix`` (``\n$JS.ACK.<stream>.<consumer>.``) and five more
    non-empty tokens with numeric sequences in range, in C-level passes over
    the joined subjects; None when any is not so (the caller takes them one
    by one then)."""
    n = len(subjects)
    text = b"\n" + b"\n".join(subjects)
    if text.count(nl_prefix) != n or b".." in text or b".\n" in text or text[-1] == 46:
        return None
    # "dc.sseq.dseq.ts.pending" each: 4n + 1 tokens, the n - 1 that hold a
    # newline exactly every fourth (so every subject has exactly five)
    tokens = text.replace(nl_prefix, b"\n")[1:].split(b".")
    if len(tokens) != 4 * n + 1 or b"".join(tokens[4:-1:4]).count(b"\n") != n - 1:
        return None
    s5, s6 = tokens[1::4], tokens[2::4]
    if not (b"".join(s5).isdigit() and b"".join(s6).isdigit()):
        return None
    sseqs, dseqs = list(map(int, s5)), list(map(int, s6))
    if max(sseqs) > UINT64_MAX or max(dseqs) > UINT64_MAX:
        return None
    return sseqs, dseqs


def _ack_seq(token: bytes) -> int:
    """A sequence token of an ack subject read as nats-server reads it: an
    empty or non-numeric token is 2**64-1 (a stream sequence beyond anything
    delivered: the ack is ignored; a consumer sequence: the ack goes by stream
    sequence), digits wrap modulo 2**64."""
    if not token.isdigit():
        return UINT64_MAX
    return int(token) & UINT64_MAX


log = logging.getLogger(__name__)

ADVISORY = "io.nats.jetstream.advisory.v1."
ACK_METRIC = "io.nats.jetstream.metric.v1.consumer_ack"
_GO_DURATION = re.compile(r"^([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$")
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}


def parse_go_duration(text: str) -> int | None:
    """Go ``time.ParseDuration`` (``5s``, ``1m30s``, ``250ms``) -> ns, or None."""
    if not text or not _GO_DURATION.match(text):
        return None
    total = 0.0
    for num, _, unit in re.findall(r"([0-9]*(\.[0-9]*)?)(ns|us|µs|ms|s|m|h)", text):
        if not num or num == ".":
            return None
        total += float(num) * _UNITS[unit]
    return int(total)


class ConsumerManager:
    """Consumers of one JetStream service: lifecycle, delivery, acks.

    Args:
        svc: the JetStream service (internal client, server, streams).
        nursery: where consumer and dispatcher tasks run.
    """

    def __init__(self, svc: JetStreamService, nursery: trio.Nursery) -> None:
        self.svc = svc
        self.nursery = nursery
        self.registry = ConsumerRegistry(svc.store_dir, nursery)
        self.pulls: dict[tuple[str, str], PullDispatcher] = {}
        self.pushes: dict[tuple[str, str], PushDispatcher] = {}
        self._subs: dict[tuple[str, str], Subscription] = {}
        self._scopes: dict[tuple[str, str], trio.CancelScope] = {}
        self._pause_timers: dict[tuple[str, str], trio.CancelScope] = {}
        #: the leader subject of each pull consumer led here (in a cluster)
        self._next_subs: dict[tuple[str, str], Subscription] = {}
        #: pulls this server took as the leader while its consumer was not
        #: yet activated (the lead is won before the listeners hear of it)
        self._early: dict[tuple[str, str], list[tuple[float, bytes, bytes]]] = {}
        #: consumers of replicated streams
        self.replicated = ReplicatedConsumers(self)
        svc.api.on_stream_started.append(self._stream_started)

    def _stream_started(self, stream: Stream) -> None:
        """A new (or restored) interest stream learns it has no consumers yet
        (a replicated stream: its leader, see ``replicated_consumers``)."""
        if stream.replicated is not None:
            self.replicated.stream_started(stream)
            return
        r = self.registry.retention(stream)
        if r is not None and r.interest:
            self.nursery.start_soon(r.refresh_interest)

    def of(self, stream: str) -> dict[str, Consumer]:
        """Consumers of ``stream`` by name."""
        return self.registry.of(stream)

    def count(self, stream: str) -> int:
        """How many consumers ``stream`` has."""
        return len(self.registry.of(stream))

    async def recover(self) -> None:
        """Restart the consumers saved on disk (after streams are recovered)."""
        for stream in list(self.svc.api.streams.values()):
            await self.recover_stream(stream)

    async def recover_stream(self, stream: Stream) -> None:
        """Restart the consumers of ``stream`` saved on disk (after it reopened);
        one whose state will not open is set aside (quarantined), the rest run.
        A replicated stream's consumers come from its journal instead."""
        if stream.replicated is not None:
            return
        name = stream.cfg.name
        saved = await trio.to_thread.run_sync(self.registry.saved, name)
        for cname, cfg, created_ns in saved:
            try:
                await self.start(stream, cname, cfg, created_ns)
            except Exception as exc:  # its state will not open: set it aside
                log.exception("event=consumer_recover_failed stream=%s consumer=%s", name, cname)
                reg = self.registry
                if reg.dir is not None:
                    d = reg.dir / "streams" / name / "consumers" / cname
                    why = f"{d}: {type(exc).__name__}: {exc}"
                    await trio.to_thread.run_sync(reg.quarantine_dir, name, d, why)
        r = self.registry.retention(stream)
        if r is not None:  # filters, then acks a crash kept from the stream
            await r.refresh_interest()
            await r.sweep()

    async def start(
        self, stream: Stream, name: str, cfg: ConsumerConfig, created_ns: int | None = None
    ) -> Consumer:
        """Create a consumer, its ack subscription and (pull or push) dispatcher."""
        consumer = await self.registry.create(stream, name, cfg, created_ns)
        consumer.outcome_listeners.append(lambda out: self.advise(consumer, out))
        self.attach(consumer)
        return consumer

    def attach(self, consumer: Consumer) -> None:
        """Subscribe ``consumer``'s acks and start its dispatcher (and pause timer)."""
        stream, name, cfg = consumer.stream, consumer.name, consumer.cfg
        key = (stream.cfg.name, name)
        # nine tokens, as nats-server's: any other shape finds no listener
        subject = f"$JS.ACK.{stream.cfg.name}.{name}.*.*.*.*.*".encode()
        on_ack = self._ack_handler(consumer)
        self._subs[key] = self.svc.client.subscribe(
            subject, on_ack, many=self._acks_handler(consumer, on_ack)
        )
        dispatcher: PullDispatcher | PushDispatcher
        if cfg.is_pull:
            dispatcher = self.pulls[key] = PullDispatcher(self, consumer)
            if self.svc.meta is not None:  # pulls routed to this leader (``node.nextroute``)
                leader = LEADER_PREFIX + f"{stream.cfg.name}.{name}".encode()
                self._next_subs[key] = self.svc.client.subscribe(leader, _interest_only)
            early = self._early.pop(key, [])
            now = trio.current_time()
            for t, reply, body in early:  # taken here before the lead took effect
                if now - t <= EARLY_PULL_S_MAX:
                    dispatcher.add(reply, body)
        else:
            rng = self.svc.router.rng
            dispatcher = self.pushes[key] = PushDispatcher(self, consumer, rng)
        scope = trio.CancelScope()
        self._scopes[key] = scope

        async def run() -> None:
            with scope:
                try:
                    await dispatcher.run()
                except Exception:
                    # One consumer's failure must not take the server down:
                    # it stops delivering (its state stays on disk) and says so.
                    self.svc.server.internal_error(
                        "consumer_dispatch", stream=key[0], consumer=key[1]
                    )

        self.nursery.start_soon(run)
        self._arm_pause(consumer)

    async def update(self, consumer: Consumer, cfg: ConsumerConfig) -> None:
        """Apply and persist a changed config; a push dispatcher re-reads it
        (a replicated consumer: through its stream's log, see ``reconfigured``)."""
        if consumer.replicated:
            await self.replicated.update(consumer, cfg)
            return
        old = consumer.cfg
        await self.registry.update(consumer, cfg)
        self.reconfigured(consumer, old)

    def reconfigured(self, consumer: Consumer, old: ConsumerConfig) -> None:
        """``consumer`` took a new config (was ``old``): dispatchers and pause follow."""
        cfg = consumer.cfg
        push = self.pushes.get((consumer.stream.cfg.name, consumer.name))
        if push is not None:
            push.reconfigure(old)
        if _pause_ns(old.pause_until) != _pause_ns(cfg.pause_until):
            self.pause_advisory(consumer)
            self._arm_pause(consumer)
            pull = self.pulls.get((consumer.stream.cfg.name, consumer.name))
            if pull is not None:
                pull.reconfigured()

    def _arm_pause(self, c: Consumer) -> None:
        """Until ``pause_until`` passes: then the pause advisory (paused
        false) and a wake-up for the dispatcher, as nats-server's timer."""
        key = (c.stream.cfg.name, c.name)
        old = self._pause_timers.pop(key, None)
        if old is not None:
            old.cancel()
        until_ns = _pause_ns(c.cfg.pause_until)
        if until_ns is None or until_ns <= time.time_ns():
            return
        scope = self._pause_timers[key] = trio.CancelScope()

        async def expire() -> None:
            with scope:
                await trio.sleep((until_ns - time.time_ns()) / 1e9)
                if self._pause_timers.get(key) is scope and not c.closed:
                    del self._pause_timers[key]
                    self.pause_advisory(c)
                    c.changed.set()

        self.nursery.start_soon(expire)

    async def delete(self, stream: str, name: str) -> Consumer | None:
        """Stop a consumer: waiting pulls get ``409 Consumer Deleted`` (None:
        a replicated consumer whose removal was not committed)."""
        key = (stream, name)
        consumer = self.registry.of(stream).get(name)
        if consumer is not None and consumer.replicated:
            if not await self.replicated.delete(consumer.stream, name):
                return None
            return consumer  # the table's listener stopped it (and advised)
        self._teardown(key, status(409, "Consumer Deleted"))
        consumer = await self.registry.delete(stream, name)
        self.action(consumer, "delete")
        return consumer

    def detach(self, key: tuple[str, str], *, closing: bool, lead_lost: bool = False) -> None:
        """Stop delivery and acks of a consumer.

        ``closing``: it is deleted, waiting pulls get ``409 Consumer Deleted``.
        ``lead_lost``: this server gave up the lead (a stepdown, a lost
        election), waiting pulls get ``409 Leadership Change`` -- what a
        nats-server client hears when its consumer's lead moves -- from here,
        the old leader, since no other server holds them (``node.nextroute``).
        Otherwise (a move between stores) they are dropped.
        """
        if closing:
            self._teardown(key, status(409, "Consumer Deleted"))
        else:
            reason = status(409, "Leadership Change") if lead_lost else None
            self._teardown(key, reason, deleted=False)

    async def delete_inactive(self, c: Consumer) -> None:
        """Delete ``c`` for inactivity, from its own dispatcher task.

        Shielded: the deletion cancels the dispatcher's scope, and must still
        finish (files, advisory).  Nothing happens if ``c`` is already gone.

        Cancellation: not cancellable (the deletion completes).
        """
        with trio.CancelScope(shield=True):
            if self.registry.of(c.stream.cfg.name).get(c.name) is c:
                await self.delete(c.stream.cfg.name, c.name)

    def drop_stream(self, stream: str) -> None:
        """Forget the consumers of a deleted stream."""
        for c in self.registry.drop_stream(stream):
            self._teardown((stream, c.name), status(409, "Consumer Deleted"))

    def leads_next(self, stream: str, name: str) -> bool:
        """This server holds the pull consumer's leader subject (``node.nextroute``)."""
        return (stream, name) in self._next_subs

    def drop_next_interest(self, stream: str, name: str) -> None:
        """Give up the pull consumer's leader subject (the lead moved on)."""
        sub = self._next_subs.pop((stream, name), None)
        if sub is not None:
            self.svc.client.unsubscribe(sub)

    def _teardown(
        self, key: tuple[str, str], reason: bytes | None, *, deleted: bool | None = None
    ) -> None:
        """Stop ``key``'s delivery; waiting pulls get ``reason`` (None: dropped).
        ``deleted`` (default: a reason is given) forgets requests parked early."""
        self.drop_next_interest(*key)
        if reason is not None if deleted is None else deleted:
            self._early.pop(key, None)
        pull = self.pulls.pop(key, None)
        if pull is not None:
            pull.close(reason)
        push = self.pushes.pop(key, None)
        if push is not None:
            push.close()
        for scopes in (self._scopes, self._pause_timers):
            scope = scopes.pop(key, None)
            if scope is not None:
                scope.cancel()
        sub = self._subs.pop(key, None)
        if sub is not None:
            self.svc.client.unsubscribe(sub)

    # -- requests ---------------------------------------------------------------

    def next_request(self, stream: str, name: str, reply: bytes, body: bytes) -> bool:
        """A ``MSG.NEXT``; False when there is no such consumer."""
        consumer = self.registry.of(stream).get(name)
        if consumer is None:
            return False
        pull = self.pulls.get((stream, name))
        if pull is None:
            if consumer.cfg.is_pull and not consumer.leading:  # the lead was just won here
                early = self._early.setdefault((stream, name), [])
                if len(early) < EARLY_PULLS_MAX:
                    early.append((trio.current_time(), reply, body))
                return True
            self.svc.client.publish(reply, b"", headers=status(409, "Consumer is push based"))
            return True
        pull.add(reply, body)
        return True

    # -- sending ------------------------------------------------------------------

    def send(
        self,
        c: Consumer,
        to: bytes,
        got: list[tuple[StoredMsg, Delivery]],
        after_each: Callable[[int], Callable[[], None] | None] | None = None,
        *,
        pendings: list[int] | None = None,
        flush: bool = True,
    ) -> None:
        """Deliver messages to ``to`` with their ack subjects.

        The messages go out in runs (one joined buffer for a pull request's
        inbox, ``Router.deliver_run_as``).  ``after_each(size)`` (push flow
        control) is told each message's delivered size (``to`` + ack subject
        + headers + payload) as it joins the run; when it returns an action
        (publishing a flow-control request), the run so far is delivered
        first, then the action runs, so the request follows exactly the
        message that made it due.  ``pendings``: each message's pending count
        in its ack subject, when the messages are part of a larger pick
        (default: counted down from ``pending_after_pick``); ``flush`` False
        leaves the flush of the router's batch to the caller.
        """
        router = self.svc.router
        pending = c.pending_after_pick
        lefts = iter(pendings) if pendings is not None else None
        new_after = count_new(got)
        prefix = f"$JS.ACK.{c.stream.cfg.name}.{c.name}.".encode()
        headers_only = c.cfg.headers_only
        sub = router.inbox_target(to) if after_each is None and not headers_only else None
        if sub is not None:  # a pull request's inbox: the frames built at once
            data, total = build_frames(
                got,
                sub.sid_sp,
                prefix,
                pending + new_after,
                pendings,
                with_headers=sub.client.headers,
            )
            router.append_built(sub, data, len(got), total)
            if flush:
                router.flush()
            return
        run: list[tuple[bytes, bytes | None, bytes | None, bytes]] = []
        for m, d in got:
            if d.dc == 1:
                new_after -= 1
            left = next(lefts) if lefts is not None else pending + new_after
            ack = b"%b%d.%d.%d.%d.%d" % (prefix, d.dc, d.sseq, d.dseq, m.ts_ns, left)
            headers: bytes | None = m.headers or None
            payload = m.payload
            if headers_only:
                base = m.headers[:-2] if m.headers else b"NATS/1.0\r\n"
                headers = base + b"Nats-Msg-Size: %d\r\n\r\n" % len(m.payload)
                payload = b""
            run.append((m.subject.encode(), ack, headers, payload))
            if after_each is not None:
                action = after_each(len(to) + len(ack) + len(headers or b"") + len(payload))
                if action is not None:
                    router.deliver_run_as(to, run)
                    run = []
                    action()
        if run:
            router.deliver_run_as(to, run)
        if flush:
            router.flush()

    def raw_target(self, c: Consumer, to: bytes) -> bool:
        """``send`` would build ``to``'s frames at once (a pull request's
        inbox, no ``headers_only``): a ``RawRun`` may be sent there."""
        return not c.cfg.headers_only and self.svc.router.inbox_target(to) is not None

    def send_raw(self, c: Consumer, to: bytes, rr: RawRun, ds: list[Delivery]) -> None:
        """``send`` of ``rr``'s messages delivered as ``ds`` (one each, in
        order), their frames built from the run (``build_raw_frames``)."""
        router = self.svc.router
        sub = router.inbox_target(to)
        if sub is None or c.cfg.headers_only:  # the inbox went meanwhile
            self.send(c, to, list(zip(rr.stored(), ds, strict=True)))
            return
        prefix = f"$JS.ACK.{c.stream.cfg.name}.{c.name}.".encode()
        left = c.pending_after_pick + len(ds)
        data, total = build_raw_frames(
            rr, ds, sub.sid_sp, prefix, left, with_headers=sub.client.headers
        )
        router.append_built(sub, data, len(ds), total)
        router.flush()

    # -- acks -----------------------------------------------------------------------

    def _ack_handler(
        self, consumer: Consumer
    ) -> Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]:
        """The handler of ``consumer``'s ack subscription (its subject names it)."""
        stream, name = consumer.stream.cfg.name, consumer.name
        client = self.svc.client
        offer, offer_plain = consumer.offer_ack, consumer.offer_plain_ack

        def on_ack(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            tokens = subject.split(b".")
            if len(tokens) != 9:
                return
            sseq, dseq = _ack_seq(tokens[5]), _ack_seq(tokens[6])
            if not reply and (not body or body == b"+ACK") and not consumer.cfg.sample_freq:
                offer_plain(sseq, dseq, None)
                return
            item, nxt = _ack_item(body, sseq, dseq)
            if item is None:  # an unknown ack body: nothing done, still answered
                if reply and sseq:
                    client.publish(reply, b"")
                return
            metric = self._ack_metric(consumer, item) if consumer.cfg.sample_freq else None
            if not reply and metric is None:
                if item.kind is AckKind.ACK:
                    offer_plain(sseq, dseq, None)
                else:
                    offer(item, None)
                return

            def done(res: Any) -> None:
                if metric is not None:
                    metric(res)
                if not reply:
                    return
                if nxt is not None:
                    self.next_request(stream, name, reply, nxt)
                elif res.ok:
                    client.publish(reply, b"")

            offer(item, done)

        return on_ack

    @staticmethod
    def _acks_handler(
        consumer: Consumer,
        on_ack: Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None],
    ) -> Callable[[Subscription, list[bytes], bytes], None]:
        """The ack subscription's handler for a client's run of reply-less
        acks sharing a body: plain ``+ACK``s are parsed and queued in one go
        (what ``on_ack`` does for each), anything else goes to ``on_ack``."""
        offer_many = consumer.offer_plain_acks
        nl_prefix = f"\n$JS.ACK.{consumer.stream.cfg.name}.{consumer.name}.".encode()

        def on_acks(sub: Subscription, subjects: list[bytes], body: bytes) -> None:
            if (body and body != b"+ACK") or consumer.cfg.sample_freq:
                for subject in subjects:
                    on_ack(sub, subject, None, None, body)
                return
            # all well formed (nine non-empty tokens each, numbers in range):
            # every field in C-level passes
            got = _plain_ack_seqs(subjects, nl_prefix)
            if got is not None:
                offer_many(*got)
                return
            sseqs = []
            dseqs = []
            for subject in subjects:
                tokens = subject.split(b".")
                # what the ack subscription (nine tokens) would not match
                if len(tokens) != 9 or b"" in tokens:
                    continue
                sseqs.append(_ack_seq(tokens[5]))
                dseqs.append(_ack_seq(tokens[6]))
            if sseqs:
                offer_many(sseqs, dseqs)

        return on_acks

    # -- advisories ----------------------------------------------------------------

    def _publish_advisory(
        self, subject: str, type_: str, body: dict[str, Any], *, domain_after: str = ""
    ) -> None:
        """Publish a consumer advisory as nats-server does: only when someone
        listens, NUID ``id``, Go-escaped JSON, ``domain`` last when set (or
        right after the key ``domain_after``)."""
        adv = self.svc.advisories
        subj = subject.encode()
        if not adv.interested(subj):
            return
        doc = {
            "type": type_ if "." in type_ else ADVISORY + type_,
            "id": adv.nuid.next(),
            "timestamp": rfc3339_ns(time.time_ns()),
            **body,
        }
        if self.svc.domain:
            if domain_after:
                keys = list(doc)
                at = keys.index(domain_after) + 1
                items = list(doc.items())
                doc = dict([*items[:at], ("domain", self.svc.domain), *items[at:]])
            else:
                doc["domain"] = self.svc.domain
        self.svc.client.publish(subj, dumps(doc).encode())

    def _ack_metric(self, c: Consumer, item: AckItem) -> Callable[[Any], None] | None:
        """For a sampled ack (``sample_freq``) of a message pending on an
        explicit-ack consumer: the callback that publishes its
        ``$JS.EVENT.METRIC.CONSUMER.ACK`` metric once the ack is applied
        (``ack_time``: ns since the message's ack timer started)."""
        cfg = c.cfg
        if (
            not cfg.sample_freq
            or item.kind is not AckKind.ACK
            or cfg.ack_policy is not AckPolicy.EXPLICIT
        ):
            return None
        try:
            freq = int(cfg.sample_freq.removesuffix("%"))
        except ValueError:
            return None
        if freq <= 0 or (freq < 100 and self.svc.server.rng.randrange(100) > freq):
            return None
        p = c.fsm.pending.get(item.sseq)
        if p is None:
            return None
        dseq, started_ns = p[0], p[1]
        dc = c.fsm.deliveries(item.sseq)

        def publish(res: Any) -> None:
            if not res.ok or item.sseq in c.fsm.pending:
                return
            s, n = c.stream.cfg.name, c.name
            body = {
                "stream": s,
                "consumer": n,
                "consumer_seq": dseq,
                "stream_seq": item.sseq,
                "ack_time": time.time_ns() - started_ns,
                "deliveries": dc,
            }
            self._publish_advisory(f"$JS.EVENT.METRIC.CONSUMER.ACK.{s}.{n}", ACK_METRIC, body)

        return publish

    def pause_advisory(self, c: Consumer) -> None:
        """``$JS.EVENT.ADVISORY.CONSUMER.PAUSE``: the consumer's pause state."""
        until = c.cfg.pause_until
        body = {
            "stream": c.stream.cfg.name,
            "consumer": c.name,
            "paused": (_pause_ns(until) or 0) > time.time_ns(),
            "pause_until": until or rfc3339_ns(0),
        }
        subject = f"$JS.EVENT.ADVISORY.CONSUMER.PAUSE.{c.stream.cfg.name}.{c.name}"
        self._publish_advisory(subject, "consumer_pause", body)

    def pin_advisory(self, c: Consumer, group: str, pin_id: str) -> None:
        """``$JS.EVENT.ADVISORY.CONSUMER.PINNED``: ``group`` pinned to ``pin_id``."""
        s, n = c.stream.cfg.name, c.name
        body = {
            "account": self.svc.account.name,
            "stream": s,
            "consumer": n,
            "group": group,
            "pinned_id": pin_id,
        }
        self._publish_advisory(
            f"$JS.EVENT.ADVISORY.CONSUMER.PINNED.{s}.{n}",
            "consumer_group_pinned",
            body,
            domain_after="consumer",
        )

    def unpin_advisory(self, c: Consumer, group: str, reason: str) -> None:
        """``$JS.EVENT.ADVISORY.CONSUMER.UNPINNED`` (``admin`` or ``timeout``)."""
        s, n = c.stream.cfg.name, c.name
        body = {
            "account": self.svc.account.name,
            "stream": s,
            "consumer": n,
            "group": group,
            "reason": reason,
        }
        self._publish_advisory(
            f"$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{s}.{n}",
            "consumer_group_unpinned",
            body,
            domain_after="consumer",
        )

    def action(self, c: Consumer, action: str) -> None:
        word = {"create": "CREATED", "delete": "DELETED"}[action]
        subject = f"$JS.EVENT.ADVISORY.CONSUMER.{word}.{c.stream.cfg.name}.{c.name}"
        body = {"stream": c.stream.cfg.name, "consumer": c.name, "action": action}
        self._publish_advisory(subject, "consumer_action", body)

    def created(self, c: Consumer) -> None:
        """Announce a new consumer (``CONSUMER.CREATED`` advisory)."""
        self.action(c, "create")

    def advise(self, c: Consumer, out: ConsumerOutcome) -> None:
        s, n = c.stream.cfg.name, c.name
        base = {"stream": s, "consumer": n}
        for ev in out.events:
            if isinstance(ev, MaxDeliveries):
                self._publish_advisory(
                    f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{s}.{n}",
                    "max_deliver",
                    {**base, "stream_seq": ev.sseq, "deliveries": ev.dc},
                )
            elif isinstance(ev, Nakked):
                self._publish_advisory(
                    f"$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{s}.{n}",
                    "nak",
                    {**base, "consumer_seq": ev.dseq, "stream_seq": ev.sseq, "deliveries": ev.dc},
                )
            elif isinstance(ev, Terminated):
                body = {
                    **base,
                    "consumer_seq": ev.dseq,
                    "stream_seq": ev.sseq,
                    "deliveries": ev.dc,
                }
                if ev.reason:
                    body["reason"] = ev.reason
                self._publish_advisory(
                    f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{s}.{n}", "terminated", body
                )


EARLY_PULLS_MAX = 256
"""Pulls held per consumer until its activation (``next_request``)."""
EARLY_PULL_S_MAX = 5.0
"""... for at most this long."""


def _interest_only(*_args: object) -> None:
    """A leader subject's handler: the service's ``$TRIJET.NEXT.>`` answers it."""


def _pause_ns(until: str) -> int | None:
    """``pause_until`` as Unix ns (None when unset: the epoch is a time)."""
    return rfc3339_to_ns(until) if until else None


def _ack_item(body: bytes, sseq: int, dseq: int) -> tuple[AckItem | None, bytes | None]:
    """The ack a body means, and for ``+NXT`` the pull request that follows."""
    text = body.strip()
    if text in (b"", b"+ACK", b"+OK"):
        return AckItem(AckKind.ACK, sseq, dseq), None
    if text.startswith(b"+NXT"):
        return AckItem(AckKind.ACK, sseq, dseq), body.strip()[4:]
    if text.startswith(b"-NAK"):
        arg = text[4:].strip()
        delay = -1
        if arg:
            if arg[:1] == b"{":
                try:
                    doc = bounded_loads(arg)
                    d = doc.get("delay", 0) if isinstance(doc, dict) else None
                    # Go: a delay outside int64 fails Unmarshal: the default backoff
                    delay = d if type(d) is int and 0 <= d < 2**63 else -1
                except ValueError:
                    delay = -1
            else:
                parsed = parse_go_duration(arg.decode(errors="replace"))
                delay = parsed if parsed is not None else -1
        return AckItem(AckKind.NAK, sseq, dseq, delay), None
    if text == b"+WPI":
        return AckItem(AckKind.PROGRESS, sseq, dseq), None
    if text.startswith(b"+TERM"):
        reason = text[5:].strip().decode(errors="replace")
        return AckItem(AckKind.TERM, sseq, dseq, -1, reason), None
    return None, None
