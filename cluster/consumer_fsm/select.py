"""Reading the stream for a consumer: start position, next messages, pending count.

Theory of operation: these are pure functions over a ``StreamStore`` (reads
only) and a ``ConsumerStateMachine`` (reads only).  The proposer uses them to
*choose* what to propose (``ConsumerCreated.start_seq``, the sequences of a
``ConsumerDelivered``); ``apply`` then decides, so a stale choice is harmless
(apply skips sequences that are no longer deliverable).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator

from cluster.consumer_fsm.machine import ConsumerStateMachine
from cluster.consumer_model import AckPolicy, ConsumerConfig, DeliverPolicy
from cluster.ops import ConsumerPolicy
from store.api import StoredMsg, StreamStore
from store.errors import MsgNotFound, StoreEOF

__all__ = [
    "count_pending",
    "next_messages",
    "policy_of",
    "rfc3339_to_ns",
    "select_start",
]

RUN_MIN = 32
"""Messages an unfiltered consumer reads at once at first (``load_run``) when
its caller did not say how many it wants."""
RUN_MAX = 256
"""... doubling up to this many while the caller keeps taking them."""


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def rfc3339_to_ns(text: str) -> int:
    """Unix nanoseconds of an RFC3339 time (nanosecond precision kept).

    Raises:
        ValueError: not RFC3339.
    """
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(f"not an RFC3339 time: {text!r}")
    base, frac, zone = m.groups()
    tz = datetime.UTC if zone == "Z" else datetime.datetime.strptime(zone, "%z").tzinfo
    dt = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=tz)
    nanos = int((frac or ".0")[1:].ljust(9, "0"))
    return int(dt.timestamp()) * 1_000_000_000 + nanos


def policy_of(cfg: ConsumerConfig) -> ConsumerPolicy:
    """What the consumer state machine needs of a config."""
    return ConsumerPolicy(
        ack=cfg.ack_policy.value,
        ack_wait_ns=max(cfg.ack_wait_ns, 0),
        backoff_ns=tuple(max(b, 0) for b in cfg.backoff_ns),
        max_deliver=cfg.max_deliver,
        max_ack_pending=cfg.max_ack_pending if cfg.ack_policy is not AckPolicy.NONE else 0,
        filters=cfg.filters,
    )


def _filters(cfg_filters: tuple[str, ...]) -> str | tuple[str, ...]:
    if not cfg_filters:
        return ">"
    return cfg_filters[0] if len(cfg_filters) == 1 else cfg_filters


def select_start(cfg: ConsumerConfig, store: StreamStore) -> tuple[int, tuple[int, ...]]:
    """The first stream sequence to consider and the ``last_per_subject`` list.

    Mirrors nats-server's ``selectStartingSeqNo``: ``all`` = the stream's first
    sequence; ``last`` = the last message matching the filters; ``new`` = after
    the last; ``by_start_sequence`` = ``opt_start_seq``; ``by_start_time`` =
    the first message stored at or after ``opt_start_time``;
    ``last_per_subject`` = the last message of each matching subject, then new
    ones.
    """
    st = store.state()
    after_last = st.last_seq + 1
    first = max(st.first_seq, 1)
    dp = cfg.deliver_policy
    filters = _filters(cfg.filters)
    if dp is DeliverPolicy.ALL:
        return first, ()
    if dp is DeliverPolicy.NEW:
        return after_last, ()
    if dp is DeliverPolicy.LAST:
        try:
            return store.load_last(filters).seq, ()
        except MsgNotFound:
            return after_last, ()
    if dp is DeliverPolicy.BY_START_SEQUENCE:
        return max(cfg.opt_start_seq, 1), ()
    if dp is DeliverPolicy.BY_START_TIME:
        at = rfc3339_to_ns(cfg.opt_start_time)
        seq = first
        while True:
            m = store.load_next(">", seq)
            if m is None:
                return after_last, ()
            if m.ts_ns >= at:
                return m.seq, ()
            seq = m.seq + 1
    lasts: set[int] = set()
    for f in cfg.filters:
        lasts.update(s.last_seq for s in store.subject_state(f).values())
    return after_last, tuple(sorted(lasts))


def next_messages(
    fsm: ConsumerStateMachine, store: StreamStore, want: int = 0, start: int = 0
) -> Iterator[StoredMsg]:
    """Messages to deliver next, in nats-server's order: redeliveries, the
    ``last_per_subject`` list, then new matching messages (only while under
    ``max_ack_pending``).  Messages that vanished from the stream are skipped.
    ``want`` (0: unknown) is how many the caller means to take: it sizes the
    first stream read only, never what is yielded.  ``start`` > ``next_sseq``:
    new messages from there (a leader's deliveries sent ahead of their commit,
    ``cluster.consumer_ahead``).
    """
    left = want  # of what the caller wants, after the redeliveries
    for sseq in fsm.redeliveries():
        try:
            yield store.load(sseq)
            left -= 1
        except (MsgNotFound, StoreEOF):
            continue
    taken = 0
    for sseq in list(fsm.lss):
        if _full(fsm, taken):
            return
        try:
            yield store.load(sseq)
            taken += 1
        except (MsgNotFound, StoreEOF):
            continue
    if fsm.lss:
        return
    filters = _filters(fsm.policy.filters)
    seq = max(fsm.next_sseq, start)
    # the stream read forward in runs (one store call per run: ``load_run``
    # without a filter, ``load_next_run`` with one, which resolves the filter
    # once and finds each subject's next position from its own index), never
    # more than ``max_ack_pending`` leaves room for.  A caller takes what it
    # needs and drops the generator, so a run may read messages never taken
    # (read again next time); a run is what the caller still wants (``want``,
    # a pull batch) or, not knowing, doubles from ``RUN_MIN``; at most ``RUN_MAX``.
    run = min(max(left - taken, 1), RUN_MAX) if want > 0 else RUN_MIN
    cap = fsm.policy.max_ack_pending if fsm.policy.ack != "none" else 0  # as _full
    while True:
        n = run
        if cap > 0:
            n = min(n, cap - len(fsm.pending) - taken)
            if n <= 0:
                return
        if filters == ">":
            msgs = store.load_run(seq, n)
        else:
            msgs = store.load_next_run(filters, seq, n)
        for m in msgs:
            if cap > 0 and len(fsm.pending) + taken >= cap:
                return
            taken += 1  # before the yield: a caller stops right after its last one
            yield m
        if len(msgs) < n:  # the end of the stream (of what matches)
            return
        seq = msgs[-1].seq + 1
        run = min(max(left - taken, 1) if want > 0 else run * 2, RUN_MAX)


def _full(fsm: ConsumerStateMachine, extra: int) -> bool:
    m = fsm.policy.max_ack_pending
    return fsm.policy.ack != "none" and m > 0 and len(fsm.pending) + extra >= m


def count_pending(store: StreamStore, filters: tuple[str, ...], start_seq: int) -> int:
    """Live messages matching ``filters`` with ``seq >= start_seq`` (``num_pending``),
    counted from the store's index (``count_in_range``), no message read."""
    st = store.state()
    if start_seq > st.last_seq or not st.msgs:
        return 0
    if not filters or any(f in ("", ">") for f in filters):
        if start_seq <= st.first_seq:
            return st.msgs
        if not st.num_deleted:
            return st.last_seq - start_seq + 1
        return store.count_in_range(">", start_seq, st.last_seq)
    return store.count_in_range(_filters(filters), start_seq, st.last_seq)
