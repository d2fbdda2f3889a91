"""Replicated consumer configuration: ``ConsumerConfig`` and its enums.

Theory of operation
-------------------
A consumer's configuration is decided once by ``node/jsapi/consumerconfig.py``
(nats-server's defaults, normalisation and validation) and then stored and
replicated as data.  ``ConsumerConfig`` is a frozen, hashable value: every
collection is a tuple, metadata is a key-sorted tuple of pairs, times
(``opt_start_time``, ``pause_until``) are kept as the RFC3339 text Go
re-emits ("" = unset).

Encoding: ``to_dict()`` gives the NATS JSON object with nats-server's key
order (Go's ``ConsumerConfig`` struct) and its ``omitempty`` rules, so the
API layer emits it unchanged as ``config``; ``from_dict()`` reads it back,
a missing key meaning its zero value.  ``from_dict(to_dict(c)) == c`` holds
for every value (omitted fields are exactly the zero ones).  New fields are
only ever added with a zero value meaning "old behaviour".

Python names follow the house style (durations carry ``_ns``); the map to
the NATS names is ``CONSUMER_CONFIG_JSON_NAMES``.  Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONSUMER_CONFIG_JSON_NAMES",
    "AckPolicy",
    "ConsumerConfig",
    "DeliverPolicy",
    "PriorityPolicy",
    "ReplayPolicy",
]

JsonDict = dict[str, Any]


class DeliverPolicy(enum.Enum):
    """``deliver_policy``: where a new consumer starts."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.Enum):
    """``ack_policy``: which deliveries need an acknowledgement."""

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"


class ReplayPolicy(enum.Enum):
    """``replay_policy``: as fast as possible or at the original pace."""

    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(enum.Enum):
    """``priority_policy`` (2.11+); ``NONE`` is omitted from the JSON."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


#: Python attribute -> NATS JSON name, in nats-server's emission order.
CONSUMER_CONFIG_JSON_NAMES: dict[str, str] = {
    "durable_name": "durable_name",
    "name": "name",
    "description": "description",
    "deliver_policy": "deliver_policy",
    "opt_start_seq": "opt_start_seq",
    "opt_start_time": "opt_start_time",
    "ack_policy": "ack_policy",
    "ack_wait_ns": "ack_wait",
    "max_deliver": "max_deliver",
    "backoff_ns": "backoff",
    "filter_subject": "filter_subject",
    "filter_subjects": "filter_subjects",
    "replay_policy": "replay_policy",
    "rate_limit_bps": "rate_limit_bps",
    "sample_freq": "sample_freq",
    "max_waiting": "max_waiting",
    "max_ack_pending": "max_ack_pending",
    "flow_control": "flow_control",
    "headers_only": "headers_only",
    "max_batch": "max_batch",
    "max_expires_ns": "max_expires",
    "max_bytes": "max_bytes",
    "deliver_subject": "deliver_subject",
    "deliver_group": "deliver_group",
    "idle_heartbeat_ns": "idle_heartbeat",
    "inactive_threshold_ns": "inactive_threshold",
    "num_replicas": "num_replicas",
    "mem_storage": "mem_storage",
    "direct": "direct",
    "metadata": "metadata",
    "pause_until": "pause_until",
    "priority_groups": "priority_groups",
    "priority_policy": "priority_policy",
    "priority_timeout_ns": "priority_timeout",
}

#: JSON names Go always emits (no ``omitempty``).
_ALWAYS = frozenset({"deliver_policy", "ack_policy", "replay_policy", "num_replicas"})


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A consumer's configuration (nats-server ``ConsumerConfig``).

    The defaults are Go's zero values; nats-server's normalised defaults
    (``max_deliver=-1``, ``max_waiting=512`` for pull, ``ack_wait`` 30 s …)
    are applied by ``node/jsapi/consumerconfig.py``.  Fields carry the
    meaning of the JSON field named in ``CONSUMER_CONFIG_JSON_NAMES``.

    Attributes:
        opt_start_time: RFC3339 text as Go re-emits it, "" when unset.
        pause_until: RFC3339 text, "" when unset.
        metadata: key-sorted pairs (Go emits maps key-sorted).
    """

    durable_name: str = ""
    name: str = ""
    description: str = ""
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    opt_start_seq: int = 0
    opt_start_time: str = ""
    ack_policy: AckPolicy = AckPolicy.NONE
    ack_wait_ns: int = 0
    max_deliver: int = 0
    backoff_ns: tuple[int, ...] = ()
    filter_subject: str = ""
    filter_subjects: tuple[str, ...] = ()
    replay_policy: ReplayPolicy = ReplayPolicy.INSTANT
    rate_limit_bps: int = 0
    sample_freq: str = ""
    max_waiting: int = 0
    max_ack_pending: int = 0
    flow_control: bool = False
    headers_only: bool = False
    max_batch: int = 0
    max_expires_ns: int = 0
    max_bytes: int = 0
    deliver_subject: str = ""
    deliver_group: str = ""
    idle_heartbeat_ns: int = 0
    inactive_threshold_ns: int = 0
    num_replicas: int = 0
    mem_storage: bool = False
    direct: bool = False
    metadata: tuple[tuple[str, str], ...] = ()
    pause_until: str = ""
    priority_groups: tuple[str, ...] = ()
    priority_policy: PriorityPolicy = PriorityPolicy.NONE
    priority_timeout_ns: int = 0

    # -- derived views --------------------------------------------------------

    @property
    def is_durable(self) -> bool:
        """A durable name is set (no inactivity cleanup unless configured)."""
        return bool(self.durable_name)

    @property
    def is_pull(self) -> bool:
        """No deliver subject: a pull consumer."""
        return not self.deliver_subject

    @property
    def filters(self) -> tuple[str, ...]:
        """The subject filters (``filter_subject`` or ``filter_subjects``); () = all."""
        if self.filter_subject:
            return (self.filter_subject,)
        return self.filter_subjects

    @property
    def metadata_dict(self) -> dict[str, str]:
        """``metadata`` as a fresh dict."""
        return dict(self.metadata)

    # -- encoding -------------------------------------------------------------

    def to_dict(self) -> JsonDict:
        """NATS JSON names, nats-server key order and ``omitempty`` rules."""
        d: JsonDict = {}
        for attr, key in CONSUMER_CONFIG_JSON_NAMES.items():
            v = getattr(self, attr)
            if isinstance(v, enum.Enum):
                if v is PriorityPolicy.NONE:
                    continue
                v = v.value
            elif attr == "metadata":
                v = dict(v)
            elif isinstance(v, tuple):
                v = list(v)
            if key in _ALWAYS or v:
                d[key] = v
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConsumerConfig:
        """Inverse of ``to_dict``; a missing key is its zero value.

        Raises:
            ValueError: an enum field holds an unknown string.
        """
        kw: dict[str, Any] = {}
        for attr, key in CONSUMER_CONFIG_JSON_NAMES.items():
            if key not in d or d[key] is None:
                continue
            v = d[key]
            if attr == "deliver_policy":
                v = DeliverPolicy(v)
            elif attr == "ack_policy":
                v = AckPolicy(v)
            elif attr == "replay_policy":
                v = ReplayPolicy(v)
            elif attr == "priority_policy":
                v = PriorityPolicy(v)
            elif attr == "metadata":
                v = tuple(sorted((str(k), str(x)) for k, x in dict(v).items()))
            elif attr in ("backoff_ns",):
                v = tuple(int(x) for x in v)
            elif attr in ("filter_subjects", "priority_groups"):
                v = tuple(str(x) for x in v)
            kw[attr] = v
        return cls(**kw)
