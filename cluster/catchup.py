"""Catch-up by streaming the store: a replica fills the hole a snapshot left.

Theory of operation
-------------------
A stream group's snapshot (``cluster.stream_snapshot``) holds the stream's
state, never its messages.  A replica that installs one while its store is
behind (a follower the leader compacted past, a restart whose store was
rebuilt, a brand-new empty peer) has a *hole*: its store ends before the
snapshot's ``last_seq``.  Until the hole is filled the replica applies no
entry, never stands for election and answers no reads
(``cluster.replicated``).  It fills it by asking the leader's store for the
missing messages in batches.

The protocol rides the server's peer links under the group's catch-up
channel (``<group>~cu``).  A request ``[req_id, from_seq, to_seq]`` asks for
the live messages in ``[from_seq, to_seq]``; the answer
``[req_id, through, msgs]`` carries at most ``BATCH_MSGS_MAX`` messages and
about ``BATCH_BYTES_MAX`` bytes (one message more than the bound only when a
single message is larger), and ``through``: every sequence up to it is
covered (the gaps are messages the stream no longer has).  The requester
asks again from ``through + 1``; one request is outstanding at a time, so
memory is bounded by one batch on either side whatever the stream's size.
A lost request or answer is asked again after a timeout.

``reconcile`` prepares a store for a snapshot (removes what the stream had
removed by then), ``serve_batch`` reads one batch (leader) and
``install_batch`` writes one (the replica catching up): pure functions over
a ``StreamStore``; the shell (``cluster.replicated``) does the I/O.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Any

import cbor2

from cluster.stream_snapshot import GroupSnapshot
from store.api import StoredMsg, StreamStore
from store.errors import MsgNotFound, StoreEOF

__all__ = [
    "BATCH_BYTES_MAX",
    "BATCH_MSGS_MAX",
    "channel",
    "decode_reply",
    "decode_request",
    "encode_reply",
    "encode_request",
    "install_batch",
    "reconcile",
    "serve_batch",
]

#: one catch-up batch: messages and bytes (payload + headers + subject)
BATCH_MSGS_MAX = 4096
BATCH_BYTES_MAX = 1024 * 1024
#: messages read from the store per step while filling a batch
_READ_STEP = 512


def channel(group_id: str) -> str:
    """The peer-links channel of a group's catch-up traffic."""
    return group_id + "~cu"


def encode_request(req_id: int, from_seq: int, to_seq: int) -> bytes:
    return cbor2.dumps([req_id, from_seq, to_seq])


def decode_request(data: bytes) -> tuple[int, int, int]:
    """Raises ValueError if malformed."""
    try:
        v: Any = cbor2.loads(data)
        req_id, a, b = v
    except Exception as e:
        raise ValueError(f"bad catch-up request: {e}") from e
    if not all(type(x) is int and x >= 0 for x in (req_id, a, b)):
        raise ValueError("bad catch-up request fields")
    return req_id, a, b


def encode_reply(req_id: int, through: int, msgs: list[StoredMsg]) -> bytes:
    # a StoredMsg is a tuple: cbor2 writes it as the array it is
    return cbor2.dumps([req_id, through, msgs])


def decode_reply(data: bytes) -> tuple[int, int, list[StoredMsg]]:
    """Raises ValueError if malformed."""
    try:
        v: Any = cbor2.loads(data)
        req_id, through, raw = v
    except Exception as e:
        raise ValueError(f"bad catch-up reply: {e}") from e
    if type(req_id) is not int or type(through) is not int or type(raw) is not list:
        raise ValueError("bad catch-up reply fields")
    make = StoredMsg._make
    msgs: list[StoredMsg] = []
    prev = 0
    for item in raw:  # one pass: shape, types and order of every message
        if type(item) is not list or len(item) != 5:
            raise ValueError("bad catch-up reply: a message is an array of 5")
        seq, subject, headers, payload, ts_ns = item
        if type(seq) is not int or seq <= prev or seq > through:
            raise ValueError("catch-up reply messages out of order")
        if type(subject) is not str or type(payload) is not bytes:
            raise ValueError("catch-up reply message fields")
        if type(headers) is not bytes or type(ts_ns) is not int:
            raise ValueError("catch-up reply message fields")
        msgs.append(make(item))
        prev = seq
    return req_id, through, msgs


def _seq_of(m: StoredMsg) -> int:
    return m.seq


def serve_batch(
    store: StreamStore,
    from_seq: int,
    to_seq: int,
    *,
    msgs_max: int = BATCH_MSGS_MAX,
    bytes_max: int = BATCH_BYTES_MAX,
) -> tuple[int, list[StoredMsg]]:
    """One batch of the live messages in ``[from_seq, to_seq]``: ``(through, msgs)``.

    ``through`` is the last sequence the batch covers: the last message's
    when a bound stopped it, else ``min(to_seq, last_seq)`` of the store
    (which may be short of ``to_seq`` on a leader that has not applied that
    far yet; the requester asks again).
    """
    out: list[StoredMsg] = []
    size = 0
    seq = from_seq
    while seq <= to_seq and len(out) < msgs_max and size < bytes_max:
        run = store.load_run(seq, min(_READ_STEP, msgs_max - len(out)))
        if not run:
            break
        past = run[-1].seq > to_seq
        if past:
            run = run[: bisect_right(run, to_seq, key=_seq_of)]
            if not run:
                break
        # every message whose bytes before it are under the bound (the one that
        # crosses it included): a prefix found on the running sums
        sums = list(
            accumulate(
                (len(m.payload) + len(m.headers) + len(m.subject) for m in run), initial=size
            )
        )
        take = min(len(run), bisect_left(sums, bytes_max))
        out.extend(run[:take])
        size = sums[take]
        if take < len(run) or past:
            break
        seq = run[-1].seq + 1
        if run[-1].seq >= to_seq:
            break
    if out and (len(out) >= msgs_max or size >= bytes_max):
        return out[-1].seq, out
    return max(from_seq - 1, min(to_seq, store.state().last_seq)), out


def install_batch(store: StreamStore, through: int, msgs: list[StoredMsg]) -> None:
    """Append one batch at its own sequences and cover the gaps up to ``through``.

    Messages at or below the store's ``last_seq`` (a repeated answer) are
    ignored.  Each run of consecutive sequences is one ``append_batch`` (one
    store write); a gap before a run is a ``skip``.

    Raises:
        LimitExceeded: the store refused a message (its limits; the messages
            before it are stored).
    """
    cur = store.state().last_seq
    i, n = 0, len(msgs)
    while i < n and msgs[i].seq <= cur:
        i += 1
    while i < n:
        start = msgs[i].seq
        if start > cur + 1:
            store.skip(start - 1)
        j = i + 1
        while j < n and msgs[j].seq == start + (j - i):
            j += 1
        run = [(m.subject, m.headers, m.payload, m.ts_ns) for m in msgs[i:j]]
        k, err = store.append_batch(run)
        if err is not None:
            raise err
        cur = start + k - 1
        i = j
    if through > cur:
        store.skip(through)


def reconcile(store: StreamStore, snap: GroupSnapshot) -> None:
    """Bring a store that is to take ``snap`` in line with it, up to where it holds.

    A store past the snapshot's ``last_seq`` is cut back to it (the entries
    after the snapshot append those messages again); messages below the
    snapshot's ``first_seq`` or inside its interior deletes are removed (the
    stream had removed them by then: removals never come back).  What the
    store lacks is left for catch-up.
    """
    st = store.state()
    if st.last_seq > snap.last_seq:
        store.truncate(snap.last_seq)
        st = store.state()
    if st.first_seq < snap.first_seq:
        # nothing below first_seq existed any more: an empty store jumps there
        store.compact(snap.first_seq)
    st = store.state()
    if not st.msgs:
        return
    for a, b in snap.deleted:
        if b < st.first_seq or a > st.last_seq:
            continue
        for seq in range(max(a, st.first_seq), min(b, st.last_seq) + 1):
            try:
                store.remove(seq)
            except (MsgNotFound, StoreEOF):
                pass
