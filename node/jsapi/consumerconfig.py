"""CONSUMER.CREATE: defaults, validation and the create/update decision.

Theory of operation
-------------------
nats-server handles a consumer create in three stages, and each stage's
errors reach the client in that order; we keep the order:

1. ``parse_create`` (in ``consumerrequest``, re-exported here): decode the
   ``CreateConsumerRequest`` body as Go's strict decoder does and apply the
   rules of the subject form.
2. ``apply_defaults`` (``setConsumerConfigDefaults``): ``max_deliver`` -1,
   ``max_waiting`` 512 for pull, ``ack_wait`` 30 s for ack all/explicit (or
   ``backoff[0]``), ``max_ack_pending`` from the stream's consumer limits or
   1000; in pedantic mode a value that would be changed is 10157 instead.
3. ``check_config`` (``checkConsumerCfg``): names, replicas, ack wait and
   backoff, push/pull specific rules, filters, deliver policy vs. start
   options, sampling, flow control, priority groups.

``check_update`` (changing an existing consumer), ``check_workqueue``
(workqueue stream rules) and ``stamp_ephemeral`` (the 5 s inactivity
threshold written into ephemeral configs) complete the create path;
``decide_create`` strings stages 2 and 3 and these together in nats-server's
order, after the handler in ``node/jetstream/consumers_api.py`` has looked
the stream up.  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from cluster.consumer_model import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    PriorityPolicy,
)
from cluster.model import Retention, StreamConfig
from node.jsapi.consumerrequest import Action, CreateRequest, decode_create, parse_create
from node.jsapi.errors import (
    CONSUMER_ACK_WAIT_NEGATIVE,
    CONSUMER_ALREADY_EXISTS,
    CONSUMER_BACK_OFF_NEGATIVE,
    CONSUMER_BAD_DURABLE_NAME,
    CONSUMER_CREATE,
    CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH,
    CONSUMER_DELIVER_CYCLE,
    CONSUMER_DELIVER_TO_WILDCARDS,
    CONSUMER_DESCRIPTION_TOO_LONG,
    CONSUMER_DIRECT_REQUIRES_EPHEMERAL,
    CONSUMER_DIRECT_REQUIRES_PUSH,
    CONSUMER_DOES_NOT_EXIST,
    CONSUMER_DUPLICATE_FILTER_SUBJECTS,
    CONSUMER_EMPTY_FILTER,
    CONSUMER_EMPTY_GROUP_NAME,
    CONSUMER_FC_REQUIRES_PUSH,
    CONSUMER_HB_REQUIRES_PUSH,
    CONSUMER_INACTIVE_THRESHOLD_EXCESS,
    CONSUMER_INVALID_DELIVER_SUBJECT,
    CONSUMER_INVALID_GROUP_NAME,
    CONSUMER_INVALID_POLICY,
    CONSUMER_INVALID_SAMPLING,
    CONSUMER_MAX_DELIVER_BACKOFF,
    CONSUMER_MAX_PENDING_ACK_EXCESS,
    CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED,
    CONSUMER_MAX_REQUEST_BATCH_NEGATIVE,
    CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL,
    CONSUMER_MAX_WAITING_NEGATIVE,
    CONSUMER_METADATA_LENGTH,
    CONSUMER_NAME_EXIST,
    CONSUMER_NAME_TOO_LONG,
    CONSUMER_OVERLAPPING_SUBJECT_FILTERS,
    CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE,
    CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE,
    CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP,
    CONSUMER_PULL_REQUIRES_ACK,
    CONSUMER_PULL_WITH_RATE_LIMIT,
    CONSUMER_PUSH_MAX_WAITING,
    CONSUMER_PUSH_WITH_PRIORITY_GROUP,
    CONSUMER_REPLICAS_EXCEEDS_STREAM,
    CONSUMER_REPLICAS_SHOULD_MATCH_STREAM,
    CONSUMER_SMALL_HEARTBEAT,
    CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS,
    CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL,
    CONSUMER_WQ_CONSUMER_NOT_UNIQUE,
    CONSUMER_WQ_MULTIPLE_UNFILTERED,
    CONSUMER_WQ_REQUIRES_EXPLICIT_ACK,
    MAXIMUM_CONSUMERS_LIMIT,
    PEDANTIC,
    REPLICAS_COUNT_CANNOT_BE_NEGATIVE,
    STREAM_INVALID_CONFIG,
    JSApiError,
)
from node.jsapi.versioning import copy_required_level, with_static_consumer
from node.subjects import OverlapIndex, any_overlap, has_wildcard, subset, valid_subject

__all__ = [
    "ACK_WAIT_DEFAULT_NS",
    "INACTIVE_THRESHOLD_DEFAULT_NS",
    "MAX_ACK_PENDING_DEFAULT",
    "MAX_WAITING_DEFAULT",
    "Action",
    "CreateRequest",
    "apply_defaults",
    "check_config",
    "check_update",
    "check_workqueue",
    "decide_create",
    "decode_create",
    "go_duration",
    "parse_create",
    "stamp_ephemeral",
]

ACK_WAIT_DEFAULT_NS = 30_000_000_000
"""``ack_wait`` for ack all/explicit when none is given (30 s)."""
INACTIVE_THRESHOLD_DEFAULT_NS = 5_000_000_000
"""``inactive_threshold`` stamped into ephemeral configs (5 s)."""
MAX_ACK_PENDING_DEFAULT = 1000
MAX_WAITING_DEFAULT = 512
HEARTBEAT_NS_MIN = 100_000_000
DESCRIPTION_BYTES_MAX = 4 * 1024
METADATA_BYTES_MAX = 128 * 1024
NAME_LEN_MAX = 255
NAME_CHARS_BAD = " \t\r\n\f.*>\\/"
_GROUP_NAME = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")


def valid_group_name(name: str) -> bool:
    """nats-server's ``validGroupName`` (Go's ``$``: the very end, no newline)."""
    return _GROUP_NAME.fullmatch(name) is not None


def _pedantic(text: str) -> JSApiError:
    return JSApiError(PEDANTIC, err=text)


def apply_defaults(cfg: ConsumerConfig, stream: StreamConfig, *, pedantic: bool) -> ConsumerConfig:
    """nats-server's consumer defaults (``setConsumerConfigDefaults``).

    Raises:
        JSApiError: 10157 in pedantic mode where a value would be changed.
    """
    ch: dict[str, Any] = {}
    if cfg.max_deliver == 0 or cfg.max_deliver < -1:
        if pedantic and cfg.max_deliver < -1:
            raise _pedantic("max_deliver must be set to -1")
        ch["max_deliver"] = -1
    negatives = (
        ("max_waiting", "max_waiting must not be negative", 0),
        ("max_ack_pending", "max_ack_pending must be set to -1", -1),
        ("max_batch", "max_batch must not be negative", 0),
        ("max_expires_ns", "max_expires must not be negative", 0),
        ("max_bytes", "max_bytes must not be negative", 0),
        ("idle_heartbeat_ns", "idle_heartbeat must not be negative", 0),
        ("inactive_threshold_ns", "inactive_threshold must not be negative", 0),
        ("priority_timeout_ns", "priority_timeout must not be negative", 0),
    )
    for attr, text, floor in negatives:
        if getattr(cfg, attr) < floor:
            if pedantic:
                raise _pedantic(text)
            ch[attr] = floor
    cfg = replace(cfg, **ch)
    ch = {}
    if not cfg.deliver_subject and cfg.max_waiting == 0:
        ch["max_waiting"] = MAX_WAITING_DEFAULT
    ack_wait = cfg.ack_wait_ns
    if ack_wait == 0 and cfg.ack_policy in (AckPolicy.EXPLICIT, AckPolicy.ALL):
        ack_wait = ACK_WAIT_DEFAULT_NS
    if cfg.backoff_ns:
        if pedantic and ack_wait != cfg.backoff_ns[0]:
            raise _pedantic("first backoff value has to equal batch AckWait")
        ack_wait = cfg.backoff_ns[0]
    ch["ack_wait_ns"] = ack_wait
    limits = stream.consumer_limits
    map_ = cfg.max_ack_pending
    if map_ == 0:
        if pedantic and limits.max_ack_pending > 0:
            raise _pedantic("max_ack_pending must be set if it's configured in stream limits")
        map_ = limits.max_ack_pending
    if cfg.inactive_threshold_ns == 0:
        if pedantic and limits.inactive_threshold_ns > 0:
            raise _pedantic("inactive_threshold must be set if it's configured in stream limits")
        ch["inactive_threshold_ns"] = limits.inactive_threshold_ns
    if map_ == 0 and cfg.ack_policy is not AckPolicy.NONE:
        map_ = MAX_ACK_PENDING_DEFAULT
    ch["max_ack_pending"] = map_
    if cfg.priority_policy is PriorityPolicy.PINNED_CLIENT and cfg.priority_timeout_ns == 0:
        ch["priority_timeout_ns"] = 120_000_000_000
    if cfg.ack_policy is AckPolicy.FLOW_CONTROL and not pedantic:
        ch["flow_control"] = True
        ch["idle_heartbeat_ns"] = 1_000_000_000
    return replace(cfg, **ch)


def _valid_name(name: str) -> bool:
    return bool(name) and not any(c in name for c in NAME_CHARS_BAD)


def _invalid(text: str) -> JSApiError:
    return JSApiError(STREAM_INVALID_CONFIG, err=text)


def _policy(text: str) -> JSApiError:
    return JSApiError(CONSUMER_INVALID_POLICY, err=text)


def _check_start(cfg: ConsumerConfig) -> None:
    """Deliver policy vs. ``opt_start_seq``/``opt_start_time`` (10094)."""

    def bad_start(dp: str, start: str) -> JSApiError:
        return _policy(
            f"consumer delivery policy is deliver {dp}, but optional start {start} is also set"
        )

    def not_set(dp: str, what: str) -> JSApiError:
        return _policy(f"consumer delivery policy is deliver {dp}, but optional {what} is not set")

    dp = cfg.deliver_policy
    seq, time_ = cfg.opt_start_seq > 0, bool(cfg.opt_start_time)
    words = {
        DeliverPolicy.ALL: "all",
        DeliverPolicy.LAST: "last",
        DeliverPolicy.LAST_PER_SUBJECT: "last per subject",
        DeliverPolicy.NEW: "new",
    }
    if dp in words:
        if seq:
            raise bad_start(words[dp], "sequence")
        if time_:
            raise bad_start(words[dp], "time")
        if dp is DeliverPolicy.LAST_PER_SUBJECT and not cfg.filters:
            raise not_set("last per subject", "filter subject")
    elif dp is DeliverPolicy.BY_START_SEQUENCE:
        if not seq:
            raise not_set("by start sequence", "start sequence")
        if time_:
            raise bad_start("by start sequence", "time")
    elif dp is DeliverPolicy.BY_START_TIME:
        if not time_:
            raise not_set("by start time", "start time")
        if cfg.opt_start_seq != 0:
            raise bad_start("by start time", "start sequence")


def _check_push_pull(cfg: ConsumerConfig, stream: StreamConfig) -> None:
    if cfg.deliver_subject:
        d = cfg.deliver_subject.encode()
        if has_wildcard(d):
            raise JSApiError(CONSUMER_DELIVER_TO_WILDCARDS)
        if not valid_subject(d):
            raise JSApiError(CONSUMER_INVALID_DELIVER_SUBJECT)
        if any(subset(d, s.encode()) for s in stream.subjects):
            raise JSApiError(CONSUMER_DELIVER_CYCLE)
        if cfg.max_waiting != 0:
            raise JSApiError(CONSUMER_PUSH_MAX_WAITING)
        if cfg.max_ack_pending > 0 and cfg.ack_policy is AckPolicy.NONE:
            raise JSApiError(CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED)
        if 0 < cfg.idle_heartbeat_ns < HEARTBEAT_NS_MIN:
            raise JSApiError(CONSUMER_SMALL_HEARTBEAT)
        return
    if cfg.ack_policy is AckPolicy.NONE and stream.retention is Retention.WORKQUEUE:
        raise JSApiError(CONSUMER_PULL_REQUIRES_ACK)
    if cfg.rate_limit_bps > 0:
        raise JSApiError(CONSUMER_PULL_WITH_RATE_LIMIT)
    if cfg.max_waiting < 0:
        raise JSApiError(CONSUMER_MAX_WAITING_NEGATIVE)
    if cfg.idle_heartbeat_ns > 0:
        raise JSApiError(CONSUMER_HB_REQUIRES_PUSH)
    if cfg.flow_control:
        raise JSApiError(CONSUMER_FC_REQUIRES_PUSH)
    if cfg.max_batch < 0:
        raise JSApiError(CONSUMER_MAX_REQUEST_BATCH_NEGATIVE)
    if cfg.max_expires_ns != 0 and cfg.max_expires_ns < 1_000_000:
        raise JSApiError(CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL)


def _check_filters(cfg: ConsumerConfig) -> None:
    if cfg.filter_subject and cfg.filter_subjects:
        raise JSApiError(CONSUMER_DUPLICATE_FILTER_SUBJECTS)
    if cfg.filter_subject and not valid_subject(cfg.filter_subject.encode()):
        raise _invalid("invalid subject")
    if any(f == "" for f in cfg.filter_subjects):
        raise JSApiError(CONSUMER_EMPTY_FILTER)
    filters = [f.encode() for f in cfg.filters]
    # a filter inside another: a subset is an overlap, so only the filters
    # the trie finds overlapping are compared (not every pair)
    index = OverlapIndex(filters) if len(filters) > 1 else None
    for i, f in enumerate(filters):
        if not valid_subject(f):
            raise _invalid("invalid subject")
        if index is not None and any(
            j != i and subset(f, filters[j]) for j in index.overlapping(f)
        ):
            raise JSApiError(CONSUMER_OVERLAPPING_SUBJECT_FILTERS)


def _check_priority(cfg: ConsumerConfig) -> None:
    if cfg.priority_policy is not PriorityPolicy.NONE:
        if cfg.deliver_subject:
            raise JSApiError(CONSUMER_PUSH_WITH_PRIORITY_GROUP)
        if not cfg.priority_groups:
            raise JSApiError(CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP)
        for g in cfg.priority_groups:
            if not g:
                raise JSApiError(CONSUMER_EMPTY_GROUP_NAME)
            if not valid_group_name(g):
                raise JSApiError(CONSUMER_INVALID_GROUP_NAME)
    else:
        if cfg.priority_groups:
            raise JSApiError(CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE)
        if cfg.priority_timeout_ns > 0:
            raise JSApiError(CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE)


def check_config(cfg: ConsumerConfig, stream: StreamConfig) -> None:
    """nats-server's ``checkConsumerCfg`` on a config with defaults applied.

    Raises:
        JSApiError: the first violated rule, in nats-server's order.
    """
    if cfg.name and not _valid_name(cfg.name):
        raise _invalid("consumer name can not contain '.', '*', '>', '\\', '/'")
    if cfg.durable_name and not _valid_name(cfg.durable_name):
        raise _invalid("consumer durable name can not contain '.', '*', '>', '\\', '/'")
    if cfg.num_replicas > 0 and cfg.num_replicas > stream.num_replicas:
        raise JSApiError(CONSUMER_REPLICAS_EXCEEDS_STREAM)
    if cfg.num_replicas < 0:
        raise JSApiError(REPLICAS_COUNT_CANNOT_BE_NEGATIVE)
    if (
        stream.retention is not Retention.LIMITS
        and cfg.num_replicas != 0
        and cfg.num_replicas != stream.num_replicas
    ):
        raise JSApiError(CONSUMER_REPLICAS_SHOULD_MATCH_STREAM)
    if any(b < 0 for b in cfg.backoff_ns):
        raise JSApiError(CONSUMER_BACK_OFF_NEGATIVE)
    if cfg.ack_wait_ns < 0:
        raise JSApiError(CONSUMER_ACK_WAIT_NEGATIVE)
    if cfg.backoff_ns and cfg.max_deliver != -1 and len(cfg.backoff_ns) > cfg.max_deliver:
        raise JSApiError(CONSUMER_MAX_DELIVER_BACKOFF)
    if len(cfg.description.encode()) > DESCRIPTION_BYTES_MAX:
        raise JSApiError(CONSUMER_DESCRIPTION_TOO_LONG, max=DESCRIPTION_BYTES_MAX)
    _check_push_pull(cfg, stream)
    limits = stream.consumer_limits
    if limits.max_ack_pending > 0 and cfg.max_ack_pending > limits.max_ack_pending:
        raise JSApiError(CONSUMER_MAX_PENDING_ACK_EXCESS, limit=limits.max_ack_pending)
    if (
        limits.inactive_threshold_ns > 0
        and cfg.inactive_threshold_ns > limits.inactive_threshold_ns
    ):
        raise JSApiError(
            CONSUMER_INACTIVE_THRESHOLD_EXCESS, limit=go_duration(limits.inactive_threshold_ns)
        )
    if cfg.direct:
        if not cfg.deliver_subject:
            raise JSApiError(CONSUMER_DIRECT_REQUIRES_PUSH)
        if cfg.durable_name:
            raise JSApiError(CONSUMER_DIRECT_REQUIRES_EPHEMERAL)
    _check_filters(cfg)
    _check_start(cfg)
    if cfg.sample_freq:
        text = cfg.sample_freq.removesuffix("%")
        if not re.fullmatch(r"[+-]?\d+", text):
            raise JSApiError(
                CONSUMER_INVALID_SAMPLING,
                err=f'strconv.Atoi: parsing "{text}": invalid syntax',
            )
        if len(text.lstrip("+-").lstrip("0")) > 19:
            raise JSApiError(
                CONSUMER_INVALID_SAMPLING,
                err=f'strconv.Atoi: parsing "{text}": value out of range',
            )
        if int(text) < 0:
            raise JSApiError(CONSUMER_INVALID_SAMPLING, err="<nil>")
    if cfg.flow_control and cfg.idle_heartbeat_ns == 0:
        raise JSApiError(CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS)
    if cfg.durable_name and cfg.name and cfg.name != cfg.durable_name:
        raise JSApiError(CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH)
    if sum(len(k) + len(v) for k, v in cfg.metadata) > METADATA_BYTES_MAX:
        raise JSApiError(CONSUMER_METADATA_LENGTH, limit=f"{METADATA_BYTES_MAX // 1024}KB")
    _check_priority(cfg)
    if stream.placement is not None and stream.placement.preferred:
        raise _invalid("preferred server not permitted in placement")


def check_workqueue(
    cfg: ConsumerConfig,
    stream: StreamConfig,
    name: str,
    others: Iterable[tuple[str, ConsumerConfig]],
    *,
    exists: bool,
) -> None:
    """Workqueue stream rules (10098, 10101, 10099, 10100).

    Args:
        cfg: the new config.
        stream: the stream's config.
        name: the consumer's name ("" for a generated one).
        others: ``(name, config)`` of the stream's consumers.
        exists: the consumer already exists (an update only checks overlap).
    """
    if stream.retention is not Retention.WORKQUEUE:
        return
    others = [(n, c) for n, c in others if n != name and not c.direct]
    mine = [f.encode() for f in cfg.filters]

    def unique() -> bool:
        for _, c in others:
            if not c.filters:
                return False
            if any_overlap(mine, [f.encode() for f in c.filters]):
                return False
        return True

    if exists:
        if not unique():
            raise JSApiError(CONSUMER_WQ_CONSUMER_NOT_UNIQUE)
        return
    if cfg.ack_policy not in (AckPolicy.EXPLICIT, AckPolicy.FLOW_CONTROL):
        raise JSApiError(CONSUMER_WQ_REQUIRES_EXPLICIT_ACK)
    if cfg.deliver_policy is not DeliverPolicy.ALL:
        raise JSApiError(CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL)
    if others:
        if not mine:
            raise JSApiError(CONSUMER_WQ_MULTIPLE_UNFILTERED)
        if not unique():
            raise JSApiError(CONSUMER_WQ_CONSUMER_NOT_UNIQUE)


def check_update(old: ConsumerConfig, new: ConsumerConfig, *, deliver_bound: bool) -> None:
    """May an existing consumer take ``new``? (``checkNewConsumerConfig``).

    Args:
        old: the stored config.
        new: the requested config (defaults applied).
        deliver_bound: the old deliver subject has a subscriber.

    Raises:
        JSApiError: 10012 with nats-server's reason, 10013 or 10116.
    """
    if old == new:
        return

    def refuse(text: str) -> JSApiError:
        return JSApiError(CONSUMER_CREATE, err=text)

    pairs = (
        ("deliver_policy", "deliver policy can not be updated"),
        ("mem_storage", "storage type can not be updated"),
        ("direct", "direct can not be updated"),
        ("opt_start_seq", "start sequence can not be updated"),
        ("opt_start_time", "start time can not be updated"),
        ("ack_policy", "ack policy can not be updated"),
        ("replay_policy", "replay policy can not be updated"),
        ("idle_heartbeat_ns", "heart beats can not be updated"),
        ("flow_control", "flow control can not be updated"),
    )
    for attr, text in pairs:
        if getattr(old, attr) != getattr(new, attr):
            raise refuse(text)
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            raise refuse("can not update pull consumer to push based")
        if not new.deliver_subject:
            raise refuse("can not update push consumer to pull based")
        if deliver_bound:
            raise JSApiError(CONSUMER_NAME_EXIST)
    if old.max_waiting != new.max_waiting:
        raise refuse("max waiting can not be updated")
    if new.backoff_ns and new.max_deliver != -1 and len(new.backoff_ns) > new.max_deliver:
        raise JSApiError(CONSUMER_MAX_DELIVER_BACKOFF)


def stamp_ephemeral(cfg: ConsumerConfig) -> ConsumerConfig:
    """Ephemerals always get an inactivity threshold (5 s unless given)."""
    if not cfg.durable_name and cfg.inactive_threshold_ns <= 0:
        return replace(cfg, inactive_threshold_ns=INACTIVE_THRESHOLD_DEFAULT_NS)
    return cfg


def go_duration(ns: int) -> str:
    """Go's ``time.Duration.String`` for whole values (``5s``, ``1m30s``, ``250ms``)."""
    if ns == 0:
        return "0s"
    neg = ns < 0
    ns = abs(ns)
    if ns < 1_000:
        out = f"{ns}ns"
    elif ns < 1_000_000:
        out = _frac(ns, 1_000) + "µs"
    elif ns < 1_000_000_000:
        out = _frac(ns, 1_000_000) + "ms"
    else:
        h, rem = divmod(ns, 3_600_000_000_000)
        m, rem = divmod(rem, 60_000_000_000)
        s = _frac(rem, 1_000_000_000) + "s"
        out = (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + s
    return ("-" if neg else "") + out


def _frac(v: int, unit: int) -> str:
    whole, rem = divmod(v, unit)
    if not rem:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{rem:0{digits}d}".rstrip("0")


def decide_create(
    req: CreateRequest,
    stream: StreamConfig,
    existing: Mapping[str, ConsumerConfig],
    *,
    new_name: Callable[[], str],
    deliver_bound: Callable[[str], bool] = lambda _s: False,
) -> tuple[str, ConsumerConfig, bool]:
    """The rest of a create after the stream lookup, in nats-server's order.

    Args:
        req: from ``parse_create``.
        stream: the stream's config.
        existing: the stream's consumers by name.
        new_name: draws a fresh consumer name (legacy ephemerals).
        deliver_bound: whether a deliver subject has a subscriber.

    Returns:
        ``(name, config to store, created)``; ``created`` is False for an
        update (or an identical re-create) of an existing consumer.

    Raises:
        JSApiError: defaults (10157), config checks, 10148, 10100, update
            refusals (10012 …), 10149, 10098/10101/10099, 10102, 10103.
    """
    cfg = req.config
    old = existing.get(cfg.name) if cfg.name else None
    if old is not None:
        cfg = replace(cfg, pause_until=old.pause_until)
    cfg = apply_defaults(cfg, stream, pedantic=req.pedantic)
    check_config(cfg, stream)
    cname = cfg.durable_name or cfg.name
    others = [(n, c) for n, c in existing.items()]
    if cname and cname in existing:
        old = existing[cname]
        if req.action is Action.CREATE and copy_required_level(cfg, old) != old:
            raise JSApiError(CONSUMER_ALREADY_EXISTS)
        check_workqueue(cfg, stream, cname, others, exists=True)
        new = stamp_ephemeral(cfg) if not old.durable_name else cfg
        check_update(old, new, deliver_bound=deliver_bound(old.deliver_subject))
        return cname, with_static_consumer(new), False  # the kept pause counts
    if req.action is Action.UPDATE:
        raise JSApiError(CONSUMER_DOES_NOT_EXIST)
    if stream.max_consumers > 0 and len(existing) >= stream.max_consumers:
        raise JSApiError(MAXIMUM_CONSUMERS_LIMIT)
    check_workqueue(cfg, stream, cname, others, exists=False)
    if cfg.durable_name:
        if len(cfg.durable_name) > NAME_LEN_MAX:
            raise JSApiError(CONSUMER_NAME_TOO_LONG, max=NAME_LEN_MAX)
        name = cfg.durable_name
    elif cfg.name:
        name = cfg.name
    else:
        name = new_name()
        while name in existing:
            name = new_name()
    if not _valid_name(name):
        raise JSApiError(CONSUMER_BAD_DURABLE_NAME)
    return name, stamp_ephemeral(cfg), True
