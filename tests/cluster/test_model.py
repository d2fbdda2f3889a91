"""cluster/model.py: StreamConfig values, their NATS-named dict encoding and limits()."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cluster.model import (
    STREAM_CONFIG_JSON_NAMES,
    Compression,
    ConsumerLimits,
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
    SubjectTransform,
)
from store.limits import StreamLimits

text = st.text(alphabet="abcXYZ.*>_-$ é<", max_size=8)
ints = st.integers(min_value=-1, max_value=2**63 - 1)
transforms = st.builds(SubjectTransform, src=text, dest=text)
sources = st.builds(
    StreamSource,
    name=text,
    opt_start_seq=st.integers(0, 2**64 - 1),
    opt_start_time=st.none() | st.just("2024-01-02T03:04:05.12Z"),
    filter_subject=text,
    subject_transforms=st.lists(transforms, max_size=2).map(tuple),
    external=st.none() | st.builds(ExternalStream, api=text, deliver=text),
    consumer=st.none() | st.builds(SourceConsumer, name=text, deliver_subject=text),
)
configs = st.builds(
    StreamConfig,
    name=text,
    description=text,
    subjects=st.lists(text, max_size=3).map(tuple),
    retention=st.sampled_from(Retention),
    max_consumers=ints,
    max_msgs=ints,
    max_bytes=ints,
    max_age_ns=ints,
    max_msgs_per_subject=ints,
    max_msg_size=ints,
    discard=st.sampled_from(Discard),
    storage=st.sampled_from(Storage),
    num_replicas=st.integers(0, 5),
    no_ack=st.booleans(),
    duplicate_window_ns=ints,
    placement=st.none()
    | st.builds(
        Placement, cluster=text, tags=st.lists(text, max_size=2).map(tuple), preferred=text
    ),
    mirror=st.none() | sources,
    sources=st.lists(sources, max_size=2).map(tuple),
    compression=st.sampled_from(Compression),
    first_seq=st.integers(0, 2**64 - 1),
    subject_transform=st.none() | transforms,
    republish=st.none() | st.builds(RePublish, src=text, dest=text, headers_only=st.booleans()),
    allow_direct=st.booleans(),
    mirror_direct=st.booleans(),
    discard_new_per_subject=st.booleans(),
    sealed=st.booleans(),
    deny_delete=st.booleans(),
    deny_purge=st.booleans(),
    allow_rollup=st.booleans(),
    consumer_limits=st.builds(ConsumerLimits, inactive_threshold_ns=ints, max_ack_pending=ints),
    allow_msg_ttl=st.booleans(),
    subject_delete_marker_ttl_ns=ints,
    allow_msg_counter=st.booleans(),
    allow_atomic_publish=st.booleans(),
    allow_msg_schedules=st.booleans(),
    persist_mode=st.sampled_from(PersistMode),
    allow_batch_publish=st.booleans(),
    metadata=st.dictionaries(text, text, max_size=3).map(lambda d: tuple(sorted(d.items()))),
)


@given(configs)
def test_dict_round_trip(cfg: StreamConfig) -> None:
    d = cfg.to_dict()
    assert StreamConfig.from_dict(d) == cfg
    # and through real JSON text (what gets stored and replicated)
    assert StreamConfig.from_dict(json.loads(json.dumps(d))) == cfg


@given(configs)
def test_values_are_hashable(cfg: StreamConfig) -> None:
    assert hash(cfg) == hash(StreamConfig.from_dict(cfg.to_dict()))


def test_default_dict_is_nats_server_echo_order() -> None:
    d = StreamConfig(name="ORDERS", subjects=("orders.>",)).to_dict()
    assert list(d) == [
        "name", "subjects", "retention", "max_consumers", "max_msgs", "max_bytes", "max_age",
        "max_msgs_per_subject", "max_msg_size", "discard", "storage", "num_replicas", "duplicate_window",
        "compression", "allow_direct", "mirror_direct", "sealed", "deny_delete", "deny_purge",
        "allow_rollup_hdrs", "consumer_limits", "allow_msg_ttl",
    ]  # fmt: skip
    assert (
        d["duplicate_window"] == 120_000_000_000
        and d["max_msgs"] == -1
        and d["consumer_limits"] == {}
    )


def test_json_name_map_is_one_to_one_and_covers_every_field() -> None:
    assert len(set(STREAM_CONFIG_JSON_NAMES.values())) == len(STREAM_CONFIG_JSON_NAMES)
    assert set(STREAM_CONFIG_JSON_NAMES) == set(StreamConfig.__dataclass_fields__)


def test_full_dict_uses_json_names() -> None:
    cfg = StreamConfig(
        name="S", subjects=("s",), max_age_ns=5, duplicate_window_ns=5, allow_rollup=True, subject_delete_marker_ttl_ns=7,
        allow_atomic_publish=True, allow_batch_publish=True, persist_mode=PersistMode.ASYNC,
        metadata=(("a", "1"),), no_ack=True, discard_new_per_subject=True, first_seq=3,
        allow_msg_counter=True, allow_msg_schedules=True, description="d",
    )  # fmt: skip
    d = cfg.to_dict()
    for attr, name in STREAM_CONFIG_JSON_NAMES.items():
        if attr not in ("placement", "mirror", "sources", "subject_transform", "republish"):
            assert name in d, name
    assert (
        d["allow_rollup_hdrs"] is True
        and d["persist_mode"] == "async"
        and d["metadata"] == {"a": "1"}
    )


def test_limits() -> None:
    cfg = StreamConfig(name="S", max_msgs=10, max_bytes=0, max_age_ns=10**9, discard=Discard.NEW)
    assert cfg.limits() == StreamLimits(
        max_msgs=10,
        max_bytes=-1,
        max_age_ns=10**9,
        max_msgs_per_subject=-1,
        max_msg_size=-1,
        discard=Discard.NEW,
    )
    assert StreamConfig(name="S").limits() == StreamLimits()


def test_storage_members_hash_by_identity_and_still_look_up_by_value() -> None:
    """``Storage``'s identity hash (a C-level hash on the publish path) keeps what
    Enum gives: lookup by value, two members, usable as dict keys."""
    assert Storage("file") is Storage.FILE and list(Storage) == [Storage.FILE, Storage.MEMORY]
    d = {Storage.FILE: 1, Storage.MEMORY: 2}
    assert d[Storage("memory")] == 2 and hash(Storage.FILE) == hash(Storage("file"))
