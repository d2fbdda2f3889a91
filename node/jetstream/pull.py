"""Pull consumers' waiting lists and their delivery task.

Theory of operation: a ``PullDispatcher`` holds one pull consumer's waiting
``MSG.NEXT`` requests (``PullRequest``: batch, max bytes, expiry, heartbeat)
in arrival order, and its task serves them whenever the consumer may
deliver (``Consumer.changed``) -- requests waiting together take turns, one
message each, as nats-server's ``waitQueue.pop`` hands them out
(``node.jetstream.pullturns``; with ``pinned_client`` and ``overflow``
among the requests ``pick`` lets take each message) --, sends the 404/408/409 status
messages and idle heartbeats byte for byte as nats-server, and retires
requests that expired, were fulfilled or were superseded.  The messages
themselves go out through ``ConsumerManager.send``.

Priority groups (``node.jetstream.priority``): the request served is the one
``pick`` chooses; a ``pinned_client`` consumer holds its pin here, in the
leader's memory only (as nats-server: a new leader starts without one), with
its ``priority_timeout`` timer, ``Nats-Pin-Id`` on every message and the
PINNED/UNPINNED advisories.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from cluster.consumer_fsm import (
    rfc3339_to_ns,
)
from cluster.consumer_model import ConsumerConfig, PriorityPolicy
from cluster.consumers import Consumer
from node.jetstream.priority import insert_prioritized, with_pin_header
from node.jetstream.pullreq import decode_pull, priority_refusal
from node.jetstream.pullreq import parse_pull as parse_pull  # re-exported
from node.jetstream.pullturns import PickTurns, Turns, msg_size
from node.jsapi.consumerconfig import go_duration

if TYPE_CHECKING:
    from cluster.consumer_fsm import Delivery
    from node.jetstream.delivery import ConsumerManager
    from store.api import StoredMsg


def status(code: int, text: str, *headers: tuple[str, int]) -> bytes:
    """A status-only header block (``NATS/1.0 404 No Messages\\r\\n\\r\\n``)."""
    lines = [f"NATS/1.0 {code} {text}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass(slots=True)
class PullRequest:
    """A waiting ``MSG.NEXT`` request."""

    reply: bytes
    n: int
    max_bytes: int
    no_wait: bool
    expires_at: float | None
    hb_s: float
    next_hb: float | None
    delivered: int = 0
    #: a JSON request (it may name a priority group)
    formal: bool = False
    group: str = ""
    min_pending: int = 0
    min_ack_pending: int = 0
    pin_id: str = ""
    priority: int = 0


#: the policies whose waiting requests take turns message by message
_TURN_POLICIES = (PriorityPolicy.NONE, PriorityPolicy.PRIORITIZED)


def _rank(wr: PullRequest) -> int:
    """A request's place in a ``prioritized`` list (as ``insert_prioritized``)."""
    return wr.priority if wr.formal else 1 << 31


def pending_status(code: int, text: str, wr: PullRequest) -> bytes:
    """A status that ends (or refuses) a pull request, with what it still wanted."""
    return status(code, text, ("Nats-Pending-Messages", wr.n), ("Nats-Pending-Bytes", wr.max_bytes))


def _wrong_pin(wr: PullRequest) -> bytes:
    return pending_status(423, "Nats-Wrong-Pin-Id", wr)


class PullDispatcher:
    """The waiting list of one pull consumer and its delivery task."""

    def __init__(self, mgr: ConsumerManager, consumer: Consumer) -> None:
        self.mgr = mgr
        self.consumer = consumer
        self.waiting: deque[PullRequest] = deque()
        self.last_request = trio.current_time()
        self.last_check = self.last_request  # last ``_housekeeping``
        #: the pin of a ``pinned_client`` consumer ("" none), when it was
        #: given (ns since the epoch), its group and when it lapses (trio time)
        self.pin_id = ""
        self.pinned_ns = 0
        self.pin_group = ""
        self.pin_deadline: float | None = None
        #: the ``pause_until`` seen last while paused ("" none), and whether
        #: serving waits for the next wake-up after an early resume
        self.paused_until = ""
        self.held = False

    @property
    def cfg(self) -> ConsumerConfig:
        return self.consumer.cfg

    def _send(self, reply: bytes, hdr: bytes) -> None:
        self.mgr.svc.client.publish(reply, b"", headers=hdr)

    def add(self, reply: bytes, body: bytes) -> None:
        """Take a ``MSG.NEXT`` (synchronous; answers refusals at once).

        nats-server's order: 400 for a body it cannot read, the 409 request
        limits (``max_batch``, ``max_expires``, ``max_bytes``), 400 for
        priority-group fields; a full waiting list is cleaned (expired
        requests, lost interest) at most once a second; a ``no_wait``
        request gets ``404 No Messages`` when nothing is pending and it has
        no expiry, and ``408 Requests Pending`` when the waiting requests
        already ask for more than is pending; a request that finds the list
        full gets ``409 Exceeded MaxWaiting`` (nothing when it asked for
        heartbeats: the client waits for missing heartbeats instead).
        """
        now = trio.current_time()
        self.last_request = now
        spec = decode_pull(body)
        if isinstance(spec, str):
            self._send(reply, status(400, f"Bad Request - {spec}"))
            return
        cfg = self.cfg
        if cfg.max_batch > 0 and spec.batch > cfg.max_batch:
            self._send(reply, status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"))
            return
        expires_ns = spec.expires_ns
        if expires_ns and cfg.max_expires_ns > 0 and expires_ns > cfg.max_expires_ns:
            text = f"Exceeded MaxRequestExpires of {go_duration(cfg.max_expires_ns)}"
            self._send(reply, status(409, text))
            return
        if spec.max_bytes > 0 and cfg.max_bytes > 0 and spec.max_bytes > cfg.max_bytes:
            self._send(reply, status(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"))
            return
        refusal = priority_refusal(spec, cfg)
        if refusal is not None:
            self._send(reply, status(400, f"Bad Request - {refusal}"))
            return
        if spec.formal and self.pin_id and cfg.priority_policy is not PriorityPolicy.NONE:
            if spec.pin_id == self.pin_id:
                self._arm_pin(now)
            elif spec.pin_id:
                self._send(reply, status(423, "Nats-Pin-Id mismatch"))
                return
        max_waiting = max(cfg.max_waiting, 1)
        if len(self.waiting) >= max_waiting and now - self.last_check > 1.0:
            self._housekeeping(now)
        if spec.no_wait:
            c = self.consumer
            msgs_pending = c.num_pending() - c.ahead.unapplied + len(c.fsm.redeliveries())
            if msgs_pending == 0 and not expires_ns:
                self._send(reply, status(404, "No Messages"))
                return
            if msgs_pending > 0:
                self._housekeeping(now)
                if msgs_pending < sum(wr.n for wr in self.waiting):
                    self._send(reply, status(408, "Requests Pending"))
                    return
        if len(self.waiting) >= max_waiting:
            if not spec.hb_ns:
                self._send(reply, status(409, "Exceeded MaxWaiting"))
            return
        router = self.mgr.svc.router
        if not router.sublist.has_interest(reply) and not (
            router.route_sublist.count and router.route_sublist.has_interest(reply)
        ):
            return  # nobody listens (here or across routes): nats-server drops it at once
        hb_s = spec.hb_ns / 1e9
        wr = PullRequest(
            reply=reply,
            n=max(spec.batch, 1),
            max_bytes=max(spec.max_bytes, 0),
            no_wait=spec.no_wait,
            expires_at=now + expires_ns / 1e9 if expires_ns else None,
            hb_s=hb_s,
            next_hb=now + hb_s if spec.hb_ns > 0 else None,
            formal=spec.formal,
            group=spec.group,
            min_pending=spec.min_pending,
            min_ack_pending=spec.min_ack_pending,
            pin_id=spec.pin_id,
            priority=spec.priority,
        )
        if cfg.priority_policy is PriorityPolicy.PRIORITIZED:
            insert_prioritized(self.waiting, wr)
        else:
            self.waiting.append(wr)
        self.consumer.changed.set()

    # -- the pin (pinned_client) --------------------------------------------------

    def _arm_pin(self, now: float) -> None:
        self.pin_deadline = now + self.cfg.priority_timeout_ns / 1e9

    def _pin(self, wr: PullRequest) -> None:
        """Give ``wr`` (the first of its group without an id) a new pin."""
        self.pin_id = self.mgr.svc.advisories.nuid.next()
        self.pinned_ns = time.time_ns()
        self.pin_group = wr.group
        wr.pin_id = self.pin_id
        self._arm_pin(trio.current_time())
        self.mgr.pin_advisory(self.consumer, wr.group, self.pin_id)

    def _drop_pin(self) -> None:
        self.pin_id, self.pinned_ns, self.pin_deadline = "", 0, None

    def unpin(self, group: str, reason: str) -> None:
        """Release the pin (``admin``: the UNPIN API, ``timeout``: no pull in
        ``priority_timeout``); the UNPINNED advisory goes out either way."""
        self._drop_pin()
        self.mgr.unpin_advisory(self.consumer, group, reason)
        self.consumer.changed.set()

    def num_waiting(self) -> int:
        """Requests still waiting (expired and abandoned ones dropped first,
        as nats-server does before reporting ``num_waiting``)."""
        self._housekeeping(trio.current_time())
        return len(self.waiting)

    def close(self, reason: bytes | None) -> None:
        """Answer every waiting request with ``reason`` (None: drop them) and forget them."""
        while self.waiting:
            wr = self.waiting.popleft()
            if reason is not None:
                self._send(wr.reply, reason)

    async def run(self) -> None:
        """Serve requests until cancelled."""
        c = self.consumer
        while not c.closed:
            c.changed = trio.Event()
            now = trio.current_time()
            deadline = self._housekeeping(now)
            if self.pin_deadline is not None:
                if now >= self.pin_deadline:
                    self.unpin(self.pin_group, "timeout")
                else:
                    deadline = (
                        self.pin_deadline if deadline is None else min(deadline, self.pin_deadline)
                    )
            paused_s = self._paused_s()
            if paused_s is not None:
                self.paused_until = self.cfg.pause_until
                end = now + paused_s
                deadline = end if deadline is None else min(deadline, end)
            elif self._resumed_early():
                # resumed (PAUSE, update) before its time: nats-server stops
                # its pause timer and wakes nobody, so the requests that
                # waited are served at the next wake-up -- a message, an ack,
                # a request, an expiry or a heartbeat --, not now
                self.held = True
            elif not self.held and await self._serve():
                continue
            if not self.held:
                self._end_of_stream()
            if not self.waiting and self.cfg.inactive_threshold_ns > 0:
                idle_end = self.last_request + self.cfg.inactive_threshold_ns / 1e9
                if now >= idle_end:
                    await self.mgr.delete_inactive(c)
                    return
                deadline = idle_end if deadline is None else min(deadline, idle_end)
            held = self.held
            with trio.move_on_at(deadline if deadline is not None else float("inf")):
                await c.changed.wait()
            if held:  # the wake-up after an early resume
                self.held = False

    def _housekeeping(self, now: float) -> float | None:
        """Expire requests, drop those without interest, send heartbeats;
        returns the next deadline."""
        router = self.mgr.svc.router
        sublist, remote = router.sublist, router.route_sublist
        self.last_check = now
        deadline: float | None = None
        keep: deque[PullRequest] = deque()
        for wr in self.waiting:
            if wr.expires_at is not None and now >= wr.expires_at:
                hdr = pending_status(408, "Request Timeout", wr)
                self._send(wr.reply, hdr)
                continue
            if not sublist.has_interest(wr.reply) and not (
                remote.count and remote.has_interest(wr.reply)
            ):
                continue  # the requester is gone (here and across routes)
            if wr.next_hb is not None:
                if now >= wr.next_hb:
                    self._heartbeat(wr.reply)
                    wr.next_hb = now + wr.hb_s
                deadline = wr.next_hb if deadline is None else min(deadline, wr.next_hb)
            if wr.expires_at is not None:
                deadline = wr.expires_at if deadline is None else min(deadline, wr.expires_at)
            keep.append(wr)
        self.waiting = keep
        if self.waiting:
            self.last_request = now
        return deadline

    def reconfigured(self) -> None:
        """The consumer took a new config: a pause lifted before its time
        holds serving until the next wake-up (the dispatcher may be asleep
        in the pause: it is woken to take the hold, not to serve)."""
        if self.paused_until and self._resumed_early():
            self.held = True
            self.consumer.changed.set()

    def _resumed_early(self) -> bool:
        """The pause seen last was lifted before its time (forgets it)."""
        if self._paused_s() is not None:  # still paused (maybe until another time)
            return False
        seen, self.paused_until = self.paused_until, ""
        if not seen or self.cfg.pause_until == seen:
            return False  # not paused before, or that pause ran out
        return rfc3339_to_ns(seen) > time.time_ns()

    def _paused_s(self) -> float | None:
        """Seconds the consumer stays paused (``pause_until``), None if not paused."""
        until = self.cfg.pause_until
        if not until:
            return None
        left = rfc3339_to_ns(until) - time.time_ns()
        return left / 1e9 if left > 0 else None

    def _heartbeat(self, reply: bytes) -> None:
        c = self.consumer
        if c.ahead.usable():  # what was sent, committed or not (nats-server's o.dseq)
            dseq, sseq = c.ahead.last_sent()
        else:
            dseq, sseq = c.fsm.dseq, c.fsm.delivered_sseq
        hdr = status(
            100, "Idle Heartbeat", ("Nats-Last-Consumer", dseq), ("Nats-Last-Stream", sseq)
        )
        self._send(reply, hdr)

    async def _serve(self) -> bool:
        """Deliver to the waiting requests; True if anything happened."""
        c = self.consumer
        if not self.waiting or not c.has_messages():
            return False
        policy = self.cfg.priority_policy
        if policy not in _TURN_POLICIES:
            return await self._serve_picked(policy)
        if len(self.waiting) > 1:
            members = self._turn_members(policy)
            if len(members) > 1:
                return await self._serve_turns(members)
        wr = self.waiting[0]
        if not wr.max_bytes and c.raw_ready() and self.mgr.raw_target(c, wr.reply):
            # the round read raw and its frames built from the records
            mgr, reply = self.mgr, wr.reply
            k = await c.deliver_raw(wr.n, lambda rr, ds: mgr.send_raw(c, reply, rr, ds))
            if k is not None:
                if not k:
                    return False
                wr.n -= k
                wr.delivered += k
                if wr.n <= 0:
                    self._forget(wr)
                return True
        send = self._sender(wr.reply)
        got, too_big = await c.deliver(wr.n, wr.max_bytes, send=send)
        if too_big:
            self._forget(wr)
            if wr.delivered == 0:
                hdr = pending_status(409, "Message Size Exceeds MaxBytes", wr)
                self._send(wr.reply, hdr)
            return True
        if not got:
            return False
        for m, _ in got:
            wr.n -= 1
            wr.delivered += 1
            if wr.max_bytes:
                wr.max_bytes -= len(m.subject) + len(m.headers) + len(m.payload)
        if wr.n <= 0:
            self._forget(wr)
        return True

    async def _serve_picked(self, policy: PriorityPolicy) -> bool:
        """``pinned_client``/``overflow``: each message to the request ``pick``
        chooses for it, in turns (``pullturns.PickTurns``); one proposal for
        the round.  True if anything happened."""
        c = self.consumer
        fsm = c.fsm
        start = c.ahead.start() if c.ahead.usable() else 0

        def new_pin(wr: PullRequest) -> str:
            self._pin(wr)
            return self.pin_id

        turns = PickTurns(
            list(self.waiting),
            policy,
            self.pin_id,
            max(0, c.num_pending() - c.ahead.unapplied),
            fsm.num_ack_pending,
            counts_acks=fsm.policy.ack != "none",
            next_sseq=max(fsm.next_sseq, start),
            new_pin=new_pin,
            drop_pin=self._drop_pin,
        )

        members = list(self.waiting)

        def send(got: list[tuple[StoredMsg, Delivery]]) -> None:
            self._send_turns(turns.owner, got, members)

        got, _ = await c.deliver(turns.wants(), send=send, take=turns.take)
        for refused in turns.refused:
            self._forget(refused)
            self._send(refused.reply, _wrong_pin(refused))
        for wr, answer in turns.dropped:
            self._forget(wr)
            if answer:
                self._send(wr.reply, pending_status(409, "Message Size Exceeds MaxBytes", wr))
        _count_taken(turns, got)
        # the waiting list as the round left it (cycled, refused and dropped
        # ones out), then requests that arrived meanwhile; a request retired
        # meanwhile (expired, gone) stays retired
        before = {id(wr) for wr in turns.order()} | {id(wr) for wr in turns.refused}
        before |= {id(wr) for wr, _ in turns.dropped} | {id(wr) for wr in turns.owner.values()}
        alive = {id(wr) for wr in self.waiting}
        order = [wr for wr in turns.order() if wr.n > 0 and id(wr) in alive]
        rest = [wr for wr in self.waiting if id(wr) not in before]
        self.waiting = deque(order + rest)
        return bool(got or turns.refused or turns.dropped)

    def _turn_members(self, policy: PriorityPolicy) -> list[PullRequest]:
        """The requests that take turns now: every waiting one, or with
        ``prioritized`` those of the head's priority."""
        if policy is PriorityPolicy.NONE:
            return list(self.waiting)
        rank = _rank(self.waiting[0])
        members = []
        for wr in self.waiting:
            if _rank(wr) != rank:
                break
            members.append(wr)
        return members

    async def _serve_turns(self, members: list[PullRequest]) -> bool:
        """Serve ``members`` in turn, one message each (``pullturns``): one
        pick and one proposal for all of them; True if anything happened."""
        c = self.consumer
        turns = Turns(members)
        if not turns.sized() and _one_target(self.mgr.svc.router, members):
            # one inbox subscription and no byte bounds: who took which
            # message is seen nowhere, so the round is counted, not taken
            # message by message (``Turns.assign``), and sent as one run
            reply = members[0].reply
            mgr = self.mgr
            k: int | None = None
            if c.raw_ready() and mgr.raw_target(c, reply):
                # the round read raw and its frames built from the records
                k = await c.deliver_raw(
                    turns.wants(), lambda rr, ds: mgr.send_raw(c, reply, rr, ds)
                )
            if k is None:
                got, _ = await c.deliver(turns.wants(), send=lambda got: mgr.send(c, reply, got))
                k = len(got)
            if not k:
                return False
            for wr, n in turns.assign(k):
                wr.n -= n
                wr.delivered += n
        else:

            def send(got: list[tuple[StoredMsg, Delivery]]) -> None:
                self._send_turns(turns.owner, got, members)

            got, _ = await c.deliver(turns.wants(), send=send, take=turns.take)
            for wr, answer in turns.dropped:
                self._forget(wr)
                if answer:
                    hdr = pending_status(409, "Message Size Exceeds MaxBytes", wr)
                    self._send(wr.reply, hdr)
            if not got:
                return bool(turns.dropped)
            _count_taken(turns, got)
        # the waiting list as the turns left it: the members still wanting
        # messages in the order of their next turn, then everyone else
        # (a member retired meanwhile -- expired, gone -- stays retired)
        member_ids = {id(wr) for wr in members}
        alive = {id(wr) for wr in self.waiting}
        order = [wr for wr in turns.order() if wr.n > 0 and id(wr) in alive]
        rest = [wr for wr in self.waiting if id(wr) not in member_ids]
        self.waiting = deque(order + rest)
        if self.cfg.priority_policy is PriorityPolicy.PRIORITIZED:
            self.waiting = deque(sorted(self.waiting, key=_rank))  # stable: turns kept
        return True

    def _send_turns(
        self,
        owner: dict[int, PullRequest],
        got: list[tuple[StoredMsg, Delivery]],
        members: list[PullRequest],
    ) -> None:
        """Send a round of turns: each message to its request, in delivery
        order on the wire.  When every member's inbox is the same plain
        subscription (one client's fetches on one wildcard inbox), a
        message's frame does not depend on which request took it: the whole
        round is one run.  Requests whose inboxes are on different
        connections get their messages as one run each (no connection sees
        the others' order); otherwise every change of request starts a run."""
        c, mgr = self.consumer, self.mgr
        router = mgr.svc.router
        if self.cfg.priority_policy is PriorityPolicy.PINNED_CLIENT:
            pin = self.pin_id  # on every message, "" when served without a pin
            got = [(m._replace(headers=with_pin_header(m.headers, pin)), d) for m, d in got]
        if members and _one_target(router, members):
            # each message's pending count (what is left after it in the
            # whole pick) is ``send``'s own count-down over the round
            mgr.send(c, members[0].reply, got)
            return
        runs: list[tuple[PullRequest, list[tuple[StoredMsg, Delivery]]]] = []
        by_request: dict[int, list[tuple[StoredMsg, Delivery]]] = {}
        clients: set[int] = set()
        apart = True
        for m, d in got:
            wr = owner[m.seq]
            if runs and runs[-1][0] is wr:
                runs[-1][1].append((m, d))
            else:
                runs.append((wr, [(m, d)]))
            if id(wr) not in by_request:
                by_request[id(wr)] = []
                sub = router.inbox_target(wr.reply)
                if sub is None or id(sub.client) in clients:
                    apart = False
                else:
                    clients.add(id(sub.client))
            by_request[id(wr)].append((m, d))
        if apart:  # one run per request, in the order of their first message
            firsts: dict[int, PullRequest] = {}
            for wr, _ in runs:
                firsts.setdefault(id(wr), wr)
            runs = [(wr, by_request[key]) for key, wr in firsts.items()]
        # each message's pending count: what is left after it in the whole pick
        left = c.pending_after_pick + sum(1 for _, d in got if d.dc == 1)
        pending_of: dict[int, int] = {}
        for m, d in got:
            if d.dc == 1:
                left -= 1
            pending_of[m.seq] = left
        for wr, run in runs:
            mgr.send(c, wr.reply, run, pendings=[pending_of[m.seq] for m, _ in run], flush=False)
        router.flush()

    def _sender(self, reply: bytes) -> Callable[[list[tuple[StoredMsg, Delivery]]], None]:
        """How a run of messages goes to ``reply``."""
        c, mgr = self.consumer, self.mgr
        return lambda got: mgr.send(c, reply, got)

    def _forget(self, wr: PullRequest) -> None:
        """Remove ``wr`` (by identity) from the waiting list, wherever it is."""
        for i, other in enumerate(self.waiting):
            if other is wr:
                del self.waiting[i]
                return

    def _end_of_stream(self) -> None:
        """No more messages: finish ``no_wait`` requests as nats-server does."""
        keep: deque[PullRequest] = deque()
        for wr in self.waiting:
            if wr.no_wait and (wr.expires_at is None or wr.delivered > 0):
                self._send(wr.reply, status(404, "No Messages"))
                continue
            keep.append(wr)
        self.waiting = keep


def _one_target(router: Any, members: list[PullRequest]) -> bool:
    """Every request's inbox is the same plain subscription (``inbox_target``)."""
    first = router.inbox_target(members[0].reply)
    if first is None:
        return False
    replies = {wr.reply for wr in members}
    return all(router.inbox_target(r) is first for r in replies)


def _count_taken(turns: Any, got: list[tuple[StoredMsg, Any]]) -> None:
    """Charge each delivered message to the request whose turn took it."""
    for m, _ in got:
        wr = turns.owner[m.seq]
        wr.n -= 1
        wr.delivered += 1
        if wr.max_bytes:
            wr.max_bytes -= msg_size(m)
