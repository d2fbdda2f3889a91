"""``ConsumerStateMachine``: one consumer's replicated state, decided in apply.

See the package docstring for the rules; this module holds the machine, its
result values and the timer arithmetic (``deadline_ns``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import partial
from typing import BinaryIO, NamedTuple

import cbor2

from cluster.ops import (
    AckItem,
    AckKind,
    ConsumerAcked,
    ConsumerAcks,
    ConsumerCreated,
    ConsumerDelivered,
    ConsumerOp,
    ConsumerPolicy,
    ConsumerPolicyUpdate,
    ConsumerStreamFirst,
    ConsumerTimeouts,
    OpError,
    decode_any,
)
from store.api import ConsumerState, ConsumerStore, Pending

__all__ = [
    "AckOutcome",
    "ConsumerOutcome",
    "ConsumerStateMachine",
    "Delivery",
    "MaxDeliveries",
    "Nakked",
    "Terminated",
]


# --------------------------------------------------------------------------- results


class Delivery(NamedTuple):
    """One delivery decided by apply: what goes in the ack subject (a tuple:
    one is made per delivered message, so it is built in C)."""

    sseq: int
    dseq: int
    dc: int


_new_delivery = partial(tuple.__new__, Delivery)
_new_pending = partial(tuple.__new__, Pending)


@dataclass(frozen=True, slots=True)
class Nakked:
    """A ``-NAK`` was taken (advisory ``MSG_NAKED``)."""

    sseq: int
    dseq: int
    dc: int


@dataclass(frozen=True, slots=True)
class Terminated:
    """A ``+TERM`` was taken (advisory ``MSG_TERMINATED``)."""

    sseq: int
    dseq: int
    dc: int
    reason: str


@dataclass(frozen=True, slots=True)
class MaxDeliveries:
    """A message ran out of deliveries (advisory ``MAX_DELIVERIES``)."""

    sseq: int
    dc: int


@dataclass(frozen=True, slots=True)
class AckOutcome:
    """What one ack item did: ``ok`` means the ack may be answered (ack sync)."""

    ok: bool


_OK = AckOutcome(True)
_NOT_OK = AckOutcome(False)


@dataclass(slots=True)
class ConsumerOutcome:
    """Result of one applied op.

    Attributes:
        deliveries: for ``ConsumerDelivered``, one per delivered sequence.
        acks: for ``ConsumerAcks`` and ``ConsumerAcked``, one per ack.
        acked: stream sequences no longer wanted by this consumer (acked,
            terminated or given up): interest/workqueue retention hooks here.
        events: advisories to publish (``Nakked``, ``Terminated``,
            ``MaxDeliveries``).
        wake: delivery may proceed (redeliveries queued, room under
            ``max_ack_pending``).
    """

    deliveries: list[Delivery] = field(default_factory=list)
    acks: list[AckOutcome] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    events: list[Nakked | Terminated | MaxDeliveries] = field(default_factory=list)
    wake: bool = False


# --------------------------------------------------------------------------- machine


class ConsumerStateMachine:
    """The state of one consumer (``raft.fsm.StateMachine``).

    Args:
        name: the consumer's name (ops naming another consumer are refused).
        store: where the state is kept (``save`` after each op; the owner
            syncs it).
        save_each_op: False: ops only mark the state changed and ``flush``
            saves it (the consumer shell's flusher, on its own cadence).

    ``pending`` is kept in ascending stream sequence order (new deliveries
    are appended in order; loads and restores sort), so its first key is
    its minimum.
    """

    def __init__(self, name: str, store: ConsumerStore, *, save_each_op: bool = True) -> None:
        self.name = name
        self._store = store
        self._save_each_op = save_each_op
        self._unsaved = False
        self.policy = ConsumerPolicy()
        st = store.load()
        self.dseq = st.delivered_consumer_seq
        self.next_sseq = st.delivered_stream_seq + 1
        self.floor_dseq = st.ack_floor_consumer_seq
        self.floor_sseq = st.ack_floor_stream_seq
        #: stream seq -> [original consumer seq, last delivery / progress time]
        self.pending: dict[int, list[int]] = {
            s: [p.consumer_seq, p.ts_ns] for s, p in sorted(st.pending.items())
        }
        #: stream seq -> redeliveries so far (deliveries - 1)
        self.rdc: dict[int, int] = dict(st.redelivered)
        #: redelivery queue, stream order
        self.rdq: list[int] = []
        #: ``last_per_subject`` sequences still to deliver first
        self.lss: list[int] = []
        self.started = st.started or bool(st.delivered_stream_seq or st.pending)
        self._lss_resume = 0
        self.last_delivered_ns = 0
        self.last_ack_ns = 0

    # -- reads ------------------------------------------------------------------

    @property
    def num_ack_pending(self) -> int:
        """Delivered and not yet acknowledged."""
        return len(self.pending)

    @property
    def num_redelivered(self) -> int:
        """Messages delivered more than once and not yet acknowledged."""
        return len(self.rdc)

    @property
    def delivered_sseq(self) -> int:
        """``delivered.stream_seq`` of ConsumerInfo."""
        return self.next_sseq - 1

    def deliveries(self, sseq: int) -> int:
        """Times ``sseq`` was delivered so far (1 after the first delivery)."""
        return self.rdc.get(sseq, 0) + 1

    def at_max_ack_pending(self) -> bool:
        """New messages must wait: ``max_ack_pending`` outstanding acks."""
        m = self.policy.max_ack_pending
        return self.policy.ack != "none" and m > 0 and len(self.pending) >= m

    def deadline_ns(self, sseq: int) -> int:
        """When the ack timer of pending ``sseq`` runs out (ack_wait or backoff)."""
        _, ts = self.pending[sseq]
        backoff = self.policy.backoff_ns
        if backoff:
            wait = backoff[min(self.rdc.get(sseq, 0), len(backoff) - 1)]
        else:
            wait = self.policy.ack_wait_ns
        return ts + wait

    def next_due_ns(self) -> int | None:
        """The earliest ack deadline among pending messages not yet queued for
        redelivery (None if there is none): when the shell proposes
        ``ConsumerTimeouts``."""
        if self.policy.ack == "none" or not self.pending:
            return None
        queued = set(self.rdq)
        due = [self.deadline_ns(s) for s in self.pending if s not in queued]
        return min(due) if due else None

    def state(self) -> ConsumerState:
        """The persisted form."""
        return ConsumerState(
            delivered_consumer_seq=self.dseq,
            delivered_stream_seq=self.next_sseq - 1,
            ack_floor_consumer_seq=self.floor_dseq,
            ack_floor_stream_seq=self.floor_sseq,
            pending={s: _new_pending((p[0], p[1])) for s, p in self.pending.items()},
            redelivered=dict(self.rdc),
            started=self.started,
        )

    # -- apply --------------------------------------------------------------------

    def apply(self, entry: bytes) -> ConsumerOutcome:
        """Decode and apply one entry (``raft.fsm.StateMachine``).

        Raises:
            OpDecodeError: not a consumer op.
            OpError: an op for another consumer or of a stream.
        """
        op = decode_any(entry)
        if not isinstance(
            op,
            ConsumerCreated
            | ConsumerPolicyUpdate
            | ConsumerDelivered
            | ConsumerAcks
            | ConsumerTimeouts
            | ConsumerStreamFirst
            | ConsumerAcked,
        ):
            raise OpError(f"not a consumer op: {type(op).__name__}")
        return self.apply_op(op)

    def apply_op(self, op: ConsumerOp) -> ConsumerOutcome:
        """Apply a decoded op; the state is saved (not synced) afterwards."""
        if op.consumer != self.name:
            raise OpError(f"op for consumer {op.consumer!r} applied to {self.name!r}")
        out = ConsumerOutcome()
        if isinstance(op, ConsumerCreated):
            self.policy = op.policy
            if not self.started:
                self.started = True
                floor = self.next_sseq
                self.next_sseq = max(self.next_sseq, op.start_seq)
                self.lss = sorted(s for s in op.last_per_subject if s >= floor)
                if self.lss:
                    self._lss_resume = self.next_sseq
                    self.next_sseq = self.lss[0]
                self.floor_sseq = max(self.floor_sseq, self.next_sseq - 1)
            out.wake = True
        elif isinstance(op, ConsumerPolicyUpdate):
            self.policy = op.policy
            out.wake = True
        elif isinstance(op, ConsumerDelivered):
            self._delivered(op, out)
        elif isinstance(op, ConsumerAcked):
            if self.policy.ack == "explicit" and not self.lss:
                self._acked_explicit(op, out)
            else:
                take, acks = self._take_ack, out.acks
                for sseq, dseq in zip(op.sseqs, op.dseqs, strict=True):
                    acks.append(_OK if take(sseq, dseq, out) else _NOT_OK)
            self.last_ack_ns = op.now_ns
        elif isinstance(op, ConsumerAcks):
            for item in op.acks:
                out.acks.append(self._ack(item, op.now_ns, out))
            self.last_ack_ns = op.now_ns
        elif isinstance(op, ConsumerTimeouts):
            self._timeouts(op.now_ns, out)
        else:
            self._stream_first(op.first_seq, out)
        if self._save_each_op:
            self._store.save(self.state())
        else:
            self._unsaved = True
        return out

    def flush(self) -> None:
        """Save the state if ops changed it since the last save (``save_each_op=False``)."""
        if self._unsaved:
            self._unsaved = False
            self._store.save(self.state())

    def _delivered(self, op: ConsumerDelivered, out: ConsumerOutcome) -> None:
        ack_none = self.policy.ack == "none"
        if not self.lss and not ack_none and not self.rdc:
            # the fetch hot path: new messages only, in one loop with locals
            # (a new message is never pending, has no redelivery count)
            nxt, dseq, now = self.next_sseq, self.dseq, op.now_ns
            pending, append = self.pending, out.deliveries.append
            sseqs = op.sseqs
            for k, sseq in enumerate(sseqs):
                if sseq < nxt:  # a redelivery or stale: the general loop from here
                    self.next_sseq, self.dseq = nxt, dseq
                    self._delivered_from(sseqs[k:], op.now_ns, out)
                    return
                nxt = sseq + 1
                dseq += 1
                pending[sseq] = [dseq, now]
                append(_new_delivery((sseq, dseq, 1)))
            self.next_sseq, self.dseq = nxt, dseq
            self.last_delivered_ns = now
            return
        if ack_none and not self.lss and not self.pending and not self.rdc:
            # the ack-none fetch hot path (the Spark source): new messages only,
            # nothing pending, no redelivery counts; the floor follows the last
            nxt, dseq = self.next_sseq, self.dseq
            append = out.deliveries.append
            sseqs = op.sseqs
            for k, sseq in enumerate(sseqs):
                if sseq < nxt:  # stale: the general loop from here
                    if k:
                        self.floor_dseq, self.floor_sseq = dseq, nxt - 1
                    self.next_sseq, self.dseq = nxt, dseq
                    self._delivered_from(sseqs[k:], op.now_ns, out)
                    return
                nxt = sseq + 1
                dseq += 1
                append(_new_delivery((sseq, dseq, 1)))
            self.floor_dseq, self.floor_sseq = dseq, nxt - 1  # sseqs is never empty
            self.next_sseq, self.dseq = nxt, dseq
            self.last_delivered_ns = op.now_ns
            return
        self._delivered_from(op.sseqs, op.now_ns, out)

    def _delivered_from(self, sseqs: tuple[int, ...], now_ns: int, out: ConsumerOutcome) -> None:
        ack_none = self.policy.ack == "none"
        md = self.policy.max_deliver
        for sseq in sseqs:
            if sseq in self.pending:  # a redelivery
                if sseq in self.rdq:
                    self.rdq.remove(sseq)
                dc = self.deliveries(sseq)
                if md > 0 and dc >= md:  # its last delivery ran out or was -NAK'd
                    self._give_up(sseq, dc, out)
                    continue
                self.rdc[sseq] = self.rdc.get(sseq, 0) + 1
                self.pending[sseq][1] = now_ns
            elif self.lss and sseq == self.lss[0]:
                self.lss.pop(0)
                self.next_sseq = self.lss[0] if self.lss else max(self._lss_resume, sseq + 1)
                if not ack_none:
                    self.pending[sseq] = [self.dseq + 1, now_ns]
            elif sseq >= self.next_sseq and not self.lss:
                self.next_sseq = sseq + 1
                if not ack_none:
                    self.pending[sseq] = [self.dseq + 1, now_ns]
            else:
                continue  # stale proposal: already delivered or never pending
            self.dseq += 1
            if ack_none:
                self.floor_dseq, self.floor_sseq = self.dseq, sseq
            out.deliveries.append(Delivery(sseq, self.dseq, self.deliveries(sseq)))
        self.last_delivered_ns = now_ns

    def _acked_explicit(self, op: ConsumerAcked, out: ConsumerOutcome) -> None:
        """``_take_ack`` for each plain ack of an explicit-ack consumer with no
        ``last_per_subject`` start pending, in one loop (the fetch+ack hot
        path); same results, same floor moves."""
        pending, rdc, rdq = self.pending, self.rdc, self.rdq
        acks, acked = out.acks, out.acked
        m = self.policy.max_ack_pending
        # pending only shrinks here: full before any taken ack = full now
        was_full = m > 0 and len(pending) >= m
        nxt = self.next_sseq
        move = self._move_floor
        for sseq in op.sseqs:
            if sseq >= nxt:
                acks.append(_NOT_OK)  # beyond what was delivered: ignored
                continue
            if was_full:
                out.wake = True
            p = pending.pop(sseq, None)
            if rdc:
                rdc.pop(sseq, None)
            if p is not None:
                if rdq and sseq in rdq:
                    rdq.remove(sseq)
                move(p[0], sseq)
                acked.append(sseq)
            acks.append(_OK)

    def _drop(self, sseq: int) -> None:
        """Forget pending ``sseq`` and move the ack floor as nats-server does."""
        p = self.pending.pop(sseq)
        self.rdc.pop(sseq, None)
        if sseq in self.rdq:
            self.rdq.remove(sseq)
        self._move_floor(p[0], sseq)

    def _move_floor(self, dseq: int, sseq: int) -> None:
        if not self.pending:
            self.floor_dseq, self.floor_sseq = self.dseq, self.next_sseq - 1
            return
        if dseq == self.floor_dseq + 1:
            self.floor_dseq, self.floor_sseq = dseq, sseq
            nxt = next(iter(self.pending))  # ascending: the first is the minimum
            p = self.pending[nxt]
            if p[0] > 0:
                self.floor_dseq, self.floor_sseq = p[0] - 1, nxt - 1

    def _ack(self, item: AckItem, now_ns: int, out: ConsumerOutcome) -> AckOutcome:
        kind, sseq, dseq = item.kind, item.sseq, item.dseq
        if kind is AckKind.PROGRESS:
            p = self.pending.get(sseq)
            if p is not None:
                p[1] = now_ns
            return _OK
        if kind is AckKind.NAK:
            return self._nak(item, now_ns, out)
        dc = self.deliveries(sseq)
        ok = self._take_ack(sseq, dseq, out)
        if kind is AckKind.TERM:
            out.events.append(Terminated(sseq, dseq, dc, item.reason))
        return _OK if ok else _NOT_OK

    def _take_ack(self, sseq: int, dseq: int, out: ConsumerOutcome) -> bool:
        if sseq >= self.next_sseq and not self.lss:
            return False  # beyond what was delivered: ignored, no ack reply
        ack = self.policy.ack
        if ack == "explicit":
            was_full = self.at_max_ack_pending()
            if sseq in self.pending:
                self._drop(sseq)
                out.acked.append(sseq)
            self.rdc.pop(sseq, None)
            out.wake = out.wake or was_full
            return True
        if ack in ("all", "flow_control"):
            if dseq <= self.floor_dseq or sseq <= self.floor_sseq:
                return True
            was_full = self.at_max_ack_pending()
            self.floor_dseq, self.floor_sseq = dseq, sseq
            for s in sorted(x for x in self.pending if x <= sseq):
                del self.pending[s]
                self.rdc.pop(s, None)
                if s in self.rdq:
                    self.rdq.remove(s)
                out.acked.append(s)
            if not self.pending:
                self.floor_dseq, self.floor_sseq = self.dseq, self.next_sseq - 1
            out.wake = out.wake or was_full
            return True
        return True  # ack none: nothing to do

    def _nak(self, item: AckItem, now_ns: int, out: ConsumerOutcome) -> AckOutcome:
        sseq, dseq = item.sseq, item.dseq
        if dseq <= self.floor_dseq or dseq > self.dseq or sseq not in self.pending:
            return _OK
        out.events.append(Nakked(sseq, dseq, self.deliveries(sseq)))
        if item.delay_ns >= 0:
            if sseq in self.rdq:
                self.rdq.remove(sseq)
            # the timer then runs out ``delay`` from now
            self.pending[sseq][1] = now_ns - self._wait_for(sseq) + item.delay_ns
            return _OK
        if sseq not in self.rdq:
            bisect.insort(self.rdq, sseq)
        out.wake = True
        return _OK

    def _wait_for(self, sseq: int) -> int:
        _, ts = self.pending[sseq]
        return self.deadline_ns(sseq) - ts

    def _give_up(self, sseq: int, dc: int, out: ConsumerOutcome) -> None:
        """``sseq`` ran out of deliveries: no longer pending, its count kept
        (retention keeps it, ``num_redelivered`` counts it); the advisory
        only when the count is exactly ``max_deliver`` (once, as nats-server:
        a count past a lowered ``max_deliver`` gives up silently)."""
        p = self.pending.pop(sseq)
        self._move_floor(p[0], sseq)
        self.rdc[sseq] = dc
        if dc == self.policy.max_deliver:
            out.events.append(MaxDeliveries(sseq, dc))
        out.acked.append(sseq)
        out.wake = True  # room under max_ack_pending; the next candidates

    def _timeouts(self, now_ns: int, out: ConsumerOutcome) -> None:
        """Queue expired messages for redelivery.  A message is given up here
        only when nats-server's timer check does (``hasMaxDeliveries``), which
        counts redeliveries, at least 1, against ``max_deliver``: in effect only
        ``max_deliver`` 1 (or one lowered under the count).  Otherwise a message
        on its last delivery is queued like any other and given up when it is
        taken off the queue (``_delivered``): for a pull consumer, when the next
        pull request arrives; until then it stays pending and counted."""
        if self.policy.ack == "none":
            return
        queued = set(self.rdq)
        md = self.policy.max_deliver
        for sseq in sorted(self.pending):
            if sseq in queued or self.deadline_ns(sseq) > now_ns:
                continue
            counted = max(self.rdc.get(sseq, 0), 1)
            if md > 0 and counted >= md:
                self._give_up(sseq, counted, out)
                continue
            bisect.insort(self.rdq, sseq)
            out.wake = True

    def _stream_first(self, first_seq: int, out: ConsumerOutcome) -> None:
        for sseq in sorted(s for s in self.pending if s < first_seq):
            self._drop(sseq)
        for sseq in [s for s in self.rdc if s < first_seq]:
            del self.rdc[sseq]
        self.lss = [s for s in self.lss if s >= first_seq]
        if self.next_sseq < first_seq:
            self.next_sseq = first_seq
            if not self.pending:
                self.floor_dseq, self.floor_sseq = self.dseq, first_seq - 1
        out.wake = True

    # -- next messages ------------------------------------------------------------

    def redeliveries(self) -> list[int]:
        """Stream sequences queued for redelivery, in order."""
        return list(self.rdq)

    # -- snapshots ---------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole state as one cbor2 document (``raft.fsm.StateMachine``)."""
        return cbor2.dumps(
            [
                1,
                self.dseq,
                self.next_sseq,
                self.floor_dseq,
                self.floor_sseq,
                {s: list(p) for s, p in self.pending.items()},
                self.rdc,
                self.rdq,
                self.lss,
            ]
        )

    def restore(self, reader: BinaryIO) -> None:
        """Replace the state with a ``snapshot()`` document.

        Raises:
            ValueError: malformed document (state unchanged).
        """
        try:
            v, dseq, nxt, fd, fs, pend, rdc, rdq, lss = cbor2.loads(reader.read())
            if v != 1:
                raise ValueError(f"unknown consumer snapshot version {v!r}")
            pending = {int(s): [int(p[0]), int(p[1])] for s, p in sorted(pend.items())}
            rdc2 = {int(s): int(n) for s, n in rdc.items()}
            rdq2, lss2 = [int(s) for s in rdq], [int(s) for s in lss]
        except (TypeError, KeyError, IndexError, cbor2.CBORDecodeError) as e:
            raise ValueError(f"malformed consumer snapshot: {e}") from e
        self.dseq, self.next_sseq, self.floor_dseq, self.floor_sseq = (
            int(dseq),
            int(nxt),
            int(fd),
            int(fs),
        )
        self.pending, self.rdc, self.rdq, self.lss = pending, rdc2, rdq2, lss2
        self.started = True
        self._store.save(self.state())
