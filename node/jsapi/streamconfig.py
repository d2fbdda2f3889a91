"""STREAM.CREATE / STREAM.UPDATE request bodies -> ``StreamConfig``, as nats-server does it.

Theory of operation
-------------------
Three stages, each nats-server's own:

1. ``decode_request`` (``streamrequest``, on the Go ``encoding/json``
   imitation in ``godecode``; strict: unknown fields are errors) turns the
   body into a ``StreamConfig`` holding Go zero values.  Its errors are
   10025 ``invalid JSON: <Go message>`` with Go's wording.  The dynamic
   ``_nats.ver``/``_nats.level`` metadata keys are dropped; create and update
   then set the stored ``_nats.req.level`` (``versioning``) before the checks,
   as nats-server does, and a recreate is compared ignoring it.
2. ``check_stream_config`` (nats-server ``checkStreamCfg``): defaults
   (subjects ``[name]``, ``-1`` limits, replicas 1, duplicate window 2 min
   capped by ``max_age``, republish source ``>``), then validation with the
   exact 10052 reasons and the mirror/source errors, in nats-server's order.
3. ``parse_create`` / ``parse_update`` + ``check_update``: the handler-level
   checks (10056 name mismatch, sealed on create, 10074 replicas on a single
   server, update rules).  ``check_overlap`` (10065) and ``check_recreate``
   (10058) take the other streams as plain values.

Pure: no I/O.  ``lookup`` callables give read access to existing configs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cluster.model import (
    Discard,
    ExternalStream,
    PersistMode,
    Placement,
    RePublish,
    Retention,
    SourceConsumer,
    Storage,
    StreamConfig,
    StreamSource,
)
from cluster.transform import transform_error
from node.jsapi.errors import (
    MIRROR_DURABLE_CONSUMER_CFG_INVALID,
    MIRROR_INVALID_STREAM_NAME,
    MIRROR_INVALID_SUBJECT_FILTER,
    MIRROR_INVALID_TRANSFORM_DESTINATION,
    MIRROR_MAX_MESSAGE_SIZE_TOO_BIG,
    MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED,
    MIRROR_OVERLAPPING_SUBJECT_FILTERS,
    MIRROR_WITH_ATOMIC_PUBLISH,
    MIRROR_WITH_BATCH_PUBLISH,
    MIRROR_WITH_COUNTERS,
    MIRROR_WITH_FIRST_SEQ,
    MIRROR_WITH_MSG_SCHEDULES,
    MIRROR_WITH_SOURCES,
    MIRROR_WITH_SUBJECTS,
    PEDANTIC,
    REPLICAS_COUNT_CANNOT_BE_NEGATIVE,
    SOURCE_DUPLICATE_DETECTED,
    SOURCE_DURABLE_CONSUMER_CFG_INVALID,
    SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED,
    SOURCE_INVALID_STREAM_NAME,
    SOURCE_INVALID_SUBJECT_FILTER,
    SOURCE_INVALID_TRANSFORM_DESTINATION,
    SOURCE_MAX_MESSAGE_SIZE_TOO_BIG,
    SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED,
    SOURCE_OVERLAPPING_SUBJECT_FILTERS,
    SOURCE_WITH_MSG_SCHEDULES,
    STREAM_EXTERNAL_API_OVERLAP,
    STREAM_INVALID_CONFIG,
    STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ,
    STREAM_MIRROR_NOT_UPDATABLE,
    STREAM_MISMATCH,
    STREAM_NAME_CONTAINS_PATH_SEPARATORS,
    STREAM_NAME_EXIST,
    STREAM_REPLICAS_NOT_SUPPORTED,
    STREAM_SUBJECT_OVERLAP,
    STREAM_TRANSFORM_INVALID_DESTINATION,
    STREAM_TRANSFORM_INVALID_SOURCE,
    JSApiError,
)
from node.jsapi.godecode import (
    GoJSONError,
    go_quote,
)
from node.jsapi.streamrequest import StreamRequest, decode_request
from node.jsapi.versioning import copy_required_level, with_static_stream
from node.subjects import (
    OverlapIndex,
    any_overlap,
    first_overlap,
    has_wildcard,
    overlaps,
    subset,
    valid_literal_subject,
    valid_subject,
)

__all__ = [
    "GoJSONError",
    "StreamRequest",
    "check_overlap",
    "check_recreate",
    "check_stream_config",
    "check_update",
    "decode_request",
    "parse_create",
    "parse_update",
    "subjects_overlap",
    "valid_asset_name",
    "validate_mapping",
]
# --------------------------------------------------------------------------- validation

_MS = 1_000_000
_SEC = 1_000_000_000
_DEFAULT_DUPLICATES_NS = 120 * _SEC
NAME_LEN_MAX = 255
DESCRIPTION_LEN_MAX = 4 * 1024
METADATA_LEN_MAX = 128 * 1024
REPLICAS_MAX = 5
_JS_API_PREFIX = "$JS.API"

Lookup = Callable[[str], "StreamConfig | None"]


def _no_stream(_name: str) -> StreamConfig | None:
    return None


def _invalid(text: str) -> JSApiError:
    return JSApiError(STREAM_INVALID_CONFIG, err=text)


def valid_asset_name(name: str) -> bool:
    """nats-server ``isValidAssetName``: non-empty, no ``. * > \\ /`` and no whitespace."""
    return bool(name) and not any(c in name for c in ".*>\\/ \t\r\n\f")


def _valid_subject(s: str) -> bool:
    return valid_subject(s.encode())


def _collide(a: str, b: str) -> bool:
    return overlaps(a.encode(), b.encode())


def _subset(narrow: str, wide: str) -> bool:
    return subset(narrow.encode(), wide.encode())


def _literal(s: str) -> bool:
    return not has_wildcard(s.encode())


def check_stream_config(
    cfg: StreamConfig, *, pedantic: bool = False, lookup: Lookup = _no_stream
) -> StreamConfig:
    """nats-server ``checkStreamCfg``: normalise and validate a decoded config.

    Args:
        cfg: A decoded request config (Go zero values where unset).
        pedantic: The request's ``pedantic`` flag (refuse instead of adjust).
        lookup: Existing stream by name (for mirror/source size checks,
            ``mirror_direct`` inheritance and source cycles); default none.

    Returns:
        The normalised config (defaults materialised).

    Raises:
        JSApiError: 10052 with nats-server's reason, or the specific mirror /
            source / replica / pedantic errors.
    """
    if not valid_asset_name(cfg.name):
        raise _invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if len(cfg.name) > NAME_LEN_MAX:
        raise _invalid(f"stream name is too long, maximum allowed is {NAME_LEN_MAX}")
    if len(cfg.description) > DESCRIPTION_LEN_MAX:
        raise _invalid(f"stream description is too long, maximum allowed is {DESCRIPTION_LEN_MAX}")
    if sum(len(k) + len(v) for k, v in cfg.metadata) > METADATA_LEN_MAX:
        raise _invalid(f"stream metadata exceeds maximum size of {METADATA_LEN_MAX} bytes")
    c: dict[str, Any] = {}
    replicas = cfg.num_replicas or 1
    if replicas > REPLICAS_MAX:
        raise _invalid(f"maximum replicas is {REPLICAS_MAX}")
    if replicas < 0:
        raise JSApiError(REPLICAS_COUNT_CANNOT_BE_NEGATIVE)
    c["num_replicas"] = replicas
    for attr, json_name in (
        ("max_msgs", "max_msgs"),
        ("max_msgs_per_subject", "max_msgs_per_subject"),
        ("max_bytes", "max_bytes"),
        ("max_msg_size", "max_msg_size"),
        ("max_consumers", "max_consumers"),
    ):
        v = getattr(cfg, attr)
        if v == 0 or v < -1:
            if pedantic and v < -1:
                raise JSApiError(PEDANTIC, err=f"{json_name} must be set to -1")
            c[attr] = -1
    if cfg.max_age_ns < 0:
        raise _invalid("max age can not be negative")
    if cfg.max_age_ns != 0 and cfg.max_age_ns < 100 * _MS:
        raise _invalid("max age needs to be >= 100ms")
    dup = cfg.duplicate_window_ns
    if dup == 0 and cfg.mirror is None and not cfg.sources:
        if cfg.max_age_ns != 0 and cfg.max_age_ns < _DEFAULT_DUPLICATES_NS:
            if pedantic:
                raise JSApiError(PEDANTIC, err="duplicate window cannot be bigger than max age")
            dup = cfg.max_age_ns
        else:
            dup = _DEFAULT_DUPLICATES_NS
    if dup < 0:
        raise _invalid("duplicates window can not be negative")
    if cfg.max_age_ns != 0 and dup > cfg.max_age_ns:
        raise _invalid("duplicates window can not be larger then max age")
    if 0 < dup < 100 * _MS:
        raise _invalid("duplicates window needs to be >= 100ms")
    c["duplicate_window_ns"] = dup
    allow_rollup, deny_purge, allow_ttl = cfg.allow_rollup, cfg.deny_purge, cfg.allow_msg_ttl
    if deny_purge and allow_rollup:
        raise _invalid("roll-ups require the purge permission")
    if cfg.allow_msg_counter:
        if cfg.discard is Discard.NEW:
            raise _invalid("counter stream cannot use discard new")
        if allow_ttl:
            raise _invalid("counter stream cannot use message TTLs")
        if cfg.allow_msg_schedules:
            raise _invalid("counter stream cannot use message schedules")
        if cfg.retention is not Retention.LIMITS:
            raise _invalid("counter stream can only use limits retention")
    if cfg.discard_new_per_subject:
        if cfg.discard is not Discard.NEW:
            raise _invalid("discard new per subject requires discard new policy to be set")
        if c.get("max_msgs_per_subject", cfg.max_msgs_per_subject) <= 0:
            raise _invalid("discard new per subject requires max msgs per subject > 0")
    sdm = cfg.subject_delete_marker_ttl_ns
    if sdm > 0:
        if sdm < _SEC:
            raise _invalid("subject delete marker TTL must be at least 1 second")
        if not allow_ttl:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if message TTLs are disabled")
            allow_ttl = True
        if not allow_rollup:
            if pedantic:
                raise _invalid("subject delete marker cannot be set if roll-ups are disabled")
            allow_rollup, deny_purge = True, False
    elif sdm < 0:
        raise _invalid("subject delete marker TTL must not be negative")
    if cfg.allow_msg_schedules:
        if cfg.discard is Discard.NEW:
            raise _invalid("message scheduling cannot use discard new")
        if not allow_rollup:
            if pedantic:
                raise _invalid("message scheduling cannot be set if roll-ups are disabled")
            allow_rollup, deny_purge = True, False
    if cfg.persist_mode is PersistMode.ASYNC:
        if cfg.storage is not Storage.FILE:
            raise _invalid("async persist mode is only supported on file storage")
        if replicas > 1:
            raise _invalid("async persist mode is not supported on replicated streams")
        if cfg.allow_atomic_publish:
            raise _invalid("async persist mode is not supported with atomic batch publish")
    c.update(allow_rollup=allow_rollup, deny_purge=deny_purge, allow_msg_ttl=allow_ttl)
    max_msg_size = c.get("max_msg_size", cfg.max_msg_size)
    mirror_direct = _check_mirror(cfg, max_msg_size, lookup)
    if mirror_direct is not None:
        c["mirror_direct"] = mirror_direct
    _check_sources(cfg, max_msg_size, lookup)
    _check_cycles(cfg, lookup)
    subjects = cfg.subjects
    if not subjects:
        if cfg.mirror is None and not cfg.sources:
            subjects = (cfg.name,)
    else:
        if cfg.mirror is not None:
            raise JSApiError(MIRROR_WITH_SUBJECTS)
        _check_subjects(subjects, no_ack=cfg.no_ack, replicas=replicas)
    c["subjects"] = subjects
    if not subjects and not cfg.sources and cfg.mirror is None:
        raise _invalid("stream needs at least one configured subject or be a source/mirror")
    st = cfg.subject_transform
    if st is not None:
        if st.src and not _valid_subject(st.src):
            raise JSApiError(STREAM_TRANSFORM_INVALID_SOURCE, err=f"invalid subject {st.src}")
        reason = transform_error(st.src, st.dest)
        if reason:
            raise JSApiError(STREAM_TRANSFORM_INVALID_DESTINATION, err=reason)
    rp = cfg.republish
    if rp is not None:
        src, dest = rp.src, rp.dest
        if not src:
            if pedantic:
                raise JSApiError(PEDANTIC, err="republish source can not be empty")
            src = ">"
        if (
            dest == ">"
            and src == ">"
            and st is not None
            and len(subjects) == 1
            and st.src == subjects[0]
        ):
            if pedantic:
                raise JSApiError(PEDANTIC, err="implicit republish based on subject transform")
            src = dest = st.dest
        if any(_collide(dest, s) for s in subjects):
            raise _invalid("stream configuration for republish destination forms a cycle")
        if not _valid_subject(src) or not _valid_subject(dest) or validate_mapping(src, dest):
            raise _invalid(
                f"stream configuration for republish with transform from '{src}' to '{dest}' not valid"
            )
        c["republish"] = RePublish(src=src, dest=dest, headers_only=rp.headers_only)
    placement = cfg.placement
    if placement is not None and placement == Placement():
        placement = None
    if placement is not None and placement.preferred:
        raise _invalid("preferred server not permitted in placement")
    c["placement"] = placement
    return dataclasses.replace(cfg, **c)


def _source_consumer_ok(src: StreamSource, con: SourceConsumer) -> bool:
    """A mirror's or source's durable consumer ``con``: valid name and literal
    deliver subject, and no start position or filter on ``src`` (they belong to it)."""
    return (
        valid_asset_name(con.name)
        and _literal(con.deliver_subject)
        and _valid_subject(con.deliver_subject)
        and not src.opt_start_seq
        and src.opt_start_time is None
        and not src.filter_subject
    )


def _check_mirror(cfg: StreamConfig, max_msg_size: int, lookup: Lookup) -> bool | None:
    m = cfg.mirror
    if m is None:
        return None
    if cfg.first_seq > 0:
        raise JSApiError(MIRROR_WITH_FIRST_SEQ)
    if cfg.subjects:
        raise JSApiError(MIRROR_WITH_SUBJECTS)
    if cfg.sources:
        raise JSApiError(MIRROR_WITH_SOURCES)
    if cfg.allow_msg_counter:
        raise JSApiError(MIRROR_WITH_COUNTERS)
    if cfg.allow_atomic_publish:
        raise JSApiError(MIRROR_WITH_ATOMIC_PUBLISH)
    if cfg.allow_batch_publish:
        raise JSApiError(MIRROR_WITH_BATCH_PUBLISH)
    if cfg.allow_msg_schedules:
        raise JSApiError(MIRROR_WITH_MSG_SCHEDULES)
    if m.consumer is not None and not _source_consumer_ok(m, m.consumer):
        raise JSApiError(MIRROR_DURABLE_CONSUMER_CFG_INVALID)
    if m.filter_subject and m.subject_transforms:
        raise JSApiError(MIRROR_MULTIPLE_FILTERS_NOT_ALLOWED)
    if cfg.subject_delete_marker_ttl_ns > 0:
        raise _invalid("subject delete markers forbidden on mirrors")
    for i, tr in enumerate(m.subject_transforms):
        if tr.src and not _valid_subject(tr.src):
            raise JSApiError(MIRROR_INVALID_SUBJECT_FILTER, err=f"invalid subject {tr.src}")
        reason = validate_mapping(tr.src, tr.dest)
        if reason:
            raise JSApiError(MIRROR_INVALID_TRANSFORM_DESTINATION, err=reason)
        for j, other in enumerate(m.subject_transforms):
            if i != j and _collide(tr.src, other.src):
                raise JSApiError(MIRROR_OVERLAPPING_SUBJECT_FILTERS)
    if m.external is not None:
        _check_external(m.external)
        return None
    if not valid_asset_name(m.name):
        raise JSApiError(MIRROR_INVALID_STREAM_NAME)
    origin = lookup(m.name)
    if origin is None:
        return None
    if max_msg_size > 0 and origin.max_msg_size > 0 and max_msg_size < origin.max_msg_size:
        raise JSApiError(MIRROR_MAX_MESSAGE_SIZE_TOO_BIG)
    return origin.allow_direct


def _check_sources(cfg: StreamConfig, max_msg_size: int, lookup: Lookup) -> None:
    if cfg.sources and cfg.allow_msg_schedules:
        raise JSApiError(SOURCE_WITH_MSG_SCHEDULES)
    inames: set[str] = set()
    cnames: set[str] = set()
    for src in cfg.sources:
        if not valid_asset_name(src.name):
            raise JSApiError(SOURCE_INVALID_STREAM_NAME)
        iname = _index_name(src)
        if iname in inames:
            raise JSApiError(SOURCE_DUPLICATE_DETECTED)
        inames.add(iname)
        if src.filter_subject and src.subject_transforms:
            raise JSApiError(SOURCE_MULTIPLE_FILTERS_NOT_ALLOWED)
        for tr in src.subject_transforms:
            if tr.src and not _valid_subject(tr.src):
                raise JSApiError(SOURCE_INVALID_SUBJECT_FILTER, err=f"invalid subject {tr.src}")
            reason = validate_mapping(tr.src, tr.dest)
            if reason:
                raise JSApiError(SOURCE_INVALID_TRANSFORM_DESTINATION, err=reason)
        for i, tr in enumerate(src.subject_transforms):
            for j, other in enumerate(src.subject_transforms):
                if i != j and _subset(tr.src or ">", other.src or ">"):
                    raise JSApiError(SOURCE_OVERLAPPING_SUBJECT_FILTERS)
        if src.consumer is not None:
            con = src.consumer
            if not _source_consumer_ok(src, con):
                raise JSApiError(SOURCE_DURABLE_CONSUMER_CFG_INVALID)
            cname = f"{src.name}:{con.name}"
            if cname in cnames:
                raise JSApiError(SOURCE_DURABLE_CONSUMER_DUPLICATE_DETECTED)
            cnames.add(cname)
        if src.external is not None:
            _check_external(src.external)
            continue
        origin = lookup(src.name)
        if (
            origin is not None
            and max_msg_size > 0
            and origin.max_msg_size > 0
            and max_msg_size < origin.max_msg_size
        ):
            raise JSApiError(SOURCE_MAX_MESSAGE_SIZE_TOO_BIG)


def _index_name(src: StreamSource) -> str:
    """nats-server ``composeIName``: name, api prefix, filters/transforms."""
    parts = [src.name]
    if src.external is not None and src.external.api:
        parts.append(src.external.api)
    if src.subject_transforms:
        parts.append(" ".join(t.src or ">" for t in src.subject_transforms))
        parts.append(" ".join(t.dest for t in src.subject_transforms))
    else:
        parts.append(src.filter_subject or ">")
    return " ".join(parts)


def _check_external(ext: ExternalStream) -> None:
    if ext.deliver and not valid_literal_subject(ext.deliver.encode()):
        raise JSApiError(STREAM_INVALID_EXTERNAL_DELIVERY_SUBJ, prefix=ext.deliver)
    if ext.api:
        if not valid_literal_subject(ext.api.encode()):
            raise _invalid(
                f"stream external api prefix {go_quote(ext.api)} must be a valid subject without wildcards"
            )
        if _collide(ext.api, _JS_API_PREFIX):
            raise JSApiError(STREAM_EXTERNAL_API_OVERLAP, prefix=ext.api, subject=_JS_API_PREFIX)


def _check_cycles(cfg: StreamConfig, lookup: Lookup) -> None:
    to_visit = [cfg]
    visited: set[str] = set()
    while to_visit:
        cur = to_visit.pop(0)
        visited.add(cur.name)
        for src in cur.sources:
            if src.external is not None:
                continue
            if src.name in visited:
                if not src.filter_subject or any(
                    _collide(s, src.filter_subject) for s in cur.subjects
                ):
                    raise _invalid("detected cycle")
            else:
                other = lookup(src.name)
                if other is not None:
                    to_visit.append(other)
        m = cur.mirror
        if m is not None and m.external is None:
            if m.name in visited:
                raise _invalid("detected cycle")
            other = lookup(m.name)
            if other is not None:
                to_visit.append(other)


def _check_subjects(subjects: tuple[str, ...], *, no_ack: bool, replicas: int) -> None:
    # nats-server compares every pair; the first pair (i, j) in that order
    # is reported, found here through a trie (linear, not n²/2 pairs)
    encoded = [s.encode() for s in subjects]
    index = OverlapIndex(encoded)
    seen: set[str] = set()
    for i, subj in enumerate(subjects):
        if not _valid_subject(subj):
            raise _invalid("invalid subject")
        if subj in seen:
            raise _invalid("duplicate subjects detected")
        if subj == ">":
            if not no_ack:
                raise _invalid("capturing all subjects requires no-ack to be true")
            if replicas != 1:
                raise _invalid("capturing all subjects requires replicas of 1")
        if not no_ack:
            for ns in ("$JS.>", "$JSC.>", "$NRG.>"):
                if _collide(subj, ns) and not _subset(subj, "$JS.EVENT.>"):
                    raise _invalid(
                        "subjects that overlap with jetstream api require no-ack to be true"
                    )
            if _collide(subj, "$SYS.>") and not _subset(subj, "$SYS.ACCOUNT.>"):
                raise _invalid("subjects that overlap with system api require no-ack to be true")
        j = first_overlap(encoded, i, index)
        if j is not None:
            raise _invalid(f"subject {go_quote(subj)} overlaps with {go_quote(subjects[j])}")
        seen.add(subj)


_MAPPING_FN_RE = re.compile(r"^\{\{\s*([A-Za-z]+)\((.*)\)\s*\}\}$")
_MAPPING_FNS = {
    "wildcard",
    "partition",
    "splitfromleft",
    "splitfromright",
    "slicefromleft",
    "slicefromright",
    "split",
    "left",
    "right",
}


def validate_mapping(src: str, dest: str) -> str:
    """A subset of nats-server ``ValidateMapping``: ``""`` when valid, else a reason.

    Checks that ``dest`` is a valid subject whose ``$n`` / ``{{wildcard(n)}}``
    references name existing ``*`` tokens of ``src`` and whose mapping functions
    are known.  (nats-server also checks each function's arguments.)
    """
    if not dest:
        return ""
    if not _valid_subject(dest):
        return "invalid subject"
    wildcards = sum(1 for t in (src or ">").split(".") if t == "*")
    for tok in dest.split("."):
        idx: list[str] = []
        if tok.startswith("$") and tok[1:].isdigit():
            idx = [tok[1:]]
        else:
            m = _MAPPING_FN_RE.match(tok)
            if m is None:
                if "{{" in tok or "}}" in tok:
                    return "invalid subject"
                continue
            fn = m.group(1).lower()
            if fn not in _MAPPING_FNS:
                return f"invalid mapping destination: unknown function {m.group(1)}"
            args = [a.strip() for a in m.group(2).split(",")]
            idx = args[:1] if fn == "wildcard" else args[1:] if fn == "partition" else args[:1]
        for a in idx:
            if not a.isdigit() or not 1 <= int(a) <= wildcards:
                return "invalid mapping destination: wildcard index out of range"
    return ""


# --------------------------------------------------------------------------- create / update


def parse_create(
    subject_name: str, body: bytes, *, clustered: bool = False, lookup: Lookup = _no_stream
) -> StreamConfig:
    """STREAM.CREATE.<subject_name>: decode, check and normalise, as nats-server does.

    Order of checks (nats-server's): JSON (10025), name matches the subject
    token (10056), no path separators (10128), not sealed, no ``mirror_direct``
    without a mirror, ``check_stream_config``, then replicas > 1 when not
    clustered (10074).  Overlap with other streams (``check_overlap``) and an
    existing stream of that name (``check_recreate``) are the caller's next
    steps, in that order reversed: nats-server checks the existing stream first.

    Raises:
        JSApiError: as listed.
    """
    req = decode_request(body)
    cfg = with_static_stream(req.config)
    if cfg.name != subject_name:
        raise JSApiError(STREAM_MISMATCH)
    if "\\" in subject_name or "/" in subject_name:
        raise JSApiError(STREAM_NAME_CONTAINS_PATH_SEPARATORS)
    if cfg.sealed:
        raise _invalid("stream configuration for create can not be sealed")
    if cfg.mirror_direct and cfg.mirror is None:
        raise _invalid("stream has no mirror but does have mirror direct")
    out = check_stream_config(cfg, pedantic=req.pedantic, lookup=lookup)
    if not clustered and out.num_replicas > 1:
        raise JSApiError(STREAM_REPLICAS_NOT_SUPPORTED)
    return out


def check_recreate(new: StreamConfig, existing: StreamConfig) -> None:
    """A CREATE for an existing stream succeeds only with an identical config.

    Raises:
        JSApiError: 10058 ``stream name already in use with a different configuration``.
    """
    if copy_required_level(new, existing) != existing:
        raise JSApiError(STREAM_NAME_EXIST)


def parse_update(
    subject_name: str, body: bytes, *, lookup: Lookup = _no_stream
) -> tuple[StreamConfig, bool]:
    """STREAM.UPDATE.<subject_name>, the part independent of the current config.

    Returns:
        ``(normalised config, pedantic)``; then look the stream up (404/10059
        if missing) and call ``check_update``.

    Raises:
        JSApiError: 10025, any ``check_stream_config`` error, then 10056.
    """
    req = decode_request(body)
    cfg = check_stream_config(with_static_stream(req.config), pedantic=req.pedantic, lookup=lookup)
    if cfg.name != subject_name:
        raise JSApiError(STREAM_MISMATCH)
    return cfg, req.pedantic


def check_update(old: StreamConfig, new: StreamConfig, *, clustered: bool = False) -> StreamConfig:
    """nats-server ``configUpdateCheck``: may ``old`` become ``new``?

    Args:
        old: The stream's current config.
        new: The normalised requested config (``parse_update``).
        clustered: False on a single server (replicas > 1 refused).

    Returns:
        The config to store (a sealed stream gets ``max_age 0``, ``discard
        new``, deny delete/purge, no roll-ups).

    Raises:
        JSApiError: 10052 with the reason, 10074, 10055.
    """
    if new.name != old.name:
        raise _invalid("stream configuration name must match original")
    if not clustered and new.num_replicas > 1:
        raise JSApiError(STREAM_REPLICAS_NOT_SUPPORTED)
    if new.storage is not old.storage:
        raise _invalid("stream configuration update can not change storage type")
    if new.retention is not old.retention and Retention.WORKQUEUE in (old.retention, new.retention):
        raise _invalid(
            "stream configuration update can not change retention policy to/from workqueue"
        )
    if old.sealed and not new.sealed:
        raise _invalid("stream configuration update can not unseal a sealed stream")
    if old.deny_delete and not new.deny_delete:
        raise _invalid("stream configuration update can not cancel deny message deletes")
    if old.deny_purge and not new.deny_purge:
        raise _invalid("stream configuration update can not cancel deny purge")
    if new.mirror is not None and new.mirror != old.mirror:
        raise JSApiError(STREAM_MIRROR_NOT_UPDATABLE)
    if old.allow_msg_ttl and not new.allow_msg_ttl:
        raise _invalid("message TTL status can not be disabled")
    if new.allow_msg_counter != old.allow_msg_counter:
        raise _invalid("stream configuration update can not change message counter setting")
    if old.allow_msg_schedules and not new.allow_msg_schedules:
        raise _invalid("message schedules can not be disabled")
    if old.persist_mode is not new.persist_mode:
        raise _invalid("stream configuration update can not change persist mode")
    if new.sealed:
        new = dataclasses.replace(
            new,
            max_age_ns=0,
            discard=Discard.NEW,
            deny_delete=True,
            deny_purge=True,
            allow_rollup=False,
        )
    return new


def subjects_overlap(subjects: Iterable[str], other_subjects: Iterable[str]) -> bool:
    """True when some subject could be captured by both lists (nats-server ``SubjectsCollide``)."""
    return any_overlap([s.encode() for s in subjects], [s.encode() for s in other_subjects])


def configs_overlap(config: Mapping[str, Any], others: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a stream config's (dict's) ``subjects`` overlap any of ``others``'
    (the meta state machine's check in apply)."""
    mine = config.get("subjects") or []
    if not isinstance(mine, list) or not mine:
        return False
    index = OverlapIndex([str(s).encode() for s in mine])
    for other in others:
        subjects = other.get("subjects") or []
        if isinstance(subjects, list) and any(index.overlapping(str(s).encode()) for s in subjects):
            return True
    return False


def check_overlap(cfg: StreamConfig, existing: Iterable[StreamConfig]) -> None:
    """Refuse subjects another stream (not ``cfg.name`` itself) already captures.

    Raises:
        JSApiError: 400/10065 ``subjects overlap with an existing stream``.
    """
    index: OverlapIndex | None = None
    for other in existing:
        if other.name == cfg.name or not other.subjects or not cfg.subjects:
            continue
        if index is None:  # one trie over ours, queried with every other's subjects
            index = OverlapIndex([s.encode() for s in cfg.subjects])
        if any(index.overlapping(s.encode()) for s in other.subjects):
            raise JSApiError(STREAM_SUBJECT_OVERLAP)
