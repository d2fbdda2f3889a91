"""Push consumer delivery: the deliver subject, its interest, flow control, heartbeats, pacing.

Theory of operation
-------------------
A ``PushDispatcher`` drives one push consumer (a consumer with a
``deliver_subject``).  It behaves as nats-server's consumer delivery loop:

* **Interest.**  Delivery runs only while the deliver subject is *bound*: a
  subscription on exactly that subject exists (a plain one, or, with
  ``deliver_group``, one in that queue group); a wildcard subscription that
  covers it does not count.  The dispatcher learns about changes from a
  sublist watch (``Sublist.watch``: called on insert/remove of a
  subscription on that literal subject, nothing per message) and keeps
  ``active``, which ConsumerInfo reports as ``push_bound``.  Once bound,
  deliveries go to every subscription matching the deliver subject (one
  member per queue group), like any message.  Unbound for
  ``inactive_threshold`` (ephemerals: 5 s) → the consumer is deleted.
* **Flow control** (``flow_control``): every delivered byte (deliver subject
  + ack subject + headers + payload) counts into ``pbytes``.  When
  ``pbytes`` passes half the window a ``100 FlowControl Request`` goes out
  with reply ``$JS.FC.<stream>.<consumer>.<4 random base-62 chars>``;
  delivery stops while ``pbytes`` exceeds the window.  The client's (empty)
  reply to the latest request doubles the window (from 2 MiB up to 32 MiB)
  and takes back the bytes counted up to that request.
* **Idle heartbeats** (``idle_heartbeat``): while bound, a
  ``100 Idle Heartbeat`` status with ``Nats-Last-Consumer`` /
  ``Nats-Last-Stream`` (the last consumer sequence and the stream sequence
  the consumer has reached) whenever nothing was delivered for one
  interval; while a flow-control request is unanswered it carries
  ``Nats-Consumer-Stalled: <request reply subject>`` so a client that lost
  the request can answer it.
* **Pacing.**  ``replay_policy: original`` waits, before each message, the
  difference between its store time and the previous delivered message's
  (gaps up to 1 ms are not waited for) until the consumer has caught up
  with the stream's last sequence as it was when delivery started;
  ``rate_limit_bps`` is a token bucket (``bps/8`` bytes a second, burst =
  the stream's ``max_msg_size`` or the server's ``max_payload``).  Paced
  consumers deliver one message at a time; the others up to
  ``PUSH_BATCH_MAX`` per proposal, cut to ``PUSH_BATCH_BYTES_MAX`` and the
  flow-control window, and
  written as runs (one joined buffer per subscriber) split only where a
  flow-control request goes between two messages.

Messages, redeliveries, ``max_ack_pending`` and acks are the consumer's
(``cluster.consumers``); the dispatcher only decides *when* and *where*.
It sleeps on the consumer's ``changed`` event (new messages, acks that free
room, redeliveries, interest, flow-control replies) or until the next
heartbeat / pause end / inactivity deadline: no polling.
"""

from __future__ import annotations

import logging
import math
import random
import string
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from cluster.consumer_fsm import rfc3339_to_ns
from cluster.consumer_model import ConsumerConfig, ReplayPolicy
from cluster.consumers import Consumer
from node.session import Subscription
from store.api import StoredMsg

if TYPE_CHECKING:
    from node.jetstream.delivery import ConsumerManager

log = logging.getLogger(__name__)

FC_WINDOW_BYTES_MAX = 32 * 1024 * 1024
"""Largest flow-control window (nats-server ``JsFlowControlMaxPending``)."""
FC_WINDOW_BYTES_START = FC_WINDOW_BYTES_MAX // 16
"""The window a consumer starts with; each answered request doubles it."""
PUSH_BATCH_MAX = 1024
"""Most messages proposed as one delivery by an unpaced push consumer (one
Raft round each on a replicated stream: bigger batches, fewer rounds)."""
PUSH_BATCH_BYTES_MAX = 1024 * 1024
"""An unpaced batch stops once its messages passed this many bytes (the
flow-control window, when smaller, cuts it first); the first message always
goes, whatever its size."""
REPLAY_GAP_NS_MIN = 1_000_000
"""``replay_policy: original`` does not wait for gaps up to this."""
FC_TOKEN_ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
_ACK_TOKENS_EST = 8
"""Separators and a short delivery count/pending in an ack subject (size estimates)."""


class TokenBucket:
    """``golang.org/x/time/rate`` reservations: ``rate`` bytes/s, ``burst`` bytes.

    A reservation always succeeds and returns how long to wait before using
    it; tokens may go negative (the debt is the wait).
    """

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = max(burst, 1)
        self.tokens = float(self.burst)
        self.last = now

    def reserve(self, n: int, now: float) -> float:
        """Take ``n`` tokens at ``now``; seconds to wait before sending."""
        if now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
            self.last = now
        self.tokens -= n
        return -self.tokens / self.rate if self.tokens < 0 else 0.0


class PushDispatcher:
    """Delivery task of one push consumer.

    Args:
        mgr: the consumer manager (internal client, router, deletion).
        consumer: the consumer.
        rng: randomness for flow-control reply subjects.
    """

    def __init__(self, mgr: ConsumerManager, consumer: Consumer, rng: random.Random) -> None:
        self.mgr = mgr
        self.consumer = consumer
        self.rng = rng
        self.sublist = mgr.svc.router.sublist
        #: interest from other servers counts too (subscribers across a route)
        self.route_sublist = mgr.svc.router.route_sublist
        self.active = False
        self.unbound_at = trio.current_time()
        self._watched: tuple[bytes, bytes | None] | None = None
        # flow control
        self.fc_window = FC_WINDOW_BYTES_START if consumer.cfg.flow_control else 0
        self.pbytes = 0
        self.fcid: str | None = None
        self.fcsz = 0
        self._fc_sub: Subscription | None = None
        # heartbeats
        self.next_hb = trio.current_time() + self.hb_s
        # pacing
        self.replay = consumer.cfg.replay_policy is ReplayPolicy.ORIGINAL
        self._replay_until = consumer.stream.store.state().last_seq
        self._lts = 0
        self.bucket: TokenBucket | None = None
        self._set_rate()
        if consumer.cfg.flow_control:
            subject = f"$JS.FC.{consumer.stream.cfg.name}.{consumer.name}.*".encode()
            self._fc_sub = mgr.svc.client.subscribe(subject, self._on_fc)
        self._watch()

    # -- configuration --------------------------------------------------------

    @property
    def cfg(self) -> ConsumerConfig:
        return self.consumer.cfg

    @property
    def hb_s(self) -> float:
        return self.consumer.cfg.idle_heartbeat_ns / 1e9

    def _set_rate(self) -> None:
        bps = self.cfg.rate_limit_bps
        if not bps:
            self.bucket = None
            return
        max_msg = self.consumer.stream.cfg.max_msg_size
        burst = max_msg if max_msg > 0 else self.mgr.svc.server.cfg.max_payload
        self.bucket = TokenBucket((bps // 8) or 1, burst, trio.current_time())

    def reconfigure(self, old: ConsumerConfig) -> None:
        """Take a changed config (deliver subject/group, rate limit)."""
        new = self.cfg
        if (old.deliver_subject, old.deliver_group) != (new.deliver_subject, new.deliver_group):
            self._unwatch()
            self._watch()
        if old.rate_limit_bps != new.rate_limit_bps:
            self._set_rate()
        self.consumer.changed.set()

    def close(self) -> None:
        """Stop watching interest and flow-control replies."""
        self._unwatch()
        if self._fc_sub is not None:
            self.mgr.svc.client.unsubscribe(self._fc_sub)
            self._fc_sub = None

    # -- interest -------------------------------------------------------------

    def _watch(self) -> None:
        subject = self.cfg.deliver_subject.encode()
        queue = self.cfg.deliver_group.encode() or None
        self._watched = (subject, queue)
        self.sublist.watch(subject, self._on_interest)
        self.route_sublist.watch(subject, self._on_interest)
        self._on_interest()

    def _unwatch(self) -> None:
        if self._watched is not None:
            self.sublist.unwatch(self._watched[0], self._on_interest)
            self.route_sublist.unwatch(self._watched[0], self._on_interest)
            self._watched = None

    def _on_interest(self) -> None:
        """A subscription on the deliver subject came or went (synchronous)."""
        if self._watched is None:
            return
        bound = self.sublist.has_exact(*self._watched) or self.route_sublist.has_exact(
            *self._watched
        )
        if bound == self.active:
            return
        self.active = bound
        if not bound:
            self.unbound_at = trio.current_time()
        log.debug(
            "event=push_interest stream=%s consumer=%s bound=%s",
            self.consumer.stream.cfg.name,
            self.consumer.name,
            bound,
        )
        self.consumer.changed.set()

    # -- flow control ---------------------------------------------------------

    def _on_fc(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        """A flow-control reply: only the latest request counts."""
        if self.fcid is None or subject.decode(errors="replace") != self.fcid:
            return
        if self.fc_window < FC_WINDOW_BYTES_MAX:
            self.fc_window = min(self.fc_window * 2, FC_WINDOW_BYTES_MAX)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = None, 0
        self.consumer.changed.set()

    def _stalled(self) -> bool:
        return self.fc_window > 0 and self.pbytes > self.fc_window

    def _sent(self, size: int) -> Callable[[], None] | None:
        """Account one delivered message (``ConsumerManager.send``'s
        ``after_each``); when a flow-control request is due after it, the
        request is opened here and its publication returned, for ``send``
        to run once the messages before it are out."""
        if not self.fc_window:
            return None
        self.pbytes += size
        if self.fcid is None:
            if self.pbytes > self.fc_window // 2:
                c = self.consumer
                token = "".join(self.rng.choice(FC_TOKEN_ALPHABET) for _ in range(4))
                self.fcid = f"$JS.FC.{c.stream.cfg.name}.{c.name}.{token}"
                self.fcsz = self.pbytes
                return self._publish_fc
        elif self.pbytes - self.fcsz >= self.fc_window:
            self.fcsz += size
        return None

    def _publish_fc(self) -> None:
        """Publish the open flow-control request."""
        if self.fcid is None:
            return
        self.mgr.svc.client.publish(
            self.cfg.deliver_subject.encode(), b"", reply=self.fcid.encode(), headers=FC_REQUEST
        )

    # -- heartbeats -------------------------------------------------------------

    def _heartbeat(self) -> None:
        c = self.consumer
        if c.ahead.usable():  # what was sent, committed or not (nats-server's o.dseq)
            dseq, sseq = c.ahead.last_sent()
        else:
            dseq, sseq = c.fsm.dseq, c.fsm.delivered_sseq
        text = (
            "NATS/1.0 100 Idle Heartbeat\r\n"
            f"Nats-Last-Consumer: {dseq}\r\n"
            f"Nats-Last-Stream: {sseq}\r\n"
        )
        if self.fcid is not None:
            text += f"Nats-Consumer-Stalled: {self.fcid}\r\n"
        hdr = (text + "\r\n").encode()
        self.mgr.svc.client.publish(self.cfg.deliver_subject.encode(), b"", headers=hdr)

    # -- the loop -----------------------------------------------------------------

    def _paused_s(self) -> float | None:
        until = self.cfg.pause_until
        if not until:
            return None
        left = rfc3339_to_ns(until) - time.time_ns()
        return left / 1e9 if left > 0 else None

    async def run(self) -> None:
        """Deliver while bound; heartbeats, pauses, inactivity; until cancelled."""
        c = self.consumer
        while not c.closed:
            c.changed = trio.Event()
            now = trio.current_time()
            deadline = math.inf
            if not self.active and self.cfg.inactive_threshold_ns > 0:
                idle_end = self.unbound_at + self.cfg.inactive_threshold_ns / 1e9
                if now >= idle_end:
                    await self.mgr.delete_inactive(c)
                    return
                deadline = idle_end
            if self.hb_s > 0:
                if now >= self.next_hb:
                    if self.active:
                        self._heartbeat()
                    self.next_hb = now + self.hb_s
                deadline = min(deadline, self.next_hb)
            paused_s = self._paused_s()
            if paused_s is not None:
                deadline = min(deadline, now + paused_s)
            elif self.active and not self._stalled() and c.has_messages():
                if await self._deliver():
                    continue
            if self.replay and c.fsm.next_sseq > self._replay_until:
                self.replay = False
            with trio.move_on_at(deadline):
                await c.changed.wait()

    def _est_size(self, m: StoredMsg) -> int:
        """Delivered size of ``m`` (flow-control window): deliver subject,
        ack subject (estimated), headers, payload."""
        c = self.consumer
        ack = len(c.stream.cfg.name) + len(c.name) + 2 * len(str(m.seq)) + 19 + 8
        ack += _ACK_TOKENS_EST
        if self.cfg.headers_only:
            hdr = (len(m.headers) or 12) + len("Nats-Msg-Size: \r\n") + len(str(len(m.payload)))
            return len(self.cfg.deliver_subject) + ack + hdr
        return len(self.cfg.deliver_subject) + ack + len(m.headers) + len(m.payload)

    async def _pace(self) -> bool:
        """Wait before the next message as replay/rate limit ask; False when
        nothing is deliverable any more."""
        m = self.consumer.peek()
        if m is None:
            return False
        if self.replay and self._lts:
            gap_ns = m.ts_ns - self._lts
            if gap_ns > REPLAY_GAP_NS_MIN:
                await trio.sleep(gap_ns / 1e9)
        if self.bucket is not None:
            size = self._est_size(m) - len(self.cfg.deliver_subject) + len(m.subject)
            wait_s = self.bucket.reserve(size, trio.current_time())
            if wait_s > 0:
                await trio.sleep(wait_s)
        return True

    async def _deliver(self) -> bool:
        """Deliver what the window and pacing allow; True if anything went out."""
        c = self.consumer
        paced = self.replay or self.bucket is not None
        if paced:
            if not await self._pace():
                return False
            if c.closed or not self.active:
                return True  # re-evaluate
        budget = PUSH_BATCH_BYTES_MAX
        if self.fc_window:
            budget = min(budget, self.fc_window - self.pbytes)
        to = self.cfg.deliver_subject.encode()
        got, _ = await c.deliver(
            1 if paced else PUSH_BATCH_MAX,
            budget_bytes=budget,
            size_of=self._est_size,
            send=lambda got: self.mgr.send(c, to, got, after_each=self._sent),
        )
        if not got:
            return False
        self._lts = got[-1][0].ts_ns
        if self.hb_s > 0:
            self.next_hb = trio.current_time() + self.hb_s
        return True
