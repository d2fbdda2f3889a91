"""Replicated consumer ops: what changes a consumer's state, and their bodies.

Theory of operation
-------------------
A consumer's state changes travel as these ops (codes 32..63 of
``OpCode``): a consumer of an R1 stream applies them through its own
``LocalGroup``, one of a replicated stream through the stream's Raft group
(``cluster.consumer_table``).  Every op names its consumer, and time travels
in the op (``now_ns``, the proposer's clock) so the consumer state machine
never reads a clock.  ``ConsumerPolicy`` is what that machine needs of a
consumer's config.  ``ConsumerAcked`` carries plain acks as two parallel
sequence arrays -- the hot path, without one value object per ack; every
other ack goes as an ``AckItem`` of ``ConsumerAcks``.

A replicated stream's group also carries each consumer's life:
``ConsumerAssign`` (create or new config: the config as JSON, its creation
time, the consumer's group name and the start the proposer chose) and
``ConsumerRemove``.  They are not ``ConsumerOp``s (the consumer state machine
never sees them): the stream's consumer table (``cluster.consumer_table``)
applies them.

Each op checks its fields when built (``cluster.opfields``).  The entry
layout is ``cluster.ops``' (``encode_op``/``decode_any``); this module gives
it each op's body (``consumer_body``) and the body decoders
(``CONSUMER_DECODERS``).  Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from cluster.opfields import (
    INT64_MAX,
    UINT64_MAX,
    OpCode,
    OpError,
    check_array,
    check_int,
    check_str,
)

__all__ = [
    "ACK_POLICIES",
    "CONSUMER_DECODERS",
    "CONSUMER_ENTRY_TYPES",
    "CONSUMER_OP_TYPES",
    "AckItem",
    "AckKind",
    "ConsumerAcked",
    "ConsumerAcks",
    "ConsumerAssign",
    "ConsumerCreated",
    "ConsumerDelivered",
    "ConsumerOp",
    "ConsumerPolicy",
    "ConsumerPolicyUpdate",
    "ConsumerRemove",
    "ConsumerStreamFirst",
    "ConsumerTimeouts",
    "consumer_body",
]

ACK_POLICIES = ("none", "all", "explicit", "flow_control")


@dataclass(frozen=True, slots=True)
class ConsumerPolicy:
    """What the consumer state machine needs of a consumer's config.

    Attributes:
        ack: ``none``/``all``/``explicit``/``flow_control``.
        ack_wait_ns: redelivery delay (``backoff[0]`` when backoff is set).
        backoff_ns: per-redelivery delays; the last one repeats.
        max_deliver: deliveries allowed per message (-1 = unlimited).
        max_ack_pending: outstanding acks allowed (<= 0 = unlimited).
        filters: subject filters (() = every subject).
    """

    ack: str = "none"
    ack_wait_ns: int = 30_000_000_000
    backoff_ns: tuple[int, ...] = ()
    max_deliver: int = -1
    max_ack_pending: int = 0
    filters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ack not in ACK_POLICIES:
            raise OpError(f"bad ack policy {self.ack!r}")
        check_int("ack_wait_ns", self.ack_wait_ns, 0, INT64_MAX)
        if type(self.backoff_ns) is not tuple:
            raise OpError("backoff_ns must be a tuple")
        for b in self.backoff_ns:
            check_int("backoff_ns", b, 0, INT64_MAX)
        check_int("max_deliver", self.max_deliver, -INT64_MAX, INT64_MAX)
        check_int("max_ack_pending", self.max_ack_pending, -INT64_MAX, INT64_MAX)
        if type(self.filters) is not tuple:
            raise OpError("filters must be a tuple")
        for f in self.filters:
            check_str("filter", f)


def _enc_cpolicy(p: ConsumerPolicy) -> list[Any]:
    return [
        p.ack,
        p.ack_wait_ns,
        list(p.backoff_ns),
        p.max_deliver,
        p.max_ack_pending,
        list(p.filters),
    ]


def _dec_cpolicy(v: object) -> ConsumerPolicy:
    ack, wait, backoff, md, map_, filters = check_array("consumer policy", v, 6)
    if type(backoff) is not list or type(filters) is not list:
        raise OpError("consumer policy lists expected")
    return ConsumerPolicy(check_str("ack", ack), wait, tuple(backoff), md, map_, tuple(filters))


@dataclass(frozen=True, slots=True)
class ConsumerCreated:
    """A consumer starts (or restarts with a new policy).

    ``start_seq`` is the first stream sequence to consider and ``last_per_subject``
    the sequences a ``last_per_subject`` consumer delivers first; both were
    chosen by the proposer from the stream (``select_start``).  Applied to a
    consumer that already delivered, only the policy changes.
    """

    code: ClassVar[OpCode] = OpCode.CONSUMER_CREATED
    consumer: str
    policy: ConsumerPolicy
    start_seq: int = 1
    last_per_subject: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        if not isinstance(self.policy, ConsumerPolicy):
            raise OpError("policy must be a ConsumerPolicy")
        check_int("start_seq", self.start_seq, 1, UINT64_MAX)
        for s in self.last_per_subject:
            check_int("last_per_subject", s, 1, UINT64_MAX)


@dataclass(frozen=True, slots=True)
class ConsumerPolicyUpdate:
    """The consumer's config changed (an update)."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_POLICY
    consumer: str
    policy: ConsumerPolicy

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        if not isinstance(self.policy, ConsumerPolicy):
            raise OpError("policy must be a ConsumerPolicy")


_INT_ONLY = {int}


@dataclass(frozen=True, slots=True)
class ConsumerDelivered:
    """Messages handed out (new ones and redeliveries), in order."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_DELIVERED
    consumer: str
    sseqs: tuple[int, ...]
    now_ns: int

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        if type(self.sseqs) is not tuple or not self.sseqs:
            raise OpError("sseqs must be a non-empty tuple")
        seqs = self.sseqs
        # the common case checked in C (types, then the range); the loop
        # names the first bad one
        if set(map(type, seqs)) != _INT_ONLY or min(seqs) < 1 or max(seqs) > UINT64_MAX:
            for s in seqs:
                check_int("sseq", s, 1, UINT64_MAX)
        check_int("now_ns", self.now_ns, 0, INT64_MAX)


class AckKind(enum.IntEnum):
    """What an ack message said.  Append only."""

    ACK = 1
    NAK = 2
    TERM = 3
    PROGRESS = 4


@dataclass(frozen=True, slots=True)
class AckItem:
    """One ack: its kind and the ack subject's sequences.

    Attributes:
        delay_ns: a ``-NAK`` delay (-1 = none).
        reason: a ``+TERM`` reason.
    """

    kind: AckKind
    sseq: int
    dseq: int
    delay_ns: int = -1
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, AckKind):
            raise OpError("kind must be an AckKind")
        check_int("sseq", self.sseq, 0, UINT64_MAX)
        check_int("dseq", self.dseq, 0, UINT64_MAX)
        check_int("delay_ns", self.delay_ns, -1, INT64_MAX)
        check_str("reason", self.reason, empty_ok=True)


@dataclass(frozen=True, slots=True)
class ConsumerAcks:
    """A batch of acks, naks, terms and progress notes, in arrival order."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_ACKS
    consumer: str
    acks: tuple[AckItem, ...]
    now_ns: int

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        if type(self.acks) is not tuple or not self.acks:
            raise OpError("acks must be a non-empty tuple")
        for a in self.acks:
            if not isinstance(a, AckItem):
                raise OpError("acks must hold AckItem values")
        check_int("now_ns", self.now_ns, 0, INT64_MAX)


@dataclass(frozen=True, slots=True)
class ConsumerAcked:
    """A batch of plain acks (``+ACK``, ``+OK``, empty, ``+NXT``) as two parallel
    sequence arrays: the common case without one value object per ack.  Its
    ``AckOutcome`` per ack is as ``ConsumerAcks`` gives an ``ACK`` item."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_ACKED
    consumer: str
    sseqs: tuple[int, ...]
    dseqs: tuple[int, ...]
    now_ns: int

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        if type(self.sseqs) is not tuple or type(self.dseqs) is not tuple or not self.sseqs:
            raise OpError("sseqs and dseqs must be non-empty tuples")
        if len(self.sseqs) != len(self.dseqs):
            raise OpError("sseqs and dseqs differ in length")
        for seqs in (self.sseqs, self.dseqs):  # C-level passes: this is the hot path
            if set(map(type, seqs)) != {int} or min(seqs) < 0 or max(seqs) > UINT64_MAX:
                raise OpError("sequences must be ints in 0..2**64-1")
        check_int("now_ns", self.now_ns, 0, INT64_MAX)


@dataclass(frozen=True, slots=True)
class ConsumerTimeouts:
    """Ack timers that ran out by ``now_ns``: redeliver or give up (max_deliver)."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_TIMEOUTS
    consumer: str
    now_ns: int

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        check_int("now_ns", self.now_ns, 0, INT64_MAX)


@dataclass(frozen=True, slots=True)
class ConsumerStreamFirst:
    """The stream's first sequence moved to ``first_seq`` (purge, limits)."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_STREAM_FIRST
    consumer: str
    first_seq: int

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        check_int("first_seq", self.first_seq, 0, UINT64_MAX)


#: the most bytes of a consumer config carried by ``ConsumerAssign``
CONFIG_BYTES_MAX = 256 * 1024


@dataclass(frozen=True, slots=True)
class ConsumerAssign:
    """A consumer of a replicated stream is created, or takes a new config.

    ``config`` is the consumer's config as JSON (``ConsumerConfig.to_dict``);
    ``created_ns`` its creation time and ``group`` its Raft group name
    (``C-R3F-…``), both drawn once by the proposer of the first assign and
    kept by later ones.  ``start_seq`` and ``last_per_subject`` are
    ``ConsumerCreated``'s, chosen by the proposer from the stream; an assign
    of a consumer that exists takes only the config.
    """

    code: ClassVar[OpCode] = OpCode.CONSUMER_ASSIGN
    consumer: str
    config: bytes
    created_ns: int
    group: str
    start_seq: int = 1
    last_per_subject: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)
        if type(self.config) is not bytes or not 0 < len(self.config) <= CONFIG_BYTES_MAX:
            raise OpError("config must be non-empty bytes within bounds")
        check_int("created_ns", self.created_ns, 0, INT64_MAX)
        check_str("group", self.group)
        check_int("start_seq", self.start_seq, 1, UINT64_MAX)
        for s in self.last_per_subject:
            check_int("last_per_subject", s, 1, UINT64_MAX)


@dataclass(frozen=True, slots=True)
class ConsumerRemove:
    """A consumer of a replicated stream is deleted."""

    code: ClassVar[OpCode] = OpCode.CONSUMER_REMOVE
    consumer: str

    def __post_init__(self) -> None:
        check_str("consumer", self.consumer)


ConsumerOp = (
    ConsumerCreated
    | ConsumerPolicyUpdate
    | ConsumerDelivered
    | ConsumerAcks
    | ConsumerTimeouts
    | ConsumerStreamFirst
    | ConsumerAcked
)
"""Every op a consumer replicates."""

CONSUMER_OP_TYPES = (
    ConsumerCreated,
    ConsumerPolicyUpdate,
    ConsumerDelivered,
    ConsumerAcks,
    ConsumerTimeouts,
    ConsumerStreamFirst,
    ConsumerAcked,
)


CONSUMER_ENTRY_TYPES = (*CONSUMER_OP_TYPES, ConsumerAssign, ConsumerRemove)
"""Every consumer entry of a stream group: the ops and the lifecycle."""


def consumer_body(op: ConsumerOp | ConsumerAssign | ConsumerRemove) -> object:
    """The cbor body of a consumer op (see ``CONSUMER_DECODERS``)."""
    if isinstance(op, ConsumerAssign):
        return [
            op.consumer,
            op.config,
            op.created_ns,
            op.group,
            op.start_seq,
            list(op.last_per_subject),
        ]
    if isinstance(op, ConsumerRemove):
        return [op.consumer]
    if isinstance(op, ConsumerCreated):
        return [op.consumer, _enc_cpolicy(op.policy), op.start_seq, list(op.last_per_subject)]
    if isinstance(op, ConsumerPolicyUpdate):
        return [op.consumer, _enc_cpolicy(op.policy)]
    if isinstance(op, ConsumerDelivered):
        return [op.consumer, list(op.sseqs), op.now_ns]
    if isinstance(op, ConsumerAcks):
        items = [[int(a.kind), a.sseq, a.dseq, a.delay_ns, a.reason] for a in op.acks]
        return [op.consumer, items, op.now_ns]
    if isinstance(op, ConsumerTimeouts):
        return [op.consumer, op.now_ns]
    if isinstance(op, ConsumerAcked):
        return [op.consumer, list(op.sseqs), list(op.dseqs), op.now_ns]
    return [op.consumer, op.first_seq]


def _dec_consumer_created(body: object) -> ConsumerCreated:
    name, pol, start, lps = check_array("consumer_created", body, 4)
    if type(lps) is not list:
        raise OpError("last_per_subject must be an array")
    return ConsumerCreated(name, _dec_cpolicy(pol), start, tuple(lps))


def _dec_consumer_policy(body: object) -> ConsumerPolicyUpdate:
    name, pol = check_array("consumer_policy", body, 2)
    return ConsumerPolicyUpdate(name, _dec_cpolicy(pol))


def _dec_consumer_delivered(body: object) -> ConsumerDelivered:
    name, sseqs, now = check_array("consumer_delivered", body, 3)
    if type(sseqs) is not list:
        raise OpError("sseqs must be an array")
    return ConsumerDelivered(name, tuple(sseqs), now)


def _dec_consumer_acks(body: object) -> ConsumerAcks:
    name, items, now = check_array("consumer_acks", body, 3)
    if type(items) is not list:
        raise OpError("acks must be an array")
    acks = []
    for item in items:
        kind, sseq, dseq, delay, reason = check_array("ack", item, 5)
        if type(kind) is not int or kind not in AckKind._value2member_map_:
            raise OpError(f"bad ack kind {kind!r}")
        acks.append(AckItem(AckKind(kind), sseq, dseq, delay, reason))
    return ConsumerAcks(name, tuple(acks), now)


def _dec_consumer_acked(body: object) -> ConsumerAcked:
    name, sseqs, dseqs, now = check_array("consumer_acked", body, 4)
    if type(sseqs) is not list or type(dseqs) is not list:
        raise OpError("sseqs and dseqs must be arrays")
    return ConsumerAcked(name, tuple(sseqs), tuple(dseqs), now)


def _dec_consumer_timeouts(body: object) -> ConsumerTimeouts:
    name, now = check_array("consumer_timeouts", body, 2)
    return ConsumerTimeouts(name, now)


def _dec_consumer_stream_first(body: object) -> ConsumerStreamFirst:
    name, first = check_array("consumer_stream_first", body, 2)
    return ConsumerStreamFirst(name, first)


def _dec_consumer_assign(body: object) -> ConsumerAssign:
    name, config, created, group, start, lps = check_array("consumer_assign", body, 6)
    if type(lps) is not list:
        raise OpError("last_per_subject must be an array")
    return ConsumerAssign(name, config, created, group, start, tuple(lps))


def _dec_consumer_remove(body: object) -> ConsumerRemove:
    (name,) = check_array("consumer_remove", body, 1)
    return ConsumerRemove(name)


CONSUMER_DECODERS: dict[int, Callable[[object], ConsumerOp | ConsumerAssign | ConsumerRemove]] = {
    OpCode.CONSUMER_CREATED: _dec_consumer_created,
    OpCode.CONSUMER_POLICY: _dec_consumer_policy,
    OpCode.CONSUMER_DELIVERED: _dec_consumer_delivered,
    OpCode.CONSUMER_ACKS: _dec_consumer_acks,
    OpCode.CONSUMER_TIMEOUTS: _dec_consumer_timeouts,
    OpCode.CONSUMER_STREAM_FIRST: _dec_consumer_stream_first,
    OpCode.CONSUMER_ACKED: _dec_consumer_acked,
    OpCode.CONSUMER_ASSIGN: _dec_consumer_assign,
    OpCode.CONSUMER_REMOVE: _dec_consumer_remove,
}
"""Body decoders of the consumer op codes (``cluster.ops.decode_any`` uses them)."""
