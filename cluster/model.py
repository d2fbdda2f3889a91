"""Replicated configuration values: StreamConfig and its parts.

Theory of operation
-------------------
A stream's configuration is decided once (by ``node/jsapi/streamconfig.py``,
which applies nats-server's normalisation and validation) and then stored and
replicated as data.  These classes are frozen, hashable values; every
collection is a tuple, metadata is a sorted tuple of pairs.

Encoding: ``to_dict()`` gives a plain JSON-able dict whose keys are the NATS
JSON field names, in nats-server's emission order and with its ``omitempty``
rules (so ``node/jsapi/render.py`` can emit it as the ``config`` object
unchanged), and ``from_dict()`` reads such a dict back, taking a missing key
as its zero value.  ``from_dict(to_dict(c)) == c`` holds for every value
whose omitted fields are at their zero value, which the model guarantees by
construction (omitted means: empty string, empty tuple, ``False``, ``0`` or
``None``).  This dict is the replicated form: new fields are only ever added
with a zero value meaning "old behaviour", so old entries keep decoding.

Python names follow the house style (durations carry ``_ns``); the 1:1 map to
NATS JSON names is ``STREAM_CONFIG_JSON_NAMES``.  Enums carry their NATS JSON
string as value.

Pure: no I/O, no clock.  Imports only ``store`` (for ``StreamLimits``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from store.limits import Discard, StreamLimits

__all__ = [
    "STREAM_CONFIG_JSON_NAMES",
    "Compression",
    "ConsumerLimits",
    "Discard",
    "ExternalStream",
    "PersistMode",
    "Placement",
    "RePublish",
    "Retention",
    "SourceConsumer",
    "Storage",
    "StreamConfig",
    "StreamSource",
    "SubjectTransform",
]

JsonDict = dict[str, Any]


class Retention(enum.Enum):
    """``retention``: when messages may be removed."""

    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


class Storage(enum.Enum):
    """``storage``: file or memory."""

    FILE = "file"
    MEMORY = "memory"

    # members compare by identity: an identity hash (in C) rather than Enum's
    # ``hash(self._name_)`` in Python -- the storage usage is looked up by it
    # several times per publish batch (``node.jetstream.resources``)
    __hash__ = object.__hash__


class Compression(enum.Enum):
    """``compression``: store compression."""

    NONE = "none"
    S2 = "s2"


class PersistMode(enum.Enum):
    """``persist_mode`` (2.12+): when a write counts as persisted."""

    DEFAULT = "default"
    ASYNC = "async"


def _str(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key)
    return v if isinstance(v, str) else ""


def _int(d: Mapping[str, Any], key: str, default: int = 0) -> int:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _bool(d: Mapping[str, Any], key: str) -> bool:
    return d.get(key) is True


def _strs(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    v = d.get(key)
    return tuple(str(x) for x in v) if isinstance(v, list | tuple) else ()


@dataclass(frozen=True, slots=True)
class SubjectTransform:
    """``{"src":…, "dest":…}`` (Go ``SubjectTransformConfig``)."""

    src: str = ""
    dest: str = ""

    def to_dict(self) -> JsonDict:
        """NATS JSON: both keys always present."""
        return {"src": self.src, "dest": self.dest}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SubjectTransform:
        """Inverse of ``to_dict``."""
        return cls(src=_str(d, "src"), dest=_str(d, "dest"))


@dataclass(frozen=True, slots=True)
class RePublish:
    """``republish``: ``{"src"?, "dest", "headers_only"?}``."""

    src: str = ""
    dest: str = ""
    headers_only: bool = False

    def to_dict(self) -> JsonDict:
        """NATS JSON (``src`` and ``headers_only`` omitted when empty)."""
        d: JsonDict = {}
        if self.src:
            d["src"] = self.src
        d["dest"] = self.dest
        if self.headers_only:
            d["headers_only"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RePublish:
        """Inverse of ``to_dict``."""
        return cls(src=_str(d, "src"), dest=_str(d, "dest"), headers_only=_bool(d, "headers_only"))


@dataclass(frozen=True, slots=True)
class Placement:
    """``placement``: ``{"cluster"?, "tags"?, "preferred"?}``."""

    cluster: str = ""
    tags: tuple[str, ...] = ()
    preferred: str = ""

    def to_dict(self) -> JsonDict:
        """NATS JSON (every key omitted when empty)."""
        d: JsonDict = {}
        if self.cluster:
            d["cluster"] = self.cluster
        if self.tags:
            d["tags"] = list(self.tags)
        if self.preferred:
            d["preferred"] = self.preferred
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Placement:
        """Inverse of ``to_dict``."""
        return cls(
            cluster=_str(d, "cluster"), tags=_strs(d, "tags"), preferred=_str(d, "preferred")
        )


@dataclass(frozen=True, slots=True)
class ExternalStream:
    """``external``: ``{"api":…, "deliver":…}`` (another account or domain)."""

    api: str = ""
    deliver: str = ""

    def to_dict(self) -> JsonDict:
        """NATS JSON: both keys always present."""
        return {"api": self.api, "deliver": self.deliver}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExternalStream:
        """Inverse of ``to_dict``."""
        return cls(api=_str(d, "api"), deliver=_str(d, "deliver"))


@dataclass(frozen=True, slots=True)
class SourceConsumer:
    """``consumer`` of a source/mirror (2.14+): ``{"name"?, "deliver_subject"?}``."""

    name: str = ""
    deliver_subject: str = ""

    def to_dict(self) -> JsonDict:
        """NATS JSON (keys omitted when empty)."""
        d: JsonDict = {}
        if self.name:
            d["name"] = self.name
        if self.deliver_subject:
            d["deliver_subject"] = self.deliver_subject
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SourceConsumer:
        """Inverse of ``to_dict``."""
        return cls(name=_str(d, "name"), deliver_subject=_str(d, "deliver_subject"))


@dataclass(frozen=True, slots=True)
class StreamSource:
    """A ``mirror`` or one of ``sources``.

    Attributes:
        name: Origin stream name (``name``).
        opt_start_seq: ``opt_start_seq`` (0 = unset).
        opt_start_time: ``opt_start_time`` as Go re-emits it (RFC3339 with
            nanoseconds, original offset; ``None`` = unset).
        filter_subject: ``filter_subject``.
        subject_transforms: ``subject_transforms``.
        external: ``external`` (another account/domain).
        consumer: ``consumer`` (2.14+ durable source consumer).
    """

    name: str = ""
    opt_start_seq: int = 0
    opt_start_time: str | None = None
    filter_subject: str = ""
    subject_transforms: tuple[SubjectTransform, ...] = ()
    external: ExternalStream | None = None
    consumer: SourceConsumer | None = None

    def to_dict(self) -> JsonDict:
        """NATS JSON in Go field order, ``omitempty`` applied."""
        d: JsonDict = {"name": self.name}
        if self.opt_start_seq:
            d["opt_start_seq"] = self.opt_start_seq
        if self.opt_start_time is not None:
            d["opt_start_time"] = self.opt_start_time
        if self.filter_subject:
            d["filter_subject"] = self.filter_subject
        if self.subject_transforms:
            d["subject_transforms"] = [t.to_dict() for t in self.subject_transforms]
        if self.external is not None:
            d["external"] = self.external.to_dict()
        if self.consumer is not None:
            d["consumer"] = self.consumer.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StreamSource:
        """Inverse of ``to_dict``."""
        ost = d.get("opt_start_time")
        ext = d.get("external")
        con = d.get("consumer")
        trs = d.get("subject_transforms")
        return cls(
            name=_str(d, "name"),
            opt_start_seq=_int(d, "opt_start_seq"),
            opt_start_time=ost if isinstance(ost, str) else None,
            filter_subject=_str(d, "filter_subject"),
            subject_transforms=tuple(SubjectTransform.from_dict(t) for t in trs)
            if isinstance(trs, list | tuple)
            else (),
            external=ExternalStream.from_dict(ext) if isinstance(ext, Mapping) else None,
            consumer=SourceConsumer.from_dict(con) if isinstance(con, Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class ConsumerLimits:
    """``consumer_limits``: defaults applied to new consumers (0 = unset)."""

    inactive_threshold_ns: int = 0
    max_ack_pending: int = 0

    def to_dict(self) -> JsonDict:
        """NATS JSON (``{}`` when both unset)."""
        d: JsonDict = {}
        if self.inactive_threshold_ns:
            d["inactive_threshold"] = self.inactive_threshold_ns
        if self.max_ack_pending:
            d["max_ack_pending"] = self.max_ack_pending
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConsumerLimits:
        """Inverse of ``to_dict``."""
        return cls(
            inactive_threshold_ns=_int(d, "inactive_threshold"),
            max_ack_pending=_int(d, "max_ack_pending"),
        )


#: Python attribute -> NATS JSON field name, in nats-server's emission order.
STREAM_CONFIG_JSON_NAMES: dict[str, str] = {
    "name": "name",
    "description": "description",
    "subjects": "subjects",
    "retention": "retention",
    "max_consumers": "max_consumers",
    "max_msgs": "max_msgs",
    "max_bytes": "max_bytes",
    "max_age_ns": "max_age",
    "max_msgs_per_subject": "max_msgs_per_subject",
    "max_msg_size": "max_msg_size",
    "discard": "discard",
    "storage": "storage",
    "num_replicas": "num_replicas",
    "no_ack": "no_ack",
    "duplicate_window_ns": "duplicate_window",
    "placement": "placement",
    "mirror": "mirror",
    "sources": "sources",
    "compression": "compression",
    "first_seq": "first_seq",
    "subject_transform": "subject_transform",
    "republish": "republish",
    "allow_direct": "allow_direct",
    "mirror_direct": "mirror_direct",
    "discard_new_per_subject": "discard_new_per_subject",
    "sealed": "sealed",
    "deny_delete": "deny_delete",
    "deny_purge": "deny_purge",
    "allow_rollup": "allow_rollup_hdrs",
    "consumer_limits": "consumer_limits",
    "allow_msg_ttl": "allow_msg_ttl",
    "subject_delete_marker_ttl_ns": "subject_delete_marker_ttl",
    "allow_msg_counter": "allow_msg_counter",
    "allow_atomic_publish": "allow_atomic",
    "allow_msg_schedules": "allow_msg_schedules",
    "persist_mode": "persist_mode",
    "allow_batch_publish": "allow_batched",
    "metadata": "metadata",
}


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """A stream's configuration (nats-server ``StreamConfig``), normalised.

    Defaults are nats-server's *normalised* defaults (``-1`` limits, file
    storage, one replica, 2-minute duplicate window), so ``StreamConfig(
    name="X", subjects=("X",))`` equals what creating ``{"name":"X"}`` gives.
    See ``STREAM_CONFIG_JSON_NAMES`` for the JSON names; the fields not named
    below carry the meaning of the JSON field of the same name.

    Attributes:
        max_age_ns: ``max_age`` (0 = unlimited).
        duplicate_window_ns: ``duplicate_window`` (0 = none, e.g. mirrors).
        allow_rollup: ``allow_rollup_hdrs``.
        subject_delete_marker_ttl_ns: ``subject_delete_marker_ttl``.
        allow_atomic_publish: ``allow_atomic``.
        allow_batch_publish: ``allow_batched``.
        metadata: ``metadata`` as key-sorted pairs (Go emits maps key-sorted).
    """

    name: str
    description: str = ""
    subjects: tuple[str, ...] = ()
    retention: Retention = Retention.LIMITS
    max_consumers: int = -1
    max_msgs: int = -1
    max_bytes: int = -1
    max_age_ns: int = 0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: Discard = Discard.OLD
    storage: Storage = Storage.FILE
    num_replicas: int = 1
    no_ack: bool = False
    duplicate_window_ns: int = 120_000_000_000
    placement: Placement | None = None
    mirror: StreamSource | None = None
    sources: tuple[StreamSource, ...] = ()
    compression: Compression = Compression.NONE
    first_seq: int = 0
    subject_transform: SubjectTransform | None = None
    republish: RePublish | None = None
    allow_direct: bool = False
    mirror_direct: bool = False
    discard_new_per_subject: bool = False
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup: bool = False
    consumer_limits: ConsumerLimits = field(default_factory=ConsumerLimits)
    allow_msg_ttl: bool = False
    subject_delete_marker_ttl_ns: int = 0
    allow_msg_counter: bool = False
    allow_atomic_publish: bool = False
    allow_msg_schedules: bool = False
    persist_mode: PersistMode = PersistMode.DEFAULT
    allow_batch_publish: bool = False
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def metadata_dict(self) -> dict[str, str]:
        """``metadata`` as a fresh dict."""
        return dict(self.metadata)

    def limits(self) -> StreamLimits:
        """The limits the store enforces, as ``store.limits.StreamLimits``."""
        return StreamLimits(
            max_msgs=self.max_msgs,
            max_bytes=self.max_bytes,
            max_age_ns=self.max_age_ns,
            max_msgs_per_subject=self.max_msgs_per_subject,
            max_msg_size=self.max_msg_size,
            discard=self.discard,
            discard_new_per_subject=self.discard_new_per_subject,
        ).normalised()

    def to_dict(self) -> JsonDict:
        """NATS JSON names, nats-server key order and ``omitempty`` rules."""
        d: JsonDict = {"name": self.name}
        if self.description:
            d["description"] = self.description
        if self.subjects:
            d["subjects"] = list(self.subjects)
        d["retention"] = self.retention.value
        d["max_consumers"] = self.max_consumers
        d["max_msgs"] = self.max_msgs
        d["max_bytes"] = self.max_bytes
        d["max_age"] = self.max_age_ns
        d["max_msgs_per_subject"] = self.max_msgs_per_subject
        if self.max_msg_size:
            d["max_msg_size"] = self.max_msg_size
        d["discard"] = self.discard.value
        d["storage"] = self.storage.value
        d["num_replicas"] = self.num_replicas
        if self.no_ack:
            d["no_ack"] = True
        if self.duplicate_window_ns:
            d["duplicate_window"] = self.duplicate_window_ns
        if self.placement is not None:
            d["placement"] = self.placement.to_dict()
        if self.mirror is not None:
            d["mirror"] = self.mirror.to_dict()
        if self.sources:
            d["sources"] = [s.to_dict() for s in self.sources]
        d["compression"] = self.compression.value
        if self.first_seq:
            d["first_seq"] = self.first_seq
        if self.subject_transform is not None:
            d["subject_transform"] = self.subject_transform.to_dict()
        if self.republish is not None:
            d["republish"] = self.republish.to_dict()
        d["allow_direct"] = self.allow_direct
        d["mirror_direct"] = self.mirror_direct
        if self.discard_new_per_subject:
            d["discard_new_per_subject"] = True
        d["sealed"] = self.sealed
        d["deny_delete"] = self.deny_delete
        d["deny_purge"] = self.deny_purge
        d["allow_rollup_hdrs"] = self.allow_rollup
        d["consumer_limits"] = self.consumer_limits.to_dict()
        d["allow_msg_ttl"] = self.allow_msg_ttl
        if self.subject_delete_marker_ttl_ns:
            d["subject_delete_marker_ttl"] = self.subject_delete_marker_ttl_ns
        if self.allow_msg_counter:
            d["allow_msg_counter"] = True
        if self.allow_atomic_publish:
            d["allow_atomic"] = True
        if self.allow_msg_schedules:
            d["allow_msg_schedules"] = True
        if self.persist_mode is not PersistMode.DEFAULT:
            d["persist_mode"] = self.persist_mode.value
        if self.allow_batch_publish:
            d["allow_batched"] = True
        if self.metadata:
            d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StreamConfig:
        """Inverse of ``to_dict``; a missing key is its zero value.

        Raises:
            ValueError: an enum field holds an unknown string.
        """

        def sub(key: str) -> Mapping[str, Any] | None:
            v = d.get(key)
            return v if isinstance(v, Mapping) else None

        placement = sub("placement")
        mirror = sub("mirror")
        transform = sub("subject_transform")
        republish = sub("republish")
        limits = sub("consumer_limits")
        sources = d.get("sources")
        metadata = d.get("metadata")
        return cls(
            name=_str(d, "name"),
            description=_str(d, "description"),
            subjects=_strs(d, "subjects"),
            retention=Retention(d.get("retention", "limits")),
            max_consumers=_int(d, "max_consumers"),
            max_msgs=_int(d, "max_msgs"),
            max_bytes=_int(d, "max_bytes"),
            max_age_ns=_int(d, "max_age"),
            max_msgs_per_subject=_int(d, "max_msgs_per_subject"),
            max_msg_size=_int(d, "max_msg_size"),
            discard=Discard(d.get("discard", "old")),
            storage=Storage(d.get("storage", "file")),
            num_replicas=_int(d, "num_replicas"),
            no_ack=_bool(d, "no_ack"),
            duplicate_window_ns=_int(d, "duplicate_window"),
            placement=Placement.from_dict(placement) if placement is not None else None,
            mirror=StreamSource.from_dict(mirror) if mirror is not None else None,
            sources=tuple(StreamSource.from_dict(s) for s in sources)
            if isinstance(sources, list | tuple)
            else (),
            compression=Compression(d.get("compression", "none")),
            first_seq=_int(d, "first_seq"),
            subject_transform=SubjectTransform.from_dict(transform)
            if transform is not None
            else None,
            republish=RePublish.from_dict(republish) if republish is not None else None,
            allow_direct=_bool(d, "allow_direct"),
            mirror_direct=_bool(d, "mirror_direct"),
            discard_new_per_subject=_bool(d, "discard_new_per_subject"),
            sealed=_bool(d, "sealed"),
            deny_delete=_bool(d, "deny_delete"),
            deny_purge=_bool(d, "deny_purge"),
            allow_rollup=_bool(d, "allow_rollup_hdrs"),
            consumer_limits=ConsumerLimits.from_dict(limits)
            if limits is not None
            else ConsumerLimits(),
            allow_msg_ttl=_bool(d, "allow_msg_ttl"),
            subject_delete_marker_ttl_ns=_int(d, "subject_delete_marker_ttl"),
            allow_msg_counter=_bool(d, "allow_msg_counter"),
            allow_atomic_publish=_bool(d, "allow_atomic"),
            allow_msg_schedules=_bool(d, "allow_msg_schedules"),
            persist_mode=PersistMode(d.get("persist_mode", "default")),
            allow_batch_publish=_bool(d, "allow_batched"),
            metadata=tuple(sorted((str(k), str(v)) for k, v in metadata.items()))
            if isinstance(metadata, Mapping)
            else (),
        )
