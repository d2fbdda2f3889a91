"""The stream state machine: one stream's replicated state, decided in apply.

Theory of operation
-------------------
``StreamStateMachine`` is the ``raft.fsm.StateMachine`` of a stream's group.
Every replica applies the same committed ops (``cluster.ops``) in the same
order and so computes the same sequences, the same dedupe answers and the same
errors (DESIGN rule 2).  ``apply`` is pure apart from driving its
``StreamStore``: it reads no clock (time comes in the ops: a publish's
``ts_ns``, an ``Expire``'s ``now_ns``), draws no randomness, does no I/O of its
own and never raises for a client's mistake -- those are result values
(``ApiErrorResult``) carrying nats-server's ``code``/``err_code``/description.
It raises only for a bad entry encoding (``OpDecodeError``) or a broken
store (``StoreError`` such as ``InvariantViolation``, ``OSError``).

A publish is decided in nats-server's order (``processJetStreamMsg``):
sealed (10109); ``Nats-Expected-Stream`` (10060); ``Nats-Msg-Id`` dedupe
(a duplicate answers with the original seq); ``Nats-Expected-Last-Subject-
Sequence`` [``-Subject``] (10071); ``Nats-Expected-Last-Sequence`` (10071);
``Nats-Expected-Last-Msg-Id`` (10070); ``Nats-Rollup`` (10111); ``Nats-TTL``
(10165/10166); header size (10097); ``max_msg_size`` (10054); then
``StreamStore.append`` (``seq = last_seq + 1``; discard-new limits 10077),
then the rollup purge.  Header names are matched case-sensitively.

State beyond the store:

* the dedupe table ``msg_id -> (seq, ts_ns)`` in insertion order.  An id is
  a duplicate while ``now - ts < duplicate_window`` with ``now`` the new
  publish's ``ts_ns`` (never a clock).  Entries are pruned from the front as
  publishes and ``Expire`` ops advance time; lookups re-check the window, so
  proposer clocks that step backwards cannot make replicas disagree.  The
  table is bounded by the window times the publish rate, as in nats-server.
* ``last_msg_id``: the ``Nats-Msg-Id`` of the last message stored ("" if it
  had none); ``Nats-Expected-Last-Msg-Id`` compares against it.  Like
  nats-server it is not reset when that message is later removed.
* the ``StreamPolicy`` (changed by ``UpdatePolicy``).

``snapshot()`` writes all of it and the store's own snapshot into one cbor2
document with a version; ``restore`` verifies the whole document before it
replaces anything.

Durability: ``apply`` does **not** fsync.  The store buffers; the group's
driver makes the journal and the store durable once per cycle (group commit,
DESIGN §4) before results are acknowledged to clients.

Effects are returned as data (``ApplyOutcome.effects``), never performed:
``NewMessages(last_seq)`` after an entry stored something (wake consumers),
``Purged(first_seq, purged)`` after a purge or rollup (consumers skip ahead).
Hook for later: a republish rule would add a ``Republish(subject, headers,
payload)`` effect next to ``NewMessages`` in ``_apply_stream_msg``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import cbor2

from cluster.headers import Headers, parse_headers
from cluster.ops import (
    DeleteMsg,
    Expire,
    Op,
    OpError,
    Publish,
    Purge,
    StreamMsg,
    StreamPolicy,
    UpdatePolicy,
    decode_op,
    decode_policy,
    encode_policy,
)
from store.api import StreamStore
from store.errors import LimitExceeded, MsgNotFound, SnapshotError, StoreEOF

__all__ = [
    "SNAPSHOT_VERSION",
    "ApiErrorResult",
    "ApplyOutcome",
    "DeleteResult",
    "Effect",
    "ExpireResult",
    "NewMessages",
    "PolicyResult",
    "PubResult",
    "PurgeResult",
    "Purged",
    "Result",
    "StreamPolicy",
    "StreamSnapshotError",
    "StreamStateMachine",
]

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


class StreamSnapshotError(ValueError):
    """A stream snapshot document is malformed (state left unchanged)."""


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class PubResult:
    """A publish was stored (or recognised as a duplicate of ``seq``)."""

    stream: str
    seq: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ApiErrorResult:
    """A client error, as nats-server's JetStream error JSON carries it."""

    code: int
    err_code: int
    description: str


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """Messages removed by a purge."""

    purged: int


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A message was deleted (``{"success":true}``)."""

    seq: int


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The policy was replaced; ``removed`` messages fell to the new limits."""

    removed: int


@dataclass(frozen=True, slots=True)
class ExpireResult:
    """Messages removed by ``max_age``."""

    removed: int


Result = PubResult | ApiErrorResult | PurgeResult | DeleteResult | PolicyResult | ExpireResult


@dataclass(frozen=True, slots=True)
class NewMessages:
    """Effect: messages up to ``last_seq`` were stored; wake consumers."""

    last_seq: int


@dataclass(frozen=True, slots=True)
class Purged:
    """Effect: a purge (or rollup) removed ``purged`` messages; the stream's
    first sequence is now ``first_seq``."""

    first_seq: int
    purged: int


Effect = NewMessages | Purged


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    """What one applied entry produced.

    Attributes:
        results: One per publish of a ``StreamMsg`` (in order), else one.
        effects: Things the shell should do (data, never performed here).
    """

    results: tuple[Result, ...]
    effects: tuple[Effect, ...] = ()


# --------------------------------------------------------------------------- errors


def _err(code: int, err_code: int, description: str) -> ApiErrorResult:
    return ApiErrorResult(code, err_code, description)


ERR_SEALED = _err(400, 10109, "invalid operation on sealed stream")
ERR_EXPECTED_STREAM = _err(400, 10060, "expected stream does not match")
ERR_ROLLUP_DENIED = _err(500, 10111, "rollup not permitted")
ERR_TTL_INVALID = _err(400, 10165, "invalid per-message TTL")
ERR_TTL_DISABLED = _err(400, 10166, "per-message TTL is disabled")
ERR_HEADER_SIZE = _err(400, 10097, "header size exceeds maximum allowed of 64k")
ERR_MSG_SIZE = _err(400, 10054, "message size exceeds maximum allowed")
ERR_PURGE_DENIED = _err(500, 10110, "stream purge not permitted")
ERR_DELETE_DENIED = _err(500, 10057, "message delete not permitted")
ERR_NO_MESSAGE = _err(500, 10057, "no message found")
ERR_STORE_EOF = _err(500, 10057, "stream store EOF")


def err_wrong_last_seq(seq: int) -> ApiErrorResult:
    """400/10071 ``wrong last sequence: <seq>``."""
    return _err(400, 10071, f"wrong last sequence: {seq}")


def err_wrong_last_msg_id(msg_id: str) -> ApiErrorResult:
    """400/10070 ``wrong last msg ID: <id>``."""
    return _err(400, 10070, f"wrong last msg ID: {msg_id}")


def err_rollup_invalid(value: str) -> ApiErrorResult:
    """500/10111 ``rollup value invalid: "<value>"`` (Go ``%q`` quoting)."""
    return _err(500, 10111, f"rollup value invalid: {go_quote(value)}")


def err_store_failed(e: LimitExceeded) -> ApiErrorResult:
    """A store limit rejection: 400/10054 for size, else 503/10077."""
    if e.err_code == 10054:
        return ERR_MSG_SIZE
    return _err(503, e.err_code, e.description)


def go_quote(s: str) -> str:
    """Quote like Go's ``strconv.Quote`` (what ``%q`` prints) for common input."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif 0xD800 <= o <= 0xDFFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{o - 0xDC00:02x}" if o >= 0xDC80 else "\\ufffd")
        elif not ch.isprintable():
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _parse_seq(value: str) -> int | None:
    """nats-server's ``parseInt64`` of a header: digits only, fits int64."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    n = int(value)
    return n if n < (1 << 63) else None


_GO_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def _parse_go_duration_ns(v: str) -> int | None:
    """A Go ``time.ParseDuration`` subset: ``[-+]?(<number><unit>)+``."""
    i, n, total = 0, len(v), 0.0
    sign = 1
    if i < n and v[i] in "+-":
        sign = -1 if v[i] == "-" else 1
        i += 1
    if i >= n:
        return None
    if v[i:] == "0":
        return 0
    while i < n:
        j = i
        while j < n and (v[j].isdigit() or v[j] == ".") and v[j].isascii():
            j += 1
        num = v[i:j]
        if not num or num == "." or num.count(".") > 1:
            return None
        k = j
        while k < n and not (v[k].isdigit() or v[k] == "."):
            k += 1
        unit = _GO_UNITS_NS.get(v[j:k])
        if unit is None:
            return None
        total += float(num) * unit
        i = k
    return int(sign * total)


def parse_msg_ttl_ns(value: str) -> int | None:
    """``Nats-TTL``: ``never`` (-1), a Go duration or integer seconds, >= 1 s.

    Returns:
        The TTL in ns, -1 for ``never``, or None if invalid.
    """
    if value == "never":
        return -1
    ns = _parse_go_duration_ns(value)
    if ns is None:
        secs = _parse_seq(value)
        if secs is None:
            return None
        ns = secs * 1_000_000_000
    if ns < 1_000_000_000:
        return None
    return ns


# --------------------------------------------------------------------------- machine


class StreamStateMachine:
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
        self._dedupe: dict[str, tuple[int, int]] = {}
        self._last_msg_id = ""
        if store.limits != policy.limits.normalised():
            store.update_limits(policy.limits)

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
        raise OpError(f"not an op: {type(op).__name__}")

    # ------------------------------------------------------------------ publish

    def _apply_stream_msg(self, op: StreamMsg) -> ApplyOutcome:
        results: list[Result] = []
        effects: list[Effect] = []
        stored = 0
        for m in op.msgs:
            r, purged = self._publish(m)
            results.append(r)
            if isinstance(r, PubResult) and not r.duplicate:
                stored = r.seq
            if purged is not None:
                effects.append(purged)
        if stored:
            effects.append(NewMessages(stored))
        return ApplyOutcome(tuple(results), tuple(effects))

    def _publish(self, m: Publish) -> tuple[Result, Purged | None]:
        pol = self._policy
        self._prune_dedupe(m.ts_ns)
        if pol.sealed:
            return ERR_SEALED, None
        hdr = m.headers or b""
        msg_id = ""
        rollup = ""
        if hdr:
            h = parse_headers(hdr, strict=False)
            msg_id = h.get(MSG_ID) or ""
            checked = self._check_headers(h, m, msg_id)
            if checked is not None:
                return checked, None
            rollup = h.get(ROLLUP) or ""
        if len(hdr) > HEADER_BYTES_MAX:
            return ERR_HEADER_SIZE, None
        max_size = pol.limits.max_msg_size
        if max_size >= 0 and len(hdr) + len(m.payload) > max_size:
            return ERR_MSG_SIZE, None
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

    def _check_headers(self, h: Headers, m: Publish, msg_id: str) -> Result | None:
        """Every header rule before storing; a result ends the publish."""
        pol = self._policy
        expected = h.get(EXPECTED_STREAM)
        if expected and expected != pol.name:
            return ERR_EXPECTED_STREAM
        if msg_id:
            dup = self._dedupe.get(msg_id)
            if dup is not None and m.ts_ns - dup[1] < pol.duplicate_window_ns:
                return PubResult(pol.name, dup[0], duplicate=True)
        v = h.get(EXPECTED_LAST_SUBJ_SEQ)
        if v:
            want = _parse_seq(v)
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
            if _parse_seq(v) != last:
                return err_wrong_last_seq(last)
        v = h.get(EXPECTED_LAST_MSG_ID)
        if v and v != self._last_msg_id:
            return err_wrong_last_msg_id(self._last_msg_id)
        v = h.get(ROLLUP)
        if v:
            if not pol.allow_rollup_hdrs or pol.deny_purge:
                return ERR_ROLLUP_DENIED
            if v not in ("sub", "all"):
                return err_rollup_invalid(v)
        v = h.get(MSG_TTL)
        if v:
            ttl = parse_msg_ttl_ns(v)
            if ttl is None:
                return ERR_TTL_INVALID
            if not pol.allow_msg_ttl:
                return ERR_TTL_DISABLED
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
            del d[k]

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
        removed = self._store.update_limits(op.policy.limits)
        self._policy = op.policy
        if op.policy.duplicate_window_ns <= 0:
            self._dedupe.clear()
        return ApplyOutcome((PolicyResult(removed),))

    def _apply_expire(self, op: Expire) -> ApplyOutcome:
        n = self._store.expire(op.now_ns)
        self._prune_dedupe(op.now_ns)
        return ApplyOutcome((ExpireResult(n),))

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
        self._store.update_limits(policy.limits)
        self._policy = policy
        self._last_msg_id = last_id
        self._dedupe = dedupe


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
