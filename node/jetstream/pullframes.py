"""The ``MSG``/``HMSG`` frames of a run of deliveries to one subscription, built at once.

Theory of operation: a pull request's inbox with one plain local subscriber
(``Router.inbox_target``) gets its messages as ready bytes appended to the
client's output (``Router.append_built``).  Each frame is

    MSG <subject> <sid> $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending> <size>\\r\\n<payload>\\r\\n

(``HMSG`` with the header and total sizes and the header block before the
payload).  Only the five numbers, the size and the payload change from one
message to the next, so the common run -- every message with a header block
or none, and every pending count known up front -- is one bytes ``%`` of the frame's format
repeated once per message over a flat tuple of the arguments, which
``zip``/``map``/``chain`` gather from the messages in C: no Python bytecode
per message.  Anything else (``MSG`` and ``HMSG`` mixed, redeliveries
without given pending counts) takes a loop over the messages.  Both produce the same bytes.

``build_raw_frames`` builds the same frames from a ``RawRun`` (the records'
subject bytes and their header block + payload slices, read without a
``StoredMsg`` per message) for a run of first deliveries with consecutive
delivery sequences -- an ack-none pull round -- with the ``%`` repeated over
the run's lists; any other shape goes through ``build_frames``.

Pending counts: a message's is what the consumer still has to deliver after
it.  Without ``pendings`` it is counted down from ``left`` over the new
deliveries (delivery count 1) of the run; a redelivery leaves it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain
from operator import add, itemgetter

from cluster.consumer_fsm import Delivery
from store.api import RawRun, StoredMsg

__all__ = ["build_frames", "build_raw_frames", "count_new"]

_MSG = itemgetter(0)
_DELIVERY = itemgetter(1)
_SUBJECT = itemgetter(1)
_HEADERS = itemgetter(2)
_PAYLOAD = itemgetter(3)
_TS = itemgetter(4)
_SSEQ = itemgetter(0)
_DSEQ = itemgetter(1)
_DC = itemgetter(2)
_NUMS = b"%d.%d.%d.%d.%d %d\r\n%b\r\n"
"""A frame's ack numbers (dc, sseq, dseq, ts, pending), size and payload."""
_HNUMS = b"%d.%d.%d.%d.%d %d %d\r\n%b%b\r\n"
"""The same for ``HMSG``: header size, total size, header block, payload."""


def count_new(got: Sequence[tuple[StoredMsg, Delivery]]) -> int:
    """How many of ``got`` are first deliveries (delivery count 1)."""
    return list(map(_DC, map(_DELIVERY, got))).count(1)


def build_frames(
    got: Sequence[tuple[StoredMsg, Delivery]],
    sid: bytes,
    ack_prefix: bytes,
    left: int,
    pendings: Sequence[int] | None = None,
    *,
    with_headers: bool = True,
) -> tuple[bytes, int]:
    """The frames of ``got`` for the subscription whose ``sid`` (with its
    leading space) is given, and the run's payload bytes.

    Args:
        got: the messages with their deliveries, in delivery order.
        sid: ``b" <sid>"``.
        ack_prefix: ``b"$JS.ACK.<stream>.<consumer>."``.
        left: pending count before the run's first message (counted down).
        pendings: each message's pending count (instead of ``left``).
        with_headers: the client takes ``HMSG`` (else header blocks are left out).
    """
    k = len(got)
    if not k:
        return b"", 0
    msgs = list(map(_MSG, got))
    ds = list(map(_DELIVERY, got))
    payloads = list(map(_PAYLOAD, msgs))
    total = sum(map(len, payloads))
    all_new = list(map(_DC, ds)).count(1) == k
    if pendings is None and all_new:
        pendings = range(left - 1, left - 1 - k, -1)
    if pendings is None:
        return _loop(got, sid, ack_prefix, left, pendings, with_headers), total
    heads = list(map(_HEADERS, msgs)) if with_headers else []
    if any(heads) and not all(heads):  # MSG and HMSG mixed
        return _loop(got, sid, ack_prefix, left, pendings, with_headers), total
    subjects = list(map(_SUBJECT, msgs))
    plens = list(map(len, payloads))
    # first deliveries all: the delivery count is part of the format
    acks = (map(_SSEQ, ds), map(_DSEQ, ds), map(_TS, msgs), pendings)
    if not all_new:
        acks = (map(_DC, ds), *acks)
    if heads and heads[0]:  # every message with a header block
        hlens = list(map(len, heads))
        nums: tuple[Iterable[object], ...] = (
            *acks,
            hlens,
            map(add, hlens, plens),
            heads,
            payloads,
        )
        verb, tail = b"HMSG ", _HNUMS
    else:
        nums = (*acks, plens, payloads)
        verb, tail = b"MSG ", _NUMS
    if all_new:
        tail = b"1." + tail[3:]
    tail = (sid + b" " + ack_prefix).replace(b"%", b"%%") + tail
    if subjects.count(subjects[0]) == k:  # one subject: part of the format
        fmt = verb + subjects[0].encode().replace(b"%", b"%%") + tail
        args = chain.from_iterable(zip(*nums, strict=True))
    else:
        fmt = verb + b"%b" + tail
        args = chain.from_iterable(zip(map(str.encode, subjects), *nums, strict=True))
    return (fmt * k) % tuple(args), total


def _loop(
    got: Sequence[tuple[StoredMsg, Delivery]],
    sid: bytes,
    ack_prefix: bytes,
    left: int,
    pendings: Sequence[int] | None,
    with_headers: bool,
) -> bytes:
    """``build_frames`` message by message (header blocks, redeliveries)."""
    lefts = iter(pendings) if pendings is not None else None
    parts: list[bytes] = []
    add = parts.append
    heads: dict[str, tuple[bytes, bytes]] = {}  # subject -> MSG, HMSG line starts
    for (_, subject, h, payload, ts), (sseq, dseq, dc) in got:
        if lefts is not None:
            left = next(lefts)
        elif dc == 1:
            left -= 1
        head = heads.get(subject)
        if head is None:
            subj = subject.encode()
            head = heads[subject] = (
                b"MSG " + subj + sid + b" " + ack_prefix,
                b"HMSG " + subj + sid + b" " + ack_prefix,
            )
        if not h or not with_headers:
            add(head[0])
            add(b"%d.%d.%d.%d.%d %d\r\n" % (dc, sseq, dseq, ts, left, len(payload)))
        else:
            hl = len(h)
            add(head[1])
            add(b"%d.%d.%d.%d.%d %d %d\r\n" % (dc, sseq, dseq, ts, left, hl, hl + len(payload)))
            add(h)
        add(payload)
        add(b"\r\n")
    return b"".join(parts)


def build_raw_frames(
    rr: RawRun,
    ds: Sequence[Delivery],
    sid: bytes,
    ack_prefix: bytes,
    left: int,
    *,
    with_headers: bool = True,
) -> tuple[bytes, int]:
    """``build_frames`` of ``rr``'s messages delivered as ``ds`` (the same
    bytes): ``left`` is the pending count before the run's first message."""
    k = len(rr)
    if not k:
        return b"", 0
    bodies, hlens, seqs = rr.bodies, rr.hlens, rr.seqs
    total = sum(map(len, bodies)) - sum(hlens)
    d0 = ds[0].dseq if len(ds) == k else 0
    heads = hlens.count(0)
    if (
        len(ds) != k
        or ds[-1].dseq - d0 != k - 1
        or list(map(_DC, ds)).count(1) != k
        or list(map(_SSEQ, ds)) != seqs
        or (heads and heads != k and with_headers)  # MSG and HMSG mixed
        or (heads != k and not with_headers)  # header blocks to leave out
    ):
        got = list(zip(rr.stored(), ds, strict=True))
        return build_frames(got, sid, ack_prefix, left, with_headers=with_headers)
    acks = (seqs, range(d0, d0 + k), rr.ts, range(left - 1, left - 1 - k, -1))
    if heads:  # no header blocks: the bodies are the payloads
        verb, tail = b"MSG ", b"1." + _NUMS[3:]
        nums: tuple[Iterable[object], ...] = (*acks, map(len, bodies), bodies)
    else:
        verb, tail = b"HMSG ", b"1.%d.%d.%d.%d %d %d\r\n%b\r\n"  # header block + payload: one
        nums = (*acks, hlens, map(len, bodies), bodies)
    tail = (sid + b" " + ack_prefix).replace(b"%", b"%%") + tail
    subjects = rr.subjects
    if subjects.count(subjects[0]) == k:  # one subject: part of the format
        fmt = verb + subjects[0].replace(b"%", b"%%") + tail
        args = chain.from_iterable(zip(*nums, strict=True))
    else:
        fmt = verb + b"%b" + tail
        args = chain.from_iterable(zip(subjects, *nums, strict=True))
    return (fmt * k) % tuple(args), total
