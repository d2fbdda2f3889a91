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
sealed (10109); ``Nats-Expected-Stream`` (10060); a valid ``Nats-TTL`` on a
stream without ``allow_msg_ttl`` (10166); ``Nats-Expected-Last-Subject-
Sequence`` [``-Subject``] (10071); ``Nats-Expected-Last-Sequence`` (10071);
a client's ``Nats-Stream-Source`` header (10227: only sourcing stores it);
``Nats-Msg-Id`` dedupe (a duplicate answers with the original seq);
``Nats-Expected-Last-Msg-Id`` (10070); ``Nats-Rollup`` (10111); header size
(10097); ``max_msg_size`` (10054); an invalid ``Nats-TTL`` (10165); then
``StreamStore.append`` (``seq = last_seq + 1``; discard-new limits 10077),
then the rollup purge.  Header names are matched case-sensitively.  (The
account's storage limit, 10023, is the proposer's check before all this:
``node.jetstream.resources``.)

Subject delete markers (``StreamPolicy.subject_delete_marker_ttl_ns``):
``Expire`` replaces the last expiring message of a subject with a marker
message and publishes with a shorter ``Nats-TTL`` get the marker TTL
(``markers``).

Per-message TTLs: the store honours ``Nats-TTL`` when its limits say so
(``store_limits``: ``allow_msg_ttl`` becomes ``StreamLimits.msg_ttl``) and
reports the next deadline; the shell proposes ``Expire(now_ns)`` when it is
due, and ``apply`` removes what the store says is expired at that ``now``
(``max_age`` and TTLs alike), so every replica removes the same messages.

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
With ``report_stored`` set (streams that republish), every stored publish
also yields ``Stored`` (the message and its subject's previous last sequence,
looked up before the append); the shell republishes from it once durable.

Retention (interest/workqueue): ``AckRemove`` removes messages the
consumers no longer need, regardless of ``deny_delete``/``deny_purge``/
``sealed``; ``Interest`` gives the machine its consumers' filters, after
which a publish nobody is interested in takes its sequence without being
stored (``store.skip``), decided in log order.  The filters are not part of
the snapshot document: the shell proposes them again at start.

Modules: ``machine`` (the state machine and its snapshot document),
``results`` (result, effect and error values), ``parse`` (header values),
``markers`` (subject delete markers).
"""

from cluster.ops import StreamPolicy
from cluster.stream_fsm.machine import (
    HEADER_BYTES_MAX,
    SNAPSHOT_VERSION,
    StreamSnapshotError,
    StreamStateMachine,
    store_limits,
)
from cluster.stream_fsm.parse import parse_msg_ttl_ns, parse_seq
from cluster.stream_fsm.results import (
    AckRemoveResult,
    ApiErrorResult,
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
    go_quote,
)

__all__ = [
    "HEADER_BYTES_MAX",
    "SNAPSHOT_VERSION",
    "AckRemoveResult",
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
    "Stored",
    "StreamPolicy",
    "StreamSnapshotError",
    "StreamStateMachine",
    "go_quote",
    "parse_msg_ttl_ns",
    "parse_seq",
    "store_limits",
]
