"""cluster.ops: op codes, dataclass checks, cbor2 codec round trips and rejection."""

from __future__ import annotations

import dataclasses

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.ops import (
    FORMAT_VERSION,
    INT64_MAX,
    PUBLISHES_PER_ENTRY_MAX,
    AckRemove,
    DeleteMsg,
    Expire,
    Interest,
    Op,
    OpCode,
    OpDecodeError,
    OpError,
    Publish,
    Purge,
    StreamMsg,
    StreamPolicy,
    UpdatePolicy,
    decode_op,
    decode_policy,
    encode_op,
    encode_policy,
)
from store.limits import Discard, StreamLimits


def test_op_codes_are_pinned() -> None:
    # Append only: these values are on disk in every journal.  Never change them.
    assert {c.name: int(c) for c in OpCode} == {
        "STREAM_MSG": 1,
        "PURGE": 2,
        "DELETE_MSG": 3,
        "UPDATE_POLICY": 4,
        "EXPIRE": 5,
        "MIRROR_MSG": 6,
        "SOURCED_MSG": 7,
        "ACK_REMOVE": 8,
        "INTEREST": 9,
        "CONSUMER_CREATED": 32,
        "CONSUMER_POLICY": 33,
        "CONSUMER_DELIVERED": 34,
        "CONSUMER_ACKS": 35,
        "CONSUMER_TIMEOUTS": 36,
        "CONSUMER_STREAM_FIRST": 37,
        "CONSUMER_ACKED": 38,
        "CONSUMER_ASSIGN": 39,
        "CONSUMER_REMOVE": 40,
    }


def test_wire_layout_is_pinned() -> None:
    op = StreamMsg((Publish("a.b", None, b"hi", 7),))
    assert cbor2.loads(encode_op(op)) == [FORMAT_VERSION, 1, [["a.b", None, b"hi", 7]]]
    assert cbor2.loads(encode_op(DeleteMsg(3, erase=False))) == [1, 3, [3, False]]
    assert cbor2.loads(encode_op(Purge("x", None, 2))) == [1, 2, ["x", None, 2]]
    assert cbor2.loads(encode_op(Expire(9))) == [1, 5, [9]]
    assert cbor2.loads(encode_op(AckRemove((4, 6), 2))) == [1, 8, [[4, 6], 2]]
    assert cbor2.loads(encode_op(Interest(("a.>", "b")))) == [1, 9, ["a.>", "b"]]


# --------------------------------------------------------------------------- strategies

_i64 = st.integers(-INT64_MAX, INT64_MAX)
_u63 = st.integers(0, INT64_MAX)
_u64 = st.integers(0, (1 << 64) - 1)

limits_st = st.builds(
    StreamLimits,
    max_msgs=_i64,
    max_bytes=_i64,
    max_age_ns=_i64,
    max_msgs_per_subject=_i64,
    max_msg_size=_i64,
    discard=st.sampled_from(Discard),
    discard_new_per_subject=st.booleans(),
)
policy_st = st.builds(
    StreamPolicy,
    name=st.text(min_size=1, max_size=10),
    limits=limits_st,
    duplicate_window_ns=_u63,
    allow_rollup_hdrs=st.booleans(),
    sealed=st.booleans(),
    deny_delete=st.booleans(),
    deny_purge=st.booleans(),
    allow_msg_ttl=st.booleans(),
)
publish_st = st.builds(
    Publish,
    subject=st.text(min_size=1, max_size=12),
    headers=st.none() | st.binary(max_size=40),
    payload=st.binary(max_size=40),
    ts_ns=_u63,
)
op_st: st.SearchStrategy[Op] = st.one_of(
    st.lists(publish_st, min_size=1, max_size=5).map(lambda ms: StreamMsg(tuple(ms))),
    st.builds(
        Purge,
        filter=st.none() | st.text(max_size=8),
        seq=st.none() | _u64,
        keep=st.none() | _u64,
    ),
    st.builds(DeleteMsg, seq=_u64, erase=st.booleans()),
    st.builds(UpdatePolicy, policy=policy_st),
    st.builds(Expire, now_ns=_u63),
    st.builds(
        AckRemove,
        seqs=st.lists(st.integers(1, (1 << 64) - 1), max_size=5).map(tuple),
        below=_u64,
    ),
    st.builds(Interest, filters=st.lists(st.text(min_size=1, max_size=8), max_size=4).map(tuple)),
)


@given(op_st)
def test_round_trip(op: Op) -> None:
    data = encode_op(op)
    assert decode_op(data) == op
    assert decode_op(bytearray(data)) == op


@given(policy_st)
def test_policy_round_trip(p: StreamPolicy) -> None:
    assert decode_policy(cbor2.loads(cbor2.dumps(encode_policy(p)))) == p


# --------------------------------------------------------------------------- rejection


def _raw(doc: object) -> bytes:
    return cbor2.dumps(doc)


_GOOD_PUB = ["a", None, b"p", 1]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        _raw([1, 1, [_GOOD_PUB]]) + b"\x00",  # trailing bytes
        _raw({"v": 1}),
        _raw([1, 1]),
        _raw([2, 1, [_GOOD_PUB]]),  # unknown version
        _raw([True, 1, [_GOOD_PUB]]),  # bool is not an int
        _raw([1, 99, []]),  # unknown op code
        _raw([1, "1", [_GOOD_PUB]]),
        _raw([1, 1, []]),  # empty batch
        _raw([1, 1, [_GOOD_PUB] * (PUBLISHES_PER_ENTRY_MAX + 1)]),
        _raw([1, 1, [["", None, b"p", 1]]]),  # empty subject
        _raw([1, 1, [["a", None, "p", 1]]]),  # payload not bytes
        _raw([1, 1, [["a", "h", b"p", 1]]]),  # headers not bytes
        _raw([1, 1, [["a", None, b"p", -1]]]),  # negative ts
        _raw([1, 1, [["a", None, b"p", 1 << 63]]]),  # ts beyond int64
        _raw([1, 1, [["a", None, b"p", 1.0]]]),  # float ts
        _raw([1, 1, [["a", None, b"p"]]]),  # short publish
        _raw([1, 1, [[*_GOOD_PUB, 0]]]),  # long publish
        _raw([1, 1, {"a": 1}]),
        _raw([1, 2, [None, None]]),
        _raw([1, 2, [1, None, None]]),  # filter not a str
        _raw([1, 2, [None, -1, None]]),
        _raw([1, 2, [None, None, False]]),
        _raw([1, 3, [1, 1]]),  # erase not a bool
        _raw([1, 3, [-5, True]]),
        _raw([1, 3, [1 << 64, True]]),
        _raw([1, 4, {"name": "x"}]),  # policy missing keys
        _raw([1, 4, [1]]),
        _raw([1, 5, []]),
        _raw([1, 5, [None]]),
        cbor2.dumps([1, 5, [cbor2.CBORTag(4000, 1)]]),  # tags refused
    ],
)
def test_rejects_malformed(data: bytes) -> None:
    with pytest.raises(OpDecodeError):
        decode_op(data)


def _policy_map(**kw: object) -> dict[str, object]:
    m = encode_policy(StreamPolicy("S"))
    m.update(kw)
    return m


@pytest.mark.parametrize(
    "m",
    [
        _policy_map(name=""),
        _policy_map(name=5),
        _policy_map(discard="oldest"),
        _policy_map(discard=["old"]),
        _policy_map(max_msgs=True),
        _policy_map(max_bytes=1 << 63),
        _policy_map(duplicate_window_ns=-1),
        _policy_map(sealed=1),
        _policy_map(extra=1),
    ],
)
def test_rejects_bad_policy(m: dict[str, object]) -> None:
    with pytest.raises(OpDecodeError):
        decode_op(_raw([1, 4, m]))


def test_not_bytes_is_named_error() -> None:
    with pytest.raises(OpDecodeError):
        decode_op("text")  # type: ignore[arg-type]


def test_constructors_check_fields() -> None:
    with pytest.raises(OpError):
        Publish("", None, b"", 0)
    with pytest.raises(OpError):
        StreamMsg(())
    with pytest.raises(OpError):
        StreamMsg([Publish("a", None, b"", 0)])  # type: ignore[arg-type]
    with pytest.raises(OpError):
        DeleteMsg(1, erase=None)  # type: ignore[arg-type]
    with pytest.raises(OpError):
        StreamPolicy("S", duplicate_window_ns=-1)
    with pytest.raises(OpError):
        encode_op("nope")  # type: ignore[arg-type]


@settings(max_examples=500)
@given(st.binary(max_size=120))
def test_fuzz_random_bytes_only_named_error(data: bytes) -> None:
    try:
        decode_op(data)
    except OpDecodeError:
        pass


def _mutations(data: bytes) -> st.SearchStrategy[bytes]:
    n = len(data)
    return st.one_of(
        st.integers(0, n).map(lambda i: data[:i]),
        st.tuples(st.integers(0, n - 1), st.integers(0, 255)).map(
            lambda t: data[: t[0]] + bytes([t[1]]) + data[t[0] + 1 :]
        ),
        st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=4)).map(
            lambda t: data[: t[0]] + t[1] + data[t[0] :]
        ),
    )


@settings(max_examples=500)
@given(st.data())
def test_fuzz_mutated_encodings_only_named_error(data: st.DataObject) -> None:
    op = data.draw(op_st)
    mutated = data.draw(_mutations(encode_op(op)))
    try:
        got = decode_op(mutated)
    except OpDecodeError:
        return
    # Anything accepted is a well-formed op that encodes back to a decodable entry.
    assert decode_op(encode_op(got)) == got


# Structured fuzz: random cbor documents shaped roughly like ops.
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=5),
)
_doc = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


@settings(max_examples=500)
@given(st.integers(0, 3), st.integers(-1, 8), _doc)
def test_fuzz_structured_only_named_error(version: int, code: int, body: object) -> None:
    try:
        decode_op(_raw([version, code, body]))
    except OpDecodeError:
        pass


def test_trusted_publish_equals_the_validated_one() -> None:
    """``Publish.trusted`` / ``publish_trusted`` (the slots set directly) build the
    value the validating constructor builds: equal, same hash, still frozen."""
    from cluster.ops import publish_trusted

    for args in (("a.b", None, b"x", 5), ("s", b"NATS/1.0\r\n\r\n", b"", 0)):
        want = Publish(*args)
        for got in (Publish.trusted(*args), publish_trusted(*args)):
            assert type(got) is Publish and got == want and hash(got) == hash(want)
            with pytest.raises(dataclasses.FrozenInstanceError):
                got.subject = "z"  # type: ignore[misc]
