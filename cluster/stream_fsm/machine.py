"""``StreamStateMachine``: apply, snapshot and restore of one stream.

See the package docstring (``cluster.stream_fsm``) for the theory of operation.
"""

from __future__ import annotations

import dataclasses
import io
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, BinaryIO

import cbor2

from cluster.headers import Headers, parse_headers
from cluster.ops import (
    AckRemove,
    DeleteMsg,
    Expire,
    Interest,
    MirrorMsg,
    Op,
    OpError,
    Publish,
    Purge,
    SourcedMsg,
    StreamMsg,
    StreamPolicy,
    UpdatePolicy,
    decode_op,
    decode_policy,
    encode_policy,
)
from cluster.stream_fsm.markers import marker_headers, min_ttl_s, plan_expiry, raise_msg_ttl
from cluster.stream_fsm.parse import parse_msg_ttl_ns, parse_seq
from cluster.stream_fsm.results import (
    ERR_DELETE_DENIED,
    ERR_EXPECTED_STREAM,
    ERR_HEADER_SIZE,
    ERR_MSG_SIZE,
    ERR_NO_MESSAGE,
    ERR_PURGE_DENIED,
    ERR_ROLLUP_DENIED,
    ERR_SEALED,
    ERR_SOURCE_HDR,
    ERR_STORE_EOF,
    ERR_TTL_DISABLED,
    ERR_TTL_INVALID,
    AckRemoveResult,
    ApplyOutcome,
    DeleteResult,
    Effect,
    ExpireResult,
    NewMessages,
    PolicyResult,
    PubResult,
    Purged,
    PurgeResult,
    Result,
    Stored,
    err_rollup_invalid,
    err_store_failed,
    err_wrong_last_msg_id,
    err_wrong_last_seq,
)
from cluster.stream_fsm.sourced import SourcingApply
from store.api import StreamStore
from store.errors import LimitExceeded, MsgNotFound, SnapshotError, StoreEOF
from store.limits import StreamLimits
from store.subjects import Matcher, compile_filters

__all__ = ["HEADER_BYTES_MAX", "SNAPSHOT_VERSION", "StreamSnapshotError", "StreamStateMachine"]

_tuple_new = tuple.__new__

SNAPSHOT_VERSION = 1
"""Version of the document ``snapshot()`` writes."""

HEADER_BYTES_MAX = 65535
"""nats-server refuses header blocks longer than this (10097)."""

# JetStream publish headers (case-sensitive).
MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJ_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_SUBJ_SEQ_SUBJ = "Nats-Expected-Last-Subject-Sequence-Subject"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
ROLLUP = "Nats-Rollup"
MSG_TTL = "Nats-TTL"
STREAM_SOURCE = "Nats-Stream-Source"


class StreamSnapshotError(ValueError):
    """A stream snapshot document is malformed (state left unchanged)."""


def store_limits(policy: StreamPolicy) -> StreamLimits:
    """The limits the store enforces for ``policy``: its ``limits``, honouring
    per-message TTLs when the stream allows them (``allow_msg_ttl``)."""
    lim = policy.limits.normalised()
    if lim.msg_ttl != policy.allow_msg_ttl:
        lim = dataclasses.replace(lim, msg_ttl=policy.allow_msg_ttl)
    return lim


# --------------------------------------------------------------------------- machine


class StreamStateMachine(SourcingApply):
    """One stream's replicated state over a ``StreamStore``.

    Args:
        store: The stream's store; this machine is its only writer.  It
            should be fresh or hold exactly the state of the snapshot the
            group will restore; its limits are set to ``policy.limits``.
        policy: The stream's initial policy (``UpdatePolicy`` replaces it).
    """

    def __init__(self, store: StreamStore, policy: StreamPolicy) -> None:
        self._store = store
        self._policy = policy
        # insertion order = age; an OrderedDict so pruning the oldest is O(1)
        # (a plain dict's next(iter()) walks every slot deleted at its front)
        self._dedupe: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._last_msg_id = ""
        #: add a ``Stored`` effect per stored publish (the shell sets it for
        #: streams that republish; it changes no state)
        self.report_stored = False
        #: interest retention: the consumers' filters (None: store everything)
        self._interest: tuple[str, ...] | None = None
        self._interest_match: Matcher | None = None
        self._skipped = False  # the last publish took a seq without being stored
        self._stored_hdr = b""  # the header block of the last publish stored
        if store.limits != store_limits(policy):
            store.update_limits(store_limits(policy))

    # ------------------------------------------------------------------ views

    @property
    def policy(self) -> StreamPolicy:
        """The current policy."""
        return self._policy

    @property
    def store(self) -> StreamStore:
        """The store this machine drives (read it; never write it)."""
        return self._store

    @property
    def last_msg_id(self) -> str:
        """``Nats-Msg-Id`` of the last message stored ("" if none)."""
        return self._last_msg_id

    @property
    def interest(self) -> tuple[str, ...] | None:
        """Interest retention's filters as the log set them (None: store everything)."""
        return self._interest

    def install_interest(self, filters: tuple[str, ...] | None) -> None:
        """Set the interest filters (a replicated group installing a state snapshot)."""
        self._interest = filters
        self._interest_match = compile_filters(filters) if filters else None

    def install_dedupe(self, last_msg_id: str, entries: Iterator[tuple[str, int, int]]) -> None:
        """Replace the dedupe table and last msg id (a replicated stream's
        group installing a state snapshot whose messages its store lacks)."""
        self._last_msg_id = last_msg_id
        self._dedupe = OrderedDict((k, (seq, ts)) for k, seq, ts in entries)

    def dedupe_entries(self) -> Iterator[tuple[str, int, int]]:
        """The dedupe table as ``(msg_id, seq, ts_ns)`` in insertion order."""
        for k, (seq, ts) in self._dedupe.items():
            yield k, seq, ts

    # ------------------------------------------------------------------ raft protocol

    def apply(self, entry: bytes) -> ApplyOutcome:
        """Decode and apply one committed entry (``raft.fsm.StateMachine``).

        Raises:
            OpDecodeError: the entry is not a valid op.
            StoreError, OSError: the store failed (not a client error).
        """
        return self.apply_op(decode_op(entry))

    def apply_op(self, op: Op) -> ApplyOutcome:
        """Apply one op (R1 use and tests; ``apply`` after decoding).

        Returns:
            One result per publish of a ``StreamMsg`` (in order), else one
            result; plus effects.  Client errors are ``ApiErrorResult``s.

        Raises:
            OpError: ``op`` is not an op.
            StoreError, OSError: the store failed.
        """
        if isinstance(op, StreamMsg):
            return self._apply_stream_msg(op)
        if isinstance(op, Purge):
            return self._apply_purge(op)
        if isinstance(op, DeleteMsg):
            return self._apply_delete(op)
        if isinstance(op, UpdatePolicy):
            return self._apply_update(op)
        if isinstance(op, Expire):
            return self._apply_expire(op)
        if isinstance(op, MirrorMsg):
            return self._apply_mirror_msg(op)
        if isinstance(op, SourcedMsg):
            return self._apply_sourced_msg(op)
        if isinstance(op, AckRemove):
            return self._apply_ack_remove(op)
        if isinstance(op, Interest):
            return self._apply_interest(op)
        raise OpError(f"not an op: {type(op).__name__}")

    # ------------------------------------------------------------------ publish

    def _apply_stream_msg(self, op: StreamMsg) -> ApplyOutcome:
        if not self.report_stored and self._interest is None:
            return self._apply_runs(op.msgs)
        results: list[Result] = []
        effects: list[Effect] = []
        stored = 0
        report = self.report_stored
        for m in op.msgs:
            prev = self._subject_last_seq(m.subject) if report else 0
            r, purged = self._publish(m)
            results.append(r)
            if isinstance(r, PubResult) and not r.duplicate:
                stored = r.seq
                if report and not self._skipped:
                    hdr = self._stored_hdr  # as stored (a raised Nats-TTL)
                    effects.append(Stored(r.seq, m.subject, hdr, m.payload, m.ts_ns, prev))
            if purged is not None:
                effects.append(purged)
        if stored:
            effects.append(NewMessages(stored))
        return ApplyOutcome(tuple(results), tuple(effects))

    def apply_stream_msgs(self, ops: list[StreamMsg]) -> list[ApplyOutcome]:
        """``apply_op`` of each ``StreamMsg`` in turn, with the same outcomes
        and store state; when none of their publishes has headers other
        than a lone ``Nats-Msg-Id`` (and no interest retention or ``Stored``
        effects are wanted) the publishes of all of them are stored by one
        ``append_batch`` run.

        Raises:
            StoreError, OSError: the store failed (some ops may be stored).
        """
        if (
            len(ops) == 1
            or self.report_stored
            or self._interest is not None
            or not all(_simple(m) for op in ops for m in op.msgs)
        ):
            return [self._apply_stream_msg(op) for op in ops]
        results: list[Result] = []
        self._publish_plain(tuple(m for op in ops for m in op.msgs), results)
        out: list[ApplyOutcome] = []
        pos = 0
        for op in ops:
            mine = tuple(results[pos : pos + len(op.msgs)])
            pos += len(op.msgs)
            last = 0
            for r in reversed(mine):
                if isinstance(r, PubResult) and not r.duplicate:
                    last = r.seq
                    break
            out.append(ApplyOutcome(mine, (NewMessages(last),) if last else ()))
        return out

    def _apply_runs(self, msgs: tuple[Publish, ...]) -> ApplyOutcome:
        """``_apply_stream_msg`` (no interest retention, no ``Stored`` effects)
        with each run of publishes without headers (or with only a
        ``Nats-Msg-Id``) stored by one ``StreamStore.append_batch``: the same
        results, effects and store state as one ``_publish`` per message (other
        headers need the per-message rules, so such a publish goes through
        ``_publish``)."""
        results: list[Result] = []
        effects: list[Effect] = []
        stored = 0
        i, n = 0, len(msgs)
        while i < n:
            j = i
            while j < n and _simple(msgs[j]):
                j += 1
            if j - i > 1:
                stored = self._publish_plain(msgs[i:j], results) or stored
                i = j
                continue
            r, purged = self._publish(msgs[i])
            results.append(r)
            if isinstance(r, PubResult) and not r.duplicate:
                stored = r.seq
            if purged is not None:
                effects.append(purged)
            i += 1
        if stored:
            effects.append(NewMessages(stored))
        return ApplyOutcome(tuple(results), tuple(effects))

    def _publish_plain(self, run: tuple[Publish, ...], results: list[Result]) -> int:
        """Store a run of publishes without headers or with only a
        ``Nats-Msg-Id`` (``_publish`` of each, in one store write); their
        results go to ``results``.  The last sequence stored (0: none)."""
        pol = self._policy
        if any(m.headers for m in run):
            if pol.sealed or not _unrefusing(pol.limits):
                last = 0
                for m in run:  # a limit may refuse one: one at a time
                    r, _ = self._publish(m)
                    results.append(r)
                    if isinstance(r, PubResult) and not r.duplicate:
                        last = r.seq
                return last
            return self._publish_ids(run, results)
        if self._dedupe:
            # pruning by each publish's time in turn leaves what pruning by the
            # latest leaves (the table's front only ever shrinks)
            self._prune_dedupe(max(m.ts_ns for m in run))
        if pol.sealed:
            results.extend([ERR_SEALED] * len(run))
            return 0
        max_size = pol.limits.max_msg_size
        if max_size >= 0 and any(len(m.payload) > max_size for m in run):
            last = 0
            for m in run:  # rare: some are refused, one at a time
                r, _ = self._publish(m)
                results.append(r)
                if isinstance(r, PubResult):
                    last = r.seq
            return last
        self._stored_hdr = b""
        self._skipped = False
        batch = [(m.subject, b"", m.payload, m.ts_ns) for m in run]
        name = pol.name
        store = self._store
        seq = store.state().last_seq + 1
        last = 0
        while batch:
            k, err = store.append_batch(batch)
            if k:
                # PubResult(name, s) built as the tuple it is (its __new__ is Python)
                results.extend(
                    [_tuple_new(PubResult, (name, s, False)) for s in range(seq, seq + k)]
                )
                seq += k
                last = seq - 1
                self._last_msg_id = ""
            if err is None:
                break
            results.append(err_store_failed(err))
            batch = batch[k + 1 :]
        return last

    def _publish_ids(self, run: tuple[Publish, ...], results: list[Result]) -> int:
        """``_publish_plain`` for a run with msg ids, on a stream no limit can
        refuse a message of: the dedupe rules of ``_publish`` message by
        message (pruning, duplicates inside the run), then one
        ``append_batch`` of those stored."""
        pol = self._policy
        name = pol.name
        window = pol.duplicate_window_ns
        d = self._dedupe
        store = self._store
        seq = store.state().last_seq + 1
        batch: list[tuple[str, bytes, bytes, int]] = []
        last_id = self._last_msg_id
        for m in run:
            if d:
                self._prune_dedupe(m.ts_ns)
            hdr = m.headers or b""
            mid = _only_msg_id(hdr) if hdr else ""
            if mid:
                dup = d.get(mid)
                if dup is not None and m.ts_ns - dup[1] < window:
                    results.append(PubResult(name, dup[0], duplicate=True))
                    continue
            if len(hdr) > HEADER_BYTES_MAX:
                results.append(ERR_HEADER_SIZE)
                continue
            batch.append((m.subject, hdr, m.payload, m.ts_ns))
            if mid and window > 0:
                d.pop(mid, None)
                d[mid] = (seq, m.ts_ns)
            last_id = mid or ""
            results.append(_tuple_new(PubResult, (name, seq, False)))
            seq += 1
        if not batch:
            return 0
        k, err = store.append_batch(batch)
        if err is not None or k != len(batch):  # _unrefusing: cannot happen
            raise RuntimeError(f"append_batch refused a message without limits: {err!r}")
        self._stored_hdr = batch[-1][1]
        self._skipped = False
        self._last_msg_id = last_id
        return seq - 1

    def _subject_last_seq(self, subject: str) -> int:
        try:
            return self._store.load_last(subject).seq
        except MsgNotFound:
            return 0

    def _publish(self, m: Publish) -> tuple[Result, Purged | None]:
        pol = self._policy
        if self._dedupe:  # empty in the common case (no Nats-Msg-Id)
            self._prune_dedupe(m.ts_ns)
        if pol.sealed:
            return ERR_SEALED, None
        hdr = m.headers or b""
        msg_id = ""
        rollup = ""
        ttl_invalid = False
        ttl_ns: int | None = None
        only_id = _only_msg_id(hdr) if hdr else None
        if only_id is not None:
            # the common block (just a Nats-Msg-Id): of _check_headers' rules
            # only the duplicate check can apply
            msg_id = only_id
            if msg_id:
                dup = self._dedupe.get(msg_id)
                if dup is not None and m.ts_ns - dup[1] < pol.duplicate_window_ns:
                    return PubResult(pol.name, dup[0], duplicate=True), None
        elif hdr:
            h = parse_headers(hdr, strict=False)
            msg_id = h.get(MSG_ID) or ""
            checked = self._check_headers(h, m, msg_id)
            if checked is not None:
                return checked, None
            rollup = h.get(ROLLUP) or ""
            ttl_value = h.get(MSG_TTL)
            if ttl_value:
                ttl_ns = parse_msg_ttl_ns(ttl_value)
                ttl_invalid = ttl_ns is None
        if len(hdr) > HEADER_BYTES_MAX:
            return ERR_HEADER_SIZE, None
        max_size = pol.limits.max_msg_size
        if max_size >= 0 and len(hdr) + len(m.payload) > max_size:
            return ERR_MSG_SIZE, None
        if ttl_invalid:
            return ERR_TTL_INVALID, None
        if ttl_ns is not None and ttl_ns > 0 and pol.subject_delete_marker_ttl_ns > 0:
            hdr = self._raise_ttl(hdr, ttl_ns)
        self._stored_hdr = hdr
        self._skipped = self._no_interest(m.subject)
        if self._skipped:
            seq = self._store.state().last_seq + 1
            self._store.skip(seq)
        else:
            try:
                seq, _ = self._store.append(m.subject, hdr, m.payload, m.ts_ns)
            except LimitExceeded as e:
                return err_store_failed(e), None
        if msg_id and pol.duplicate_window_ns > 0:
            self._dedupe.pop(msg_id, None)
            self._dedupe[msg_id] = (seq, m.ts_ns)
        self._last_msg_id = msg_id
        purged = None
        if rollup:
            subject = m.subject if rollup == "sub" else None
            n = self._store.purge(filter=subject, keep=1)
            purged = Purged(self._store.state().first_seq, n)
        return PubResult(pol.name, seq), purged

    def _raise_ttl(self, hdr: bytes, ttl_ns: int) -> bytes:
        """A TTL below the marker TTL is raised to it (not with one message
        per subject: nats-server's rule, see ``markers``)."""
        floor_s = min_ttl_s(self._policy.subject_delete_marker_ttl_ns)
        if self._policy.limits.max_msgs_per_subject == 1 or ttl_ns // 1_000_000_000 >= floor_s:
            return hdr
        return raise_msg_ttl(hdr, floor_s)

    def recover_from_store(self) -> int:
        """Rebuild the dedupe table and last msg id from the store's messages.

        For a state machine opened over a store that already holds messages
        (a restart without a snapshot): the ids of the messages inside the
        duplicate window of the last message's timestamp, newest first, as
        nats-server rebuilds its dedupe map.  The store keeps the ids beside
        its index, so this reads one message and the ids, never the stream.
        Deterministic: every replica rebuilds the same table from the same
        log.  Returns the number of ids recovered.
        """
        st = self._store.state()
        if st.msgs == 0:
            return 0
        last = None
        seq = st.last_seq
        while last is None and seq >= st.first_seq:  # the newest live message
            try:
                last = self._store.load(seq)
            except MsgNotFound:
                seq -= 1
        if last is not None:
            self._last_msg_id = (
                (parse_headers(last.headers, strict=False).get(MSG_ID) or "")
                if last.headers
                else ""
            )
        window = self._policy.duplicate_window_ns
        if window <= 0:
            return 0
        floor = st.last_ts - window + 1  # strictly inside the window
        found: dict[str, tuple[int, int]] = {}
        for mid, seq, ts in reversed(self._store.msg_ids_since(floor)):
            if mid not in found:  # the newest message with an id wins
                found[mid] = (seq, ts)
        for mid, (seq, ts) in sorted(found.items(), key=lambda kv: kv[1][0]):
            self._dedupe[mid] = (seq, ts)
        return len(found)

    def _check_headers(self, h: Headers, m: Publish, msg_id: str) -> Result | None:
        """Every header rule before storing; a result ends the publish."""
        pol = self._policy
        expected = h.get(EXPECTED_STREAM)
        if expected and expected != pol.name:
            return ERR_EXPECTED_STREAM
        v = h.get(MSG_TTL)
        if v and not pol.allow_msg_ttl and parse_msg_ttl_ns(v) is not None:
            return ERR_TTL_DISABLED  # an invalid value is 10165, decided later
        v = h.get(EXPECTED_LAST_SUBJ_SEQ)
        if v:
            want = parse_seq(v)
            subj = h.get(EXPECTED_LAST_SUBJ_SEQ_SUBJ) or m.subject
            try:
                have = self._store.load_last(subj).seq
            except MsgNotFound:
                have = 0
            if want != have:
                return err_wrong_last_seq(have)
        v = h.get(EXPECTED_LAST_SEQ)
        if v:
            last = self._store.state().last_seq
            if parse_seq(v) != last:
                return err_wrong_last_seq(last)
        if h.get(STREAM_SOURCE):
            return ERR_SOURCE_HDR  # only sourcing may store it (not checked for those)
        if msg_id:
            dup = self._dedupe.get(msg_id)
            if dup is not None and m.ts_ns - dup[1] < pol.duplicate_window_ns:
                return PubResult(pol.name, dup[0], duplicate=True)
        v = h.get(EXPECTED_LAST_MSG_ID)
        if v and v != self._last_msg_id:
            return err_wrong_last_msg_id(self._last_msg_id)
        v = h.get(ROLLUP)
        if v:
            if not pol.allow_rollup_hdrs or pol.deny_purge:
                return ERR_ROLLUP_DENIED
            if v not in ("sub", "all"):
                return err_rollup_invalid(v)
        return None

    def _prune_dedupe(self, now_ns: int) -> None:
        window = self._policy.duplicate_window_ns
        if window <= 0:
            self._dedupe.clear()
            return
        d = self._dedupe
        while d:
            k = next(iter(d))
            if now_ns - d[k][1] < window:
                break
            d.popitem(last=False)

    # ------------------------------------------------------------------ other ops

    def _apply_purge(self, op: Purge) -> ApplyOutcome:
        if self._policy.sealed:
            return ApplyOutcome((ERR_SEALED,))
        if self._policy.deny_purge:
            return ApplyOutcome((ERR_PURGE_DENIED,))
        n = self._store.purge(filter=op.filter, seq=op.seq, keep=op.keep)
        first = self._store.state().first_seq
        return ApplyOutcome((PurgeResult(n),), (Purged(first, n),))

    def _apply_delete(self, op: DeleteMsg) -> ApplyOutcome:
        if self._policy.sealed:
            return ApplyOutcome((ERR_SEALED,))
        if self._policy.deny_delete:
            return ApplyOutcome((ERR_DELETE_DENIED,))
        try:
            self._store.remove(op.seq, erase=op.erase)
        except StoreEOF:
            return ApplyOutcome((ERR_STORE_EOF,))
        except MsgNotFound:
            return ApplyOutcome((ERR_NO_MESSAGE,))
        return ApplyOutcome((DeleteResult(op.seq),))

    def _apply_update(self, op: UpdatePolicy) -> ApplyOutcome:
        removed = self._store.update_limits(store_limits(op.policy))
        self._policy = op.policy
        if op.policy.duplicate_window_ns <= 0:
            self._dedupe.clear()
        return ApplyOutcome((PolicyResult(removed),))

    def _apply_expire(self, op: Expire) -> ApplyOutcome:
        if self._policy.subject_delete_marker_ttl_ns > 0:
            return self._expire_with_markers(op.now_ns)
        n = self._store.expire(op.now_ns)
        self._prune_dedupe(op.now_ns)
        return ApplyOutcome((ExpireResult(n),))

    def _expire_with_markers(self, now_ns: int) -> ApplyOutcome:
        """Expiry that leaves subject delete markers (``markers``): each due
        message is removed; the last of its subject is replaced by a marker
        stored at the next sequence at ``now_ns``."""
        store = self._store
        hdr = marker_headers(min_ttl_s(self._policy.subject_delete_marker_ttl_ns))
        effects: list[Effect] = []
        removed = stored = 0
        for step in plan_expiry(store, store.expiring(now_ns)):
            if step.marker:
                seq = self._store_marker(step.subject, hdr, now_ns, step.seq, effects)
                stored = seq or stored
            try:
                store.remove(step.seq, erase=False)
            except MsgNotFound:
                continue  # the marker's limits took it already
            removed += 1
        self._prune_dedupe(now_ns)
        if stored:
            effects.append(NewMessages(stored))
        return ApplyOutcome((ExpireResult(removed),), tuple(effects))

    def _store_marker(
        self, subject: str, hdr: bytes, now_ns: int, prev: int, effects: list[Effect]
    ) -> int:
        """Append one marker (its seq; 0 if none stored: no interest, or a
        discard-new limit refused it -- the expired message goes anyway)."""
        if self._no_interest(subject):
            self._store.skip(self._store.state().last_seq + 1)
            return 0
        try:
            seq, _ = self._store.append(subject, hdr, b"", now_ns)
        except LimitExceeded:
            return 0
        self._last_msg_id = ""
        if self.report_stored:
            effects.append(Stored(seq, subject, hdr, b"", now_ns, prev))
        return seq

    # ------------------------------------------------------------------ retention

    def _no_interest(self, subject: str) -> bool:
        """Interest retention and no consumer filter matches ``subject``."""
        if self._interest is None:
            return False
        if not self._interest:
            return True  # no consumers at all
        match = self._interest_match  # None: some consumer takes everything
        return match is not None and not match(subject)

    def _apply_interest(self, op: Interest) -> ApplyOutcome:
        self._interest = op.filters
        self._interest_match = compile_filters(op.filters) if op.filters else None
        return ApplyOutcome((AckRemoveResult(0),))

    def _apply_ack_remove(self, op: AckRemove) -> ApplyOutcome:
        """Remove what the consumers no longer need (no deny_* or sealed check)."""
        removed = 0
        st = self._store.state()
        if op.below > st.first_seq:
            removed += self._store.compact(min(op.below, st.last_seq + 1))
        for seq in op.seqs:
            try:
                self._store.remove(seq, erase=False)
            except (MsgNotFound, StoreEOF):
                continue
            removed += 1
        return ApplyOutcome((AckRemoveResult(removed),))

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> bytes:
        """The whole state as one cbor2 document (``SNAPSHOT_VERSION``).

        Layout: ``{"v", "policy", "last_msg_id", "dedupe": [[id, seq, ts]...],
        "store": <the store's snapshot bytes>}``; ids are UTF-8 bytes
        (surrogateescape, so any header bytes survive).
        """
        buf = io.BytesIO()
        self._store.snapshot(buf)
        doc = {
            "v": SNAPSHOT_VERSION,
            "policy": encode_policy(self._policy),
            "last_msg_id": _id_bytes(self._last_msg_id),
            "dedupe": [[_id_bytes(k), s, t] for k, (s, t) in self._dedupe.items()],
            "store": buf.getvalue(),
        }
        return cbor2.dumps(doc)

    def restore(self, reader: BinaryIO) -> None:
        """Replace the whole state with a snapshot from ``snapshot()``.

        The document is checked completely and the store verifies its part
        before anything is replaced.

        Raises:
            StreamSnapshotError: the document is malformed (state unchanged).
            StoreError, OSError: the store failed while replacing its contents.
        """
        policy, last_id, dedupe, store_bytes = _decode_snapshot(reader.read())
        try:
            self._store.restore(io.BytesIO(store_bytes))
        except SnapshotError as e:
            raise StreamSnapshotError(f"bad store snapshot: {e}") from e
        self._store.update_limits(store_limits(policy))
        self._policy = policy
        self._last_msg_id = last_id
        self._dedupe = OrderedDict(dedupe)


_ONLY_ID_HEAD = b"NATS/1.0\r\nNats-Msg-Id:"


def _simple(m: Publish) -> bool:
    """No headers, or only a ``Nats-Msg-Id`` (the batched path's publishes)."""
    hdr = m.headers
    return not hdr or (
        hdr.startswith(_ONLY_ID_HEAD) and hdr.endswith(b"\r\n\r\n") and hdr.count(b"\r\n") == 3
    )


def _unrefusing(lim: StreamLimits) -> bool:
    """No count, byte, per-subject or size limit: no append can be refused."""
    return not (
        lim.max_msgs > 0
        or lim.max_bytes > 0
        or lim.max_msgs_per_subject > 0
        or lim.max_msg_size >= 0
    )


def _only_msg_id(hdr: bytes) -> str | None:
    """The ``Nats-Msg-Id`` of a header block that holds nothing else
    (``NATS/1.0\\r\\nNats-Msg-Id: v\\r\\n\\r\\n``, what a publisher with a msg id
    sends), as ``parse_headers(hdr, strict=False).get(MSG_ID)`` would give it;
    None for any other block (then the full parser is needed)."""
    if hdr.startswith(_ONLY_ID_HEAD) and hdr.endswith(b"\r\n\r\n") and hdr.count(b"\r\n") == 3:
        return hdr[len(_ONLY_ID_HEAD) : -4].strip(b" \t").decode("utf-8", "surrogateescape")
    return None


def _id_bytes(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _id_str(b: object) -> str:
    if type(b) is not bytes:
        raise StreamSnapshotError("msg id must be bytes")
    return b.decode("utf-8", "surrogateescape")


def _decode_snapshot(
    data: bytes,
) -> tuple[StreamPolicy, str, dict[str, tuple[int, int]], bytes]:
    try:
        doc: Any = cbor2.loads(data)
    except Exception as e:  # cbor2 raises many types; all mean "malformed"
        raise StreamSnapshotError(f"not a cbor document: {e}") from e
    keys = {"v", "policy", "last_msg_id", "dedupe", "store"}
    if type(doc) is not dict or set(doc) != keys:
        raise StreamSnapshotError("snapshot must be a map with keys " + ", ".join(sorted(keys)))
    if type(doc["v"]) is not int or doc["v"] != SNAPSHOT_VERSION:
        raise StreamSnapshotError(f"unknown snapshot version {doc['v']!r}")
    try:
        policy = decode_policy(doc["policy"])
    except OpError as e:
        raise StreamSnapshotError(f"bad policy: {e}") from e
    last_id = _id_str(doc["last_msg_id"])
    if type(doc["dedupe"]) is not list:
        raise StreamSnapshotError("dedupe must be an array")
    dedupe: dict[str, tuple[int, int]] = {}
    for item in doc["dedupe"]:
        if type(item) is not list or len(item) != 3:
            raise StreamSnapshotError("dedupe entry must be [id, seq, ts]")
        k, seq, ts = item
        if type(seq) is not int or type(ts) is not int or seq < 1 or ts < 0:
            raise StreamSnapshotError("bad dedupe entry")
        dedupe[_id_str(k)] = (seq, ts)
    if type(doc["store"]) is not bytes:
        raise StreamSnapshotError("store must be bytes")
    return policy, last_id, dedupe, doc["store"]
