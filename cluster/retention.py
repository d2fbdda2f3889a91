"""Interest and workqueue retention of one stream: who still needs a message.

Theory of operation
-------------------
A ``limits`` stream keeps messages until its limits remove them.  A
``workqueue`` or ``interest`` stream also removes a message once no consumer
needs it any more, as nats-server does (``mset.ackMsg`` /
``noInterest``): a consumer *needs* stream sequence ``seq`` with subject
``subj`` when its filters match ``subj`` and

* ack ``none``/``all``: ``seq`` is above its ack floor;
* ack ``explicit``: ``seq`` is above its ack floor and either not delivered
  yet or still pending;
* in every case: ``seq`` ran out of deliveries (``max_deliver``) and was never
  acknowledged -- such messages stay.

``Retention`` (one per stream with such a policy) is told by the consumers'
shells what changed and proposes ``AckRemove`` through the stream's group:

* ``after_acks``: a consumer applied acks (``ConsumerOutcome.acked``, which
  also lists terminated and given-up messages) -- awaited by the consumer
  before the acks are answered, so an acknowledged "ack sync" means the
  message is gone, as with nats-server;
* ``after_deliveries``: an ack-``none`` consumer delivered messages (its
  floor moved);
* ``consumer_removed``: on an interest stream the messages from the removed
  consumer's ack floor up are checked again (nats-server's
  ``cleanupNoInterestMessages``); without consumers left, everything goes;
* ``sweep`` at start: acks made durable by a consumer whose stream removal
  did not happen before a crash are caught up.

Interest streams also tell the state machine which subjects anyone wants
(``Interest`` op): a publish that no consumer filter matches is not stored
(its sequence is skipped).  ``refresh_interest`` proposes the current
filters; it reads them when it proposes, so the last proposal applied always
carries the latest set.

The decision who needs what reads the consumers' state machines (their
shell's owners are the same trio thread), so it is taken by the proposer;
the removal itself is decided in apply (a sequence already gone is ignored).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from cluster.model import Retention as RetentionPolicy
from cluster.ops import ACK_REMOVE_SEQS_MAX, AckRemove, Interest
from store.errors import MsgNotFound, StoreEOF
from store.subjects import compile_filters

if TYPE_CHECKING:
    from cluster.consumers import Consumer
    from cluster.streams import Stream

log = logging.getLogger(__name__)

SWEEP_MSGS_MAX = 100_000
"""Most messages a sweep checks (nats-server bails out at the same count)."""

_matcher = functools.lru_cache(maxsize=256)(compile_filters)


def needs(c: Consumer, seq: int, subject: str | None) -> bool:
    """Whether consumer ``c`` still needs stream sequence ``seq`` (nats-server's
    ``needAck``); ``subject`` None means "not looked up" (the filter is then
    not consulted: pass it whenever the consumer is filtered)."""
    if subject is not None and c.cfg.filters:
        match = _matcher(c.cfg.filters)
        if match is not None and not match(subject):
            return False
    fsm = c.fsm
    need = False
    if seq > fsm.floor_sseq:
        if fsm.policy.ack == "explicit":
            need = seq >= fsm.next_sseq or seq in fsm.pending or bool(fsm.lss)
        else:
            need = True
    return need or seq in fsm.rdc


class Retention:
    """Retention decisions for one ``workqueue`` or ``interest`` stream.

    Args:
        stream: the stream.
        consumers: returns the stream's live consumers.
    """

    def __init__(self, stream: Stream, consumers: Callable[[], Iterable[Consumer]]) -> None:
        self.stream = stream
        self._consumers = consumers
        self.removed = 0

    @property
    def interest(self) -> bool:
        """The stream has ``interest`` retention (not workqueue)."""
        return self.stream.cfg.retention is RetentionPolicy.INTEREST

    def _live(self) -> list[Consumer]:
        return [c for c in self._consumers() if not c.closed]

    # -- interest filters ------------------------------------------------------------

    def filters(self) -> tuple[str, ...]:
        """The subjects the consumers want (``(">",)`` if one is unfiltered)."""
        out: list[str] = []
        for c in self._live():
            if not c.cfg.filters:
                return (">",)
            out.extend(f for f in c.cfg.filters if f not in out)
        return tuple(out)

    async def refresh_interest(self) -> None:
        """Interest streams: propose the current consumer filters."""
        if self.interest:
            await self.stream.propose(Interest(self.filters()))

    # -- removals ---------------------------------------------------------------------

    def _unneeded(self, seqs: Iterable[int], skip: Consumer | None = None) -> list[int]:
        consumers = [c for c in self._live() if c is not skip]
        filtered = any(c.cfg.filters for c in consumers)
        store = self.stream.store
        out = []
        for seq in seqs:
            subject: str | None = None
            if filtered:
                try:
                    subject = store.load(seq).subject
                except (MsgNotFound, StoreEOF):
                    continue
            if not any(needs(c, seq, subject) for c in consumers):
                out.append(seq)
        return out

    async def _remove(self, seqs: list[int], below: int = 0) -> None:
        for i in range(0, max(len(seqs), 1), ACK_REMOVE_SEQS_MAX):
            chunk = tuple(seqs[i : i + ACK_REMOVE_SEQS_MAX])
            if not chunk and not below:
                return
            out = await self.stream.propose(AckRemove(chunk, below if i == 0 else 0))
            self.removed += getattr(out.results[0], "removed", 0)

    async def after_acks(self, acked: Iterable[int]) -> None:
        """A consumer acknowledged (or gave up on) ``acked``: remove what nobody needs."""
        seqs = self._unneeded(sorted(set(acked)))
        if seqs:
            await self._remove(seqs)

    async def after_deliveries(self, seqs: Iterable[int]) -> None:
        """An ack-none consumer delivered ``seqs`` (they count as acknowledged)."""
        await self.after_acks(seqs)

    async def consumer_removed(self, c: Consumer) -> None:
        """Consumer ``c`` is gone: interest streams drop what only it needed."""
        if not self.interest:
            return
        await self.refresh_interest()
        st = self.stream.store.state()
        if not self._live():
            if st.msgs:
                await self._remove([], below=st.last_seq + 1)
            return
        await self.sweep(max(c.fsm.floor_sseq + 1, st.first_seq), skip=c)

    async def sweep(self, start: int = 0, skip: Consumer | None = None) -> None:
        """Check messages from ``start`` (default: the first) and remove the unneeded."""
        store = self.stream.store
        st = store.state()
        seq = max(start, st.first_seq)
        if not [c for c in self._live() if c is not skip]:
            return  # kept for the next consumer, as nats-server does at start
        candidates = []
        while seq <= st.last_seq and len(candidates) < SWEEP_MSGS_MAX:
            m = store.load_next(">", seq)
            if m is None:
                break
            candidates.append(m.seq)
            seq = m.seq + 1
        seqs = self._unneeded(candidates, skip=skip)
        if seqs:
            log.debug("event=retention_sweep stream=%s removed=%d", self.stream.cfg.name, len(seqs))
            await self._remove(seqs)
