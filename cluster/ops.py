"""Replicated stream ops and their explicit cbor2 encoding.

Theory of operation
-------------------
Every change to a stream travels through its Raft group as one entry holding
one *op*.  An op is a frozen dataclass; ``encode_op`` turns it into bytes and
``decode_op`` turns bytes back into the very same op, or raises
``OpDecodeError`` -- nothing else ever escapes ``decode_op``, and an op it
returns is fully checked, so ``apply`` never trips over a bad field later.

Rules:

* Op codes (``OpCode``, in ``cluster.opfields`` with the errors and field
  checks every op uses) are an ``IntEnum`` with explicit values: append
  only, never renumber, never reuse.  1..31 are stream ops, 32..63 consumer
  ops (``cluster.consumer_ops``, replicated inside the stream's group; this
  module encodes and decodes them too and re-exports their names).
* Encoding (``FORMAT_VERSION`` 1) is a cbor2 array ``[version, code, body]``;
  the body layout is fixed per code (see ``_body`` and the ``_dec_*``
  functions; ``consumer_body`` and ``CONSUMER_DECODERS`` for consumer ops).
  A new field means a new format version; decoders reject versions they do
  not know.  No pickle, no cbor tags, no trailing bytes.
* Everything that depends on time is carried in the op: a publish carries
  the proposer's wall-clock ``ts_ns``; ``Expire`` carries the leader's
  ``now_ns`` (DESIGN rule 2: ``apply`` never reads a clock).
* A publish carries no reply subject: the reply is the proposer's business.
  Several publishes batch into one ``StreamMsg`` entry and ``apply`` returns
  one result per publish, in order.
* ``StreamPolicy`` -- what the stream state machine needs of a stream's
  configuration -- lives here because ``UpdatePolicy`` carries it.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import cbor2

from cluster.consumer_ops import (
    CONSUMER_DECODERS,
    CONSUMER_ENTRY_TYPES,
    AckItem,
    AckKind,
    ConsumerAcked,
    ConsumerAcks,
    ConsumerAssign,
    ConsumerCreated,
    ConsumerDelivered,
    ConsumerOp,
    ConsumerPolicy,
    ConsumerPolicyUpdate,
    ConsumerRemove,
    ConsumerStreamFirst,
    ConsumerTimeouts,
    consumer_body,
)
from cluster.opfields import (
    INT64_MAX,
    UINT64_MAX,
    OpCode,
    OpDecodeError,
    OpError,
    check_array,
    check_bool,
    check_bytes,
    check_int,
    check_opt_int,
    check_str,
)
from store.limits import Discard, StreamLimits

__all__ = [
    "ACK_REMOVE_SEQS_MAX",
    "CONSUMER_ENTRY_TYPES",
    "FORMAT_VERSION",
    "INT64_MAX",
    "PUBLISHES_PER_ENTRY_MAX",
    "AckItem",
    "AckKind",
    "AckRemove",
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
    "DeleteMsg",
    "Entry",
    "Expire",
    "Interest",
    "MirrorMsg",
    "Mirrored",
    "Op",
    "OpCode",
    "OpDecodeError",
    "OpError",
    "Publish",
    "Purge",
    "SourcedMsg",
    "StreamMsg",
    "StreamPolicy",
    "UpdatePolicy",
    "decode_any",
    "decode_op",
    "decode_policy",
    "encode_op",
    "encode_policy",
]

FORMAT_VERSION = 1
"""Version of the entry layout written by ``encode_op``."""

PUBLISHES_PER_ENTRY_MAX = 4096
"""Most publishes one ``StreamMsg`` entry may carry."""

DEFAULT_DUPLICATE_WINDOW_NS = 120 * 1_000_000_000
"""nats-server's default ``duplicate_window`` (2 minutes)."""


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True, slots=True)
class StreamPolicy:
    """Exactly what the stream state machine's ``apply`` needs of a config.

    The cluster model's ``StreamConfig`` converts to this; nothing else of the
    config (subjects, storage, replicas, placement, no_ack, ...) matters to
    ``apply``.

    Attributes:
        name: Stream name (``Nats-Expected-Stream``, PubAck ``stream``).
        limits: Retention limits, including ``max_msg_size``, ``discard`` and
            ``discard_new_per_subject``; enforced by the store.
        duplicate_window_ns: ``Nats-Msg-Id`` dedupe window; 0 disables
            dedupe (a mirror has none).
        allow_rollup_hdrs: ``Nats-Rollup`` is permitted.
        sealed: No publish, purge or delete is permitted (10109).
        deny_delete: ``MSG.DELETE`` refused (10057).
        deny_purge: ``PURGE`` and rollups refused (10110 / 10111).
        allow_msg_ttl: ``Nats-TTL`` is permitted (otherwise 10166) and honoured:
            the store expires such messages (``store.ttl``; ``Expire`` ops).
        subject_delete_marker_ttl_ns: > 0: when ``Expire`` removes the last
            message of a subject, a delete marker takes its place (see
            ``cluster.stream_fsm.markers``); its ``Nats-TTL`` is this many
            whole seconds, and smaller per-message TTLs are raised to it.
            0 = no markers.  Encoded only when set, so the encoding of a
            policy without markers is the one older nodes wrote and read.
    """

    name: str
    limits: StreamLimits = field(default_factory=StreamLimits)
    duplicate_window_ns: int = DEFAULT_DUPLICATE_WINDOW_NS
    allow_rollup_hdrs: bool = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl_ns: int = 0

    def __post_init__(self) -> None:
        check_str("name", self.name)
        if not isinstance(self.limits, StreamLimits):
            raise OpError("limits must be a StreamLimits")
        lim = self.limits
        for fname in ("max_msgs", "max_bytes", "max_msgs_per_subject", "max_msg_size"):
            check_int(fname, getattr(lim, fname), -INT64_MAX, INT64_MAX)
        check_int("max_age_ns", lim.max_age_ns, -INT64_MAX, INT64_MAX)
        if not isinstance(lim.discard, Discard):
            raise OpError("discard must be a Discard")
        check_bool("discard_new_per_subject", lim.discard_new_per_subject)
        check_int("duplicate_window_ns", self.duplicate_window_ns, 0, INT64_MAX)
        for fname in ("allow_rollup_hdrs", "sealed", "deny_delete", "deny_purge", "allow_msg_ttl"):
            check_bool(fname, getattr(self, fname))
        check_int("subject_delete_marker_ttl_ns", self.subject_delete_marker_ttl_ns, 0, INT64_MAX)


_POLICY_KEYS = (
    "name",
    "max_msgs",
    "max_bytes",
    "max_age_ns",
    "max_msgs_per_subject",
    "max_msg_size",
    "discard",
    "discard_new_per_subject",
    "duplicate_window_ns",
    "allow_rollup_hdrs",
    "sealed",
    "deny_delete",
    "deny_purge",
    "allow_msg_ttl",
)
_POLICY_OPTIONAL_KEYS = ("subject_delete_marker_ttl_ns",)
"""Keys added later: written only when not the default, optional on decode."""


def encode_policy(p: StreamPolicy) -> dict[str, Any]:
    """The cbor-ready map of a policy (also used inside stream snapshots)."""
    lim = p.limits
    m: dict[str, Any] = {
        "name": p.name,
        "max_msgs": lim.max_msgs,
        "max_bytes": lim.max_bytes,
        "max_age_ns": lim.max_age_ns,
        "max_msgs_per_subject": lim.max_msgs_per_subject,
        "max_msg_size": lim.max_msg_size,
        "discard": lim.discard.value,
        "discard_new_per_subject": lim.discard_new_per_subject,
        "duplicate_window_ns": p.duplicate_window_ns,
        "allow_rollup_hdrs": p.allow_rollup_hdrs,
        "sealed": p.sealed,
        "deny_delete": p.deny_delete,
        "deny_purge": p.deny_purge,
        "allow_msg_ttl": p.allow_msg_ttl,
    }
    if p.subject_delete_marker_ttl_ns:
        m["subject_delete_marker_ttl_ns"] = p.subject_delete_marker_ttl_ns
    return m


def decode_policy(m: object) -> StreamPolicy:
    """Inverse of ``encode_policy``.

    Raises:
        OpError: not a map with exactly the policy keys, or a bad field.
    """
    if type(m) is not dict:
        raise OpError("policy must be a map")
    keys = set(m)
    if not keys >= set(_POLICY_KEYS) or not keys <= set(_POLICY_KEYS + _POLICY_OPTIONAL_KEYS):
        raise OpError("policy has wrong keys")
    discard = m["discard"]
    if discard not in ("old", "new") or type(discard) is not str:
        raise OpError(f"bad discard {discard!r}")
    limits = StreamLimits(
        max_msgs=m["max_msgs"],
        max_bytes=m["max_bytes"],
        max_age_ns=m["max_age_ns"],
        max_msgs_per_subject=m["max_msgs_per_subject"],
        max_msg_size=m["max_msg_size"],
        discard=Discard(discard),
        discard_new_per_subject=m["discard_new_per_subject"],
    )
    return StreamPolicy(
        name=m["name"],
        limits=limits,
        duplicate_window_ns=m["duplicate_window_ns"],
        allow_rollup_hdrs=m["allow_rollup_hdrs"],
        sealed=m["sealed"],
        deny_delete=m["deny_delete"],
        deny_purge=m["deny_purge"],
        allow_msg_ttl=m["allow_msg_ttl"],
        subject_delete_marker_ttl_ns=m.get("subject_delete_marker_ttl_ns", 0),
    )


# --------------------------------------------------------------------------- ops


def _check_message(subject: object, headers: object, payload: object, ts_ns: object) -> None:
    """The fields a stored message carries (``Publish``, ``Mirrored``)."""
    check_str("subject", subject)
    if headers is not None:
        check_bytes("headers", headers)
    check_bytes("payload", payload)
    check_int("ts_ns", ts_ns, 0, INT64_MAX)


def _check_publishes(msgs: object, op: str, noun: str) -> None:
    """A tuple of 1 .. ``PUBLISHES_PER_ENTRY_MAX`` ``Publish`` values."""
    if type(msgs) is not tuple:
        raise OpError("msgs must be a tuple")
    if not 1 <= len(msgs) <= PUBLISHES_PER_ENTRY_MAX:
        raise OpError(f"a {op} carries 1..{PUBLISHES_PER_ENTRY_MAX} {noun}")
    for m in msgs:
        if not isinstance(m, Publish):
            raise OpError("msgs must hold Publish values")


@dataclass(frozen=True, slots=True)
class Publish:
    """One message to store (an element of ``StreamMsg``).

    Attributes:
        subject: Literal subject (non-empty).
        headers: Raw header block as the client sent it, or None.
        payload: Body.
        ts_ns: The proposer's wall-clock time, ns since the epoch (>= 0).
    """

    subject: str
    headers: bytes | None
    payload: bytes
    ts_ns: int

    def __post_init__(self) -> None:
        _check_message(self.subject, self.headers, self.payload, self.ts_ns)

    @classmethod
    def trusted(cls, subject: str, headers: bytes | None, payload: bytes, ts_ns: int) -> Publish:
        """A ``Publish`` the server builds from values it has already checked
        (the protocol parser's subject and bytes, its own clock): the same
        value without ``__post_init__``'s per-field checks.  Decoding an
        entry keeps using the validating constructor."""
        return publish_trusted(subject, headers, payload, ts_ns)


_object_new = object.__new__
# the slots' own setters: what ``object.__setattr__`` ends up calling, without its lookup
_set_subject = Publish.__dict__["subject"].__set__
_set_headers = Publish.__dict__["headers"].__set__
_set_payload = Publish.__dict__["payload"].__set__
_set_ts_ns = Publish.__dict__["ts_ns"].__set__


def publish_trusted(subject: str, headers: bytes | None, payload: bytes, ts_ns: int) -> Publish:
    """``Publish.trusted`` as a plain function (the publish path's per-message call)."""
    m = _object_new(Publish)
    _set_subject(m, subject)
    _set_headers(m, headers)
    _set_payload(m, payload)
    _set_ts_ns(m, ts_ns)
    return m


@dataclass(frozen=True, slots=True)
class StreamMsg:
    """One or a batch of publishes (1 .. ``PUBLISHES_PER_ENTRY_MAX``)."""

    code: ClassVar[OpCode] = OpCode.STREAM_MSG
    msgs: tuple[Publish, ...]

    def __post_init__(self) -> None:
        _check_publishes(self.msgs, "StreamMsg", "publishes")


@dataclass(frozen=True, slots=True)
class Purge:
    """``$JS.API.STREAM.PURGE``: ``filter`` / ``seq`` (purge below) / ``keep``.

    ``seq`` and ``keep`` together are the API layer's 10003; if both arrive
    the store decides as nats-server's ``PurgeEx`` does.
    """

    code: ClassVar[OpCode] = OpCode.PURGE
    filter: str | None = None
    seq: int | None = None
    keep: int | None = None

    def __post_init__(self) -> None:
        if self.filter is not None:
            check_str("filter", self.filter, empty_ok=True)
        check_opt_int("seq", self.seq, 0, UINT64_MAX)
        check_opt_int("keep", self.keep, 0, UINT64_MAX)


@dataclass(frozen=True, slots=True)
class DeleteMsg:
    """``$JS.API.STREAM.MSG.DELETE``; ``erase`` is ``not no_erase``."""

    code: ClassVar[OpCode] = OpCode.DELETE_MSG
    seq: int
    erase: bool = True

    def __post_init__(self) -> None:
        check_int("seq", self.seq, 0, UINT64_MAX)
        check_bool("erase", self.erase)


@dataclass(frozen=True, slots=True)
class UpdatePolicy:
    """Replace the stream's policy (a stream update); limits apply at once."""

    code: ClassVar[OpCode] = OpCode.UPDATE_POLICY
    policy: StreamPolicy

    def __post_init__(self) -> None:
        if not isinstance(self.policy, StreamPolicy):
            raise OpError("policy must be a StreamPolicy")


@dataclass(frozen=True, slots=True)
class Expire:
    """Remove messages past ``max_age`` at the leader's clock ``now_ns``."""

    code: ClassVar[OpCode] = OpCode.EXPIRE
    now_ns: int

    def __post_init__(self) -> None:
        check_int("now_ns", self.now_ns, 0, INT64_MAX)


@dataclass(frozen=True, slots=True)
class Mirrored:
    """One origin message for a mirror (an element of ``MirrorMsg``).

    Attributes:
        seq: The origin's sequence; the mirror stores the message under it.
        subject: Subject, after the mirror's subject transforms.
        headers: Raw header block (``Nats-Expected-*``/``Nats-Batch-*``
            already removed by the proposer), or None.
        payload: Body.
        ts_ns: The origin's timestamp (a mirror keeps it).
    """

    seq: int
    subject: str
    headers: bytes | None
    payload: bytes
    ts_ns: int

    def __post_init__(self) -> None:
        check_int("seq", self.seq, 1, UINT64_MAX)
        _check_message(self.subject, self.headers, self.payload, self.ts_ns)


@dataclass(frozen=True, slots=True)
class MirrorMsg:
    """Messages copied from a mirror's origin, in origin order.

    ``skip_to`` (0 = none) first moves the mirror's last sequence forward
    (the origin lost what lies between); then each message is stored under
    its origin sequence, skipping any gap before it.  Messages at or below
    the mirror's last sequence are ignored.  Up to
    ``PUBLISHES_PER_ENTRY_MAX`` messages; none at all with a ``skip_to``.
    """

    code: ClassVar[OpCode] = OpCode.MIRROR_MSG
    msgs: tuple[Mirrored, ...]
    skip_to: int = 0

    def __post_init__(self) -> None:
        if type(self.msgs) is not tuple:
            raise OpError("msgs must be a tuple")
        if len(self.msgs) > PUBLISHES_PER_ENTRY_MAX:
            raise OpError(f"a MirrorMsg carries at most {PUBLISHES_PER_ENTRY_MAX} messages")
        check_int("skip_to", self.skip_to, 0, UINT64_MAX)
        if not self.msgs and not self.skip_to:
            raise OpError("a MirrorMsg carries messages or a skip")
        prev = self.skip_to
        for m in self.msgs:
            if not isinstance(m, Mirrored):
                raise OpError("msgs must hold Mirrored values")
            if m.seq <= prev:
                raise OpError("mirrored sequences must increase")
            prev = m.seq


@dataclass(frozen=True, slots=True)
class SourcedMsg:
    """Messages copied from a source stream (1 .. ``PUBLISHES_PER_ENTRY_MAX``).

    Each is stored like a publish (own sequence, dedupe by ``Nats-Msg-Id``),
    but its headers were prepared by the proposer -- ``Nats-Expected-*`` and
    ``Nats-Batch-*`` removed, ``Nats-Stream-Source`` set -- and it is exempt
    from the checks a source already passed (rollup permission, TTL
    permission).  ``ts_ns`` is the proposer's clock, as for a publish.
    """

    code: ClassVar[OpCode] = OpCode.SOURCED_MSG
    msgs: tuple[Publish, ...]

    def __post_init__(self) -> None:
        _check_publishes(self.msgs, "SourcedMsg", "messages")


@dataclass(frozen=True, slots=True)
class AckRemove:
    """Interest/workqueue retention: remove messages no consumer needs any more.

    Proposed by the stream's retention shell (``cluster.retention``) after
    consumer acks, deliveries (ack none) and consumer deletions.  Applied
    regardless of ``deny_delete``, ``deny_purge`` and ``sealed``, as
    nats-server removes acknowledged messages: first everything below
    ``below`` (0 = nothing; the last consumer of an interest stream went),
    then each of ``seqs`` still stored; sequences already gone are ignored.
    Messages are not erased (no overwrite), as nats-server's ack removal.
    """

    code: ClassVar[OpCode] = OpCode.ACK_REMOVE
    seqs: tuple[int, ...]
    below: int = 0

    def __post_init__(self) -> None:
        if type(self.seqs) is not tuple:
            raise OpError("seqs must be a tuple")
        if len(self.seqs) > ACK_REMOVE_SEQS_MAX:
            raise OpError(f"an AckRemove carries at most {ACK_REMOVE_SEQS_MAX} sequences")
        for s in self.seqs:
            check_int("seq", s, 1, UINT64_MAX)
        check_int("below", self.below, 0, UINT64_MAX)


@dataclass(frozen=True, slots=True)
class Interest:
    """Interest retention: the subject filters of the stream's consumers.

    ``(">",)`` when some consumer is unfiltered; ``()`` when there is none.
    From this op on, a publish whose subject no filter matches takes its
    sequence but is not stored (nats-server's ``SkipMsgNoInterest``): the
    decision is made in apply, in log order with the publishes.  Only
    interest streams propose it (after each consumer change and at start).
    """

    code: ClassVar[OpCode] = OpCode.INTEREST
    filters: tuple[str, ...]

    def __post_init__(self) -> None:
        if type(self.filters) is not tuple:
            raise OpError("filters must be a tuple")
        for f in self.filters:
            check_str("filter", f)


ACK_REMOVE_SEQS_MAX = 65536
"""Most sequences one ``AckRemove`` carries."""

Op = (
    StreamMsg
    | Purge
    | DeleteMsg
    | UpdatePolicy
    | Expire
    | MirrorMsg
    | SourcedMsg
    | AckRemove
    | Interest
)
"""Every op a stream group replicates."""


# --------------------------------------------------------------------------- codec


Entry = Op | ConsumerOp | ConsumerAssign | ConsumerRemove
"""Everything a stream group's entry may hold."""


def _body(op: Entry) -> object:
    if isinstance(op, StreamMsg):
        return [[m.subject, m.headers, m.payload, m.ts_ns] for m in op.msgs]
    if isinstance(op, Purge):
        return [op.filter, op.seq, op.keep]
    if isinstance(op, DeleteMsg):
        return [op.seq, op.erase]
    if isinstance(op, UpdatePolicy):
        return encode_policy(op.policy)
    if isinstance(op, Expire):
        return [op.now_ns]
    if isinstance(op, MirrorMsg):
        return [op.skip_to, [[m.seq, m.subject, m.headers, m.payload, m.ts_ns] for m in op.msgs]]
    if isinstance(op, SourcedMsg):
        return [[m.subject, m.headers, m.payload, m.ts_ns] for m in op.msgs]
    if isinstance(op, AckRemove):
        return [list(op.seqs), op.below]
    if isinstance(op, Interest):
        return list(op.filters)
    if isinstance(op, CONSUMER_ENTRY_TYPES):
        return consumer_body(op)
    raise OpError(f"not an op: {type(op).__name__}")


def encode_op(op: Entry) -> bytes:
    """Encode an op as one Raft entry.

    Raises:
        OpError: ``op`` is not an op.
    """
    body = _body(op)
    return cbor2.dumps([FORMAT_VERSION, int(op.code), body])


# the slots of a Publish and a StreamMsg, set directly by the decoder (it has
# checked every field itself: the validating constructors cost more than the
# cbor decoding of the entry, on every replica, for every message)
_set_subject = Publish.__dict__["subject"].__set__
_set_headers = Publish.__dict__["headers"].__set__
_set_payload = Publish.__dict__["payload"].__set__
_set_ts = Publish.__dict__["ts_ns"].__set__
_set_msgs = StreamMsg.__dict__["msgs"].__set__


def _dec_stream_msg(body: object) -> StreamMsg:
    """The same checks as ``Publish(...)`` and ``StreamMsg(...)``, in one pass."""
    if type(body) is not list or not 1 <= len(body) <= PUBLISHES_PER_ENTRY_MAX:
        raise OpError("stream_msg body must be a non-empty array")
    new = _object_new
    msgs = []
    for item in body:
        if type(item) is not list or len(item) != 4:
            raise OpError("publish must be an array of 4")
        subject, headers, payload, ts_ns = item
        if (
            type(subject) is not str
            or not subject
            or type(payload) is not bytes
            or (headers is not None and type(headers) is not bytes)
            or type(ts_ns) is not int
            or not 0 <= ts_ns <= INT64_MAX
        ):
            _check_message(subject, headers, payload, ts_ns)  # raises its precise error
        m = new(Publish)
        _set_subject(m, subject)
        _set_headers(m, headers)
        _set_payload(m, payload)
        _set_ts(m, ts_ns)
        msgs.append(m)
    op = new(StreamMsg)
    _set_msgs(op, tuple(msgs))
    return op


def _dec_purge(body: object) -> Purge:
    filt, seq, keep = check_array("purge", body, 3)
    return Purge(filt, seq, keep)


def _dec_delete(body: object) -> DeleteMsg:
    seq, erase = check_array("delete_msg", body, 2)
    return DeleteMsg(seq, erase)


def _dec_update(body: object) -> UpdatePolicy:
    return UpdatePolicy(decode_policy(body))


def _dec_expire(body: object) -> Expire:
    (now_ns,) = check_array("expire", body, 1)
    return Expire(now_ns)


def _dec_mirror_msg(body: object) -> MirrorMsg:
    skip_to, items = check_array("mirror_msg", body, 2)
    if type(items) is not list or len(items) > PUBLISHES_PER_ENTRY_MAX:
        raise OpError("mirror_msg messages must be an array")
    msgs = []
    for item in items:
        seq, subject, headers, payload, ts_ns = check_array("mirrored", item, 5)
        msgs.append(Mirrored(seq, subject, headers, payload, ts_ns))
    return MirrorMsg(tuple(msgs), skip_to)


def _dec_sourced_msg(body: object) -> SourcedMsg:
    return SourcedMsg(_dec_stream_msg(body).msgs)


def _dec_ack_remove(body: object) -> AckRemove:
    seqs, below = check_array("ack_remove", body, 2)
    if type(seqs) is not list:
        raise OpError("seqs must be an array")
    return AckRemove(tuple(seqs), below)


def _dec_interest(body: object) -> Interest:
    if type(body) is not list:
        raise OpError("interest body must be an array")
    return Interest(tuple(body))


_DECODERS: dict[int, Callable[[object], Entry]] = {
    OpCode.STREAM_MSG: _dec_stream_msg,
    OpCode.PURGE: _dec_purge,
    OpCode.DELETE_MSG: _dec_delete,
    OpCode.UPDATE_POLICY: _dec_update,
    OpCode.EXPIRE: _dec_expire,
    OpCode.MIRROR_MSG: _dec_mirror_msg,
    OpCode.SOURCED_MSG: _dec_sourced_msg,
    OpCode.ACK_REMOVE: _dec_ack_remove,
    OpCode.INTEREST: _dec_interest,
    **CONSUMER_DECODERS,
}


def _no_tags(decoder: object, tag: object) -> object:
    raise OpError("cbor tags are not allowed in ops")


#: one decoder per thread, its ``fp`` set per entry (``decode_any``): building
#: a decoder is about a third of a small entry's decode
_decoders = threading.local()


def _decode_doc(fp: io.BytesIO) -> Any:
    dec = getattr(_decoders, "dec", None)
    if dec is None:
        dec = _decoders.dec = cbor2.CBORDecoder(fp, tag_hook=_no_tags)
    else:
        dec.fp = fp
    try:
        return dec.decode()
    except BaseException:
        _decoders.dec = None  # never reuse a decoder a failure left mid-item
        raise


def decode_op(data: bytes) -> Op:
    """Decode one stream entry made by ``encode_op`` (``decode_any`` for any op).

    Raises:
        OpDecodeError: as ``decode_any``; also for a consumer op.
    """
    op = decode_any(data)
    if isinstance(op, CONSUMER_ENTRY_TYPES):
        raise OpDecodeError(f"consumer op {type(op).__name__} where a stream op belongs")
    return op


def decode_any(data: bytes) -> Entry:
    """Decode one entry made by ``encode_op``, stream or consumer op.

    Args:
        data: The entry bytes.

    Returns:
        The op, with every field checked.

    Raises:
        OpDecodeError: anything wrong -- not cbor, trailing bytes, unknown
            version or op code, wrong shapes or types, out-of-range values.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise OpDecodeError(f"entry must be bytes, got {type(data).__name__}")
    fp = io.BytesIO(data)
    try:
        doc = _decode_doc(fp)
    except Exception as e:  # cbor2 raises many types; all mean "not an op"
        raise OpDecodeError(f"not a cbor op: {e}") from e
    if fp.tell() != len(fp.getbuffer()):
        raise OpDecodeError("trailing bytes after op")
    try:
        if type(doc) is not list or len(doc) != 3:
            raise OpError("op must be [version, code, body]")
        version, code, body = doc
        if type(version) is not int or version != FORMAT_VERSION:
            raise OpError(f"unknown op format version {version!r}")
        if type(code) is not int or code not in _DECODERS:
            raise OpError(f"unknown op code {code!r}")
        return _DECODERS[code](body)
    except OpDecodeError:
        raise
    except (OpError, ValueError, TypeError) as e:
        raise OpDecodeError(str(e)) from e
