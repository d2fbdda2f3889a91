"""Applying messages copied from other streams: ``MirrorMsg`` and ``SourcedMsg``.

Theory of operation
-------------------
A mirror or a sourcing stream is fed by a shell task (``cluster.sourcing``)
that reads the origin and proposes these ops through the stream's own group,
so a copied message is decided in apply and made durable exactly like a
publish (DESIGN rule 2).  What differs from a publish, as in nats-server's
``processJetStreamMsg`` with ``sourced`` set:

* **Mirror** (``MirrorMsg``): the message keeps its origin sequence and
  timestamp.  A message at or below the mirror's last sequence is already
  there (answered as a duplicate of that sequence); a message beyond the next
  sequence first skips the gap (``StreamStore.skip``: the origin deleted,
  expired or filtered those).  A mirror has no dedupe window and checks no
  ``Nats-Expected-*`` headers (the proposer removed them).
* **Source** (``SourcedMsg``): the message gets the next sequence of this
  stream and a fresh timestamp; ``Nats-Msg-Id`` dedupe applies (a duplicate
  is not an error: the feed moves on); a rollup is honoured without the
  ``allow_rollup_hdrs`` permission and ``Nats-TTL`` without ``allow_msg_ttl``
  (the origin already accepted them).
* Both: sealed (10109), header size (10097), ``max_msg_size`` (10054) and
  the store's discard-new limits (10077) still refuse.  A batch stops at its
  first refused message: later messages would leave a hole a feed could never
  fill, so the outcome's results end there and the feed retries from it.

Results are ``PubResult`` (``duplicate`` for an already-present or deduped
message) or ``ApiErrorResult``; effects are ``NewMessages`` and ``Purged`` as
for publishes.  ``SourcingApply`` is a mixin of ``StreamStateMachine``; it
uses the machine's store, policy and dedupe table.
"""

from __future__ import annotations

from collections import OrderedDict

from cluster.headers import parse_headers
from cluster.ops import MirrorMsg, Publish, SourcedMsg, StreamPolicy
from cluster.stream_fsm.results import (
    ERR_HEADER_SIZE,
    ERR_MSG_SIZE,
    ERR_SEALED,
    ApplyOutcome,
    Effect,
    NewMessages,
    PubResult,
    Purged,
    Result,
    err_rollup_invalid,
    err_store_failed,
)
from store.api import StreamStore
from store.errors import LimitExceeded

__all__ = ["SourcingApply"]

HEADER_BYTES_MAX = 65535
MSG_ID = "Nats-Msg-Id"
ROLLUP = "Nats-Rollup"


class SourcingApply:
    """Apply of ``MirrorMsg``/``SourcedMsg`` (mixed into ``StreamStateMachine``)."""

    _store: StreamStore
    _policy: StreamPolicy
    _dedupe: OrderedDict[str, tuple[int, int]]
    _last_msg_id: str

    def _prune_dedupe(self, now_ns: int) -> None:  # provided by the machine
        raise NotImplementedError

    # ------------------------------------------------------------------ mirror

    def _apply_mirror_msg(self, op: MirrorMsg) -> ApplyOutcome:
        pol = self._policy
        if pol.sealed:
            return ApplyOutcome((ERR_SEALED,))
        store = self._store
        last = store.state().last_seq
        if op.skip_to > last:
            store.skip(op.skip_to)
            last = op.skip_to
        results: list[Result] = []
        effects: list[Effect] = []
        stored = 0
        for m in op.msgs:
            if m.seq <= last:
                results.append(PubResult(pol.name, m.seq, duplicate=True))
                continue
            if m.seq > last + 1:
                store.skip(m.seq - 1)
            r, purged = self._store_copy(m.subject, m.headers or b"", m.payload, m.ts_ns, m.seq)
            results.append(r)
            if purged is not None:
                effects.append(purged)
            if not isinstance(r, PubResult):
                break
            last = stored = r.seq
        if stored:
            effects.append(NewMessages(stored))
        return ApplyOutcome(tuple(results), tuple(effects))

    # ------------------------------------------------------------------ sources

    def _apply_sourced_msg(self, op: SourcedMsg) -> ApplyOutcome:
        batched = self._sourced_batch(op.msgs) if len(op.msgs) > 1 else None
        if batched is not None:
            return batched
        results: list[Result] = []
        effects: list[Effect] = []
        stored = 0
        for m in op.msgs:
            r, purged = self._sourced(m)
            results.append(r)
            if purged is not None:
                effects.append(purged)
            if not isinstance(r, PubResult):
                break
            if not r.duplicate:
                stored = r.seq
        if stored:
            effects.append(NewMessages(stored))
        return ApplyOutcome(tuple(results), tuple(effects))

    def _sourced_batch(self, msgs: tuple[Publish, ...]) -> ApplyOutcome | None:
        """``_sourced`` of each of ``msgs`` in one ``StreamStore.append_batch`` when no rule
        can refuse or hold back any of them (not sealed, no count, byte, per-subject or size
        limit, no ``Nats-Msg-Id`` nor ``Nats-Rollup``, headers within bounds: the usual
        catch-up of a source); the same results, effects and store state.  None: go one
        by one."""
        pol = self._policy
        lim = pol.limits
        if (
            pol.sealed
            or lim.max_msgs > 0
            or lim.max_bytes > 0
            or lim.max_msgs_per_subject > 0
            or lim.max_msg_size >= 0
        ):
            return None
        for m in msgs:
            hdr = m.headers
            if hdr and (len(hdr) > HEADER_BYTES_MAX or _MSG_ID_B in hdr or _ROLLUP_B in hdr):
                return None
        if self._dedupe:
            # pruning by each message's time in turn leaves what pruning by the latest
            # leaves (the table's front only ever shrinks)
            self._prune_dedupe(max(m.ts_ns for m in msgs))
        store = self._store
        seq = store.state().last_seq + 1
        k, err = store.append_batch(
            [(m.subject, m.headers or b"", m.payload, m.ts_ns) for m in msgs]
        )
        if err is not None or k != len(msgs):  # no limit: cannot happen
            raise RuntimeError(f"append_batch refused a message without limits: {err!r}")
        self._last_msg_id = ""
        name = pol.name
        results = tuple(PubResult(name, s) for s in range(seq, seq + k))
        return ApplyOutcome(results, (NewMessages(seq + k - 1),))

    def _sourced(self, m: Publish) -> tuple[Result, Purged | None]:
        pol = self._policy
        self._prune_dedupe(m.ts_ns)
        if pol.sealed:
            return ERR_SEALED, None
        ids = _id_rollup(m.headers) if m.headers else ("", "")
        if ids[0]:
            dup = self._dedupe.get(ids[0])
            if dup is not None and m.ts_ns - dup[1] < pol.duplicate_window_ns:
                return PubResult(pol.name, dup[0], duplicate=True), None
        return self._store_copy(m.subject, m.headers or b"", m.payload, m.ts_ns, None, ids)

    # ------------------------------------------------------------------ both

    def _store_copy(
        self,
        subject: str,
        hdr: bytes,
        payload: bytes,
        ts_ns: int,
        seq: int | None,
        ids: tuple[str, str] | None = None,
    ) -> tuple[Result, Purged | None]:
        """Size checks, append (at ``seq`` for a mirror), dedupe entry, rollup
        (``ids``: the block's ``Nats-Msg-Id`` and ``Nats-Rollup``, when known)."""
        pol = self._policy
        msg_id = rollup = ""
        if hdr:
            msg_id, rollup = ids if ids is not None else _id_rollup(hdr)
            if rollup and rollup not in ("sub", "all"):
                return err_rollup_invalid(rollup), None
        if len(hdr) > HEADER_BYTES_MAX:
            return ERR_HEADER_SIZE, None
        max_size = pol.limits.max_msg_size
        if max_size >= 0 and len(hdr) + len(payload) > max_size:
            return ERR_MSG_SIZE, None
        try:
            new_seq, _ = self._store.append(subject, hdr, payload, ts_ns, seq=seq)
        except LimitExceeded as e:
            return err_store_failed(e), None
        if msg_id and pol.duplicate_window_ns > 0:
            self._dedupe.pop(msg_id, None)
            self._dedupe[msg_id] = (new_seq, ts_ns)
        self._last_msg_id = msg_id
        purged = None
        if rollup:
            n = self._store.purge(filter=subject if rollup == "sub" else None, keep=1)
            purged = Purged(self._store.state().first_seq, n)
        return PubResult(pol.name, new_seq), purged


_MSG_ID_B = MSG_ID.encode()
_ROLLUP_B = ROLLUP.encode()


def _id_rollup(hdr: bytes) -> tuple[str, str]:
    """``Nats-Msg-Id`` and ``Nats-Rollup`` of a header block (``""`` when absent), as
    ``parse_headers(hdr, strict=False)`` gives them; a block naming neither (a sourced
    copy's usual ``Nats-Stream-Source`` alone) is not parsed (keys are case-sensitive)."""
    if _MSG_ID_B not in hdr and _ROLLUP_B not in hdr:
        return "", ""
    h = parse_headers(hdr, strict=False)
    return h.get(MSG_ID) or "", h.get(ROLLUP) or ""
