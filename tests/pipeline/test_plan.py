"""Pure units of the Spark source and sink (no Spark, no server): offsets, ranges, options, ids."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.headers import (
    encode_headers,
    header_map_array,
    header_map_bulk,
    header_map_lists,
    header_pairs,
)
from pipeline.natsio import (
    consumer_config,
    parse_ack_subject,
)
from pipeline.plan import (
    OptionError,
    SeqRange,
    SinkOptions,
    SourceOptions,
    check_data_loss,
    clip_end,
    hash_msg_id,
    make_offset,
    normalize_headers,
    offset_next,
    parse_timestamp_ns,
    row_msg_id,
    split_range,
)

BASE = {"servers": "nats://127.0.0.1:4222", "stream": "ORDERS"}


# -- offsets -------------------------------------------------------------------


def test_offsets_round_trip_and_check_stream() -> None:
    off = make_offset("ORDERS", 17)
    assert off == {"stream": "ORDERS", "next": 17}
    assert offset_next(off, "ORDERS") == 17
    assert offset_next('{"stream": "ORDERS", "next": 3}', "ORDERS") == 3
    with pytest.raises(OptionError, match="not 'OTHER'"):
        offset_next(off, "OTHER")
    with pytest.raises(ValueError):
        make_offset("ORDERS", 0)


def test_clip_end() -> None:
    assert clip_end(1, 101, None) == 101
    assert clip_end(1, 101, 40) == 41
    assert clip_end(81, 101, 40) == 101
    assert clip_end(101, 101, 40) == 101  # nothing new: an empty batch
    assert clip_end(50, 10, None) == 50  # never moves backwards (stream purged below start)
    with pytest.raises(ValueError):
        clip_end(1, 10, 0)


@given(st.integers(1, 10_000), st.integers(0, 10_000), st.integers(1, 500))
def test_rate_limited_batches_cover_everything_once(start: int, n: int, limit: int) -> None:
    available = start + n
    got: list[int] = []
    cur = start
    while True:
        end = clip_end(cur, available, limit)
        if end == cur:
            break
        assert end - cur <= limit
        got.extend(range(cur, end))
        cur = end
    assert got == list(range(start, available))


def test_data_loss() -> None:
    assert check_data_loss(1, 0, 0) is None  # empty new stream
    assert check_data_loss(1, 1, 100) is None
    assert check_data_loss(100, 151, 200) == 51  # purged 1..150, we needed 100..
    assert check_data_loss(201, 201, 200) is None  # all purged but we had read everything
    assert check_data_loss(150, 201, 200) == 51  # all purged, 150..200 never read


# -- ranges --------------------------------------------------------------------


def test_split_range_examples() -> None:
    assert split_range(1, 1) == []
    assert split_range(1, 2, 4) == [SeqRange(1, 2)]
    assert split_range(1, 11, 3) == [SeqRange(1, 5), SeqRange(5, 8), SeqRange(8, 11)]
    assert len(split_range(1, 1_000_001, 2, 50_000)) == 20
    assert len(SeqRange(5, 8)) == 3 and SeqRange(5, 8).last == 7


@given(st.integers(1, 10**9), st.integers(0, 5000), st.integers(1, 16), st.integers(1, 2000))
def test_split_range_partitions_exactly(first: int, n: int, k: int, cap: int) -> None:
    ranges = split_range(first, first + n, k, cap)
    if n == 0:
        assert ranges == []
        return
    assert ranges[0].first == first and ranges[-1].end == first + n
    for a, b in itertools.pairwise(ranges):
        assert a.end == b.first
    sizes = [len(r) for r in ranges]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    assert max(sizes) <= max(cap, -(-n // k)) or len(ranges) == n
    assert len(ranges) == min(n, max(k, -(-n // cap)))
    assert split_range(first, first + n, k, cap) == ranges  # pure


# -- options -------------------------------------------------------------------


def test_source_options_defaults_and_parsing() -> None:
    o = SourceOptions.parse(BASE)
    assert o.conn.servers == ("nats://127.0.0.1:4222",)
    assert (o.stream, o.filter_subjects, o.starting_sequence) == ("ORDERS", (), None)
    assert (o.fail_on_data_loss, o.include_headers, o.max_messages_per_trigger) == (
        True,
        True,
        None,
    )
    o = SourceOptions.parse(
        {
            **BASE,
            "servers": "nats://a:1, nats://b:2,",
            "FILTERSUBJECT": "orders.a",
            "filterSubjects": "orders.b,orders.a",
            "startingSequence": "Earliest",
            "endingSequence": "99",
            "maxMessagesPerTrigger": "40",
            "failOnDataLoss": "false",
            "minPartitions": "3",
            "jsDomain": "hub",
        }
    )
    assert o.conn.servers == ("nats://a:1", "nats://b:2")
    assert o.filter_subjects == ("orders.a", "orders.b")
    assert (o.starting_sequence, o.ending_sequence) == ("earliest", 99)
    assert (o.max_messages_per_trigger, o.fail_on_data_loss, o.min_partitions) == (40, False, 3)
    assert o.conn.api_prefix == "$JS.hub.API"
    assert SourceOptions.parse({**BASE, "jsApiPrefix": "$JS.x.API."}).conn.api_prefix == (
        "$JS.x.API"
    )


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"servers": ""}, "servers is required"),
        ({"servers": "host:4222"}, "not a URL"),
        ({"stream": ""}, "stream is required"),
        ({"stream": "a.b"}, "invalid stream name"),
        ({"startingSequence": "0"}, "startingSequence"),
        ({"startingSequence": "soon"}, "startingSequence"),
        ({"endingSequence": "earliest"}, "endingSequence"),
        ({"maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger"),
        ({"maxMessagesPerTrigger": "x"}, "not an integer"),
        ({"failOnDataLoss": "perhaps"}, "not a boolean"),
        ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({"jsDomain": "d", "jsApiPrefix": "p"}, "exclusive"),
    ],
)
def test_source_options_refused(extra: dict[str, str], match: str) -> None:
    with pytest.raises(OptionError, match=match):
        SourceOptions.parse({**BASE, **extra})


def test_timestamps() -> None:
    assert parse_timestamp_ns("1700000000123") == 1_700_000_000_123_000_000
    assert parse_timestamp_ns("2023-11-14T22:13:20.123456Z") == 1_700_000_000_123_456_000
    assert parse_timestamp_ns("2023-11-14T22:13:20") == 1_700_000_000 * 10**9  # naive = UTC
    assert parse_timestamp_ns("2023-11-15T00:13:20+02:00") == 1_700_000_000 * 10**9


def test_sink_options() -> None:
    o = SinkOptions.parse({"servers": "nats://h:1"})
    assert (o.subject, o.msg_id, o.expected_stream) == (None, "auto", None)
    o = SinkOptions.parse({"servers": "nats://h:1", "subject": "m.x", "msgId": "HASH"})
    assert (o.subject, o.msg_id) == ("m.x", "hash")
    with pytest.raises(OptionError, match="msgId"):
        SinkOptions.parse({"servers": "nats://h:1", "msgId": "random"})
    with pytest.raises(OptionError, match="subject"):
        SinkOptions.parse({"servers": "nats://h:1", "subject": "m.*"})


# -- message ids and wire helpers ------------------------------------------------


def test_msg_ids() -> None:
    h = hash_msg_id("a.b", b"x", {"K": ["1"]})
    assert h == hash_msg_id("a.b", b"x", {"K": ["1"], "Nats-Msg-Id": ["ignored"]})
    assert len({h, hash_msg_id("a.c", b"x", {"K": ["1"]}), hash_msg_id("a.b", b"y")}) == 3
    assert hash_msg_id("a.b", b"x", {"K": ["1"]}) != hash_msg_id("a.b", b"x", {"K": ["2"]})
    assert hash_msg_id("a", b"bc") != hash_msg_id("ab", b"c")
    assert row_msg_id("auto", "s", b"d", None, "col-1") == "col-1"
    assert row_msg_id("auto", "s", b"d", {"Nats-Msg-Id": ["hdr"]}, None) == "hdr"
    assert row_msg_id("auto", "s", b"d", None, None) == hash_msg_id("s", b"d")
    assert row_msg_id("hash", "s", b"d", None, "col-1") == hash_msg_id("s", b"d")
    assert row_msg_id("none", "s", b"d", None, "col-1") is None
    assert row_msg_id("column", "s", b"d", None, "c", prefix="job1:") == "job1:c"
    with pytest.raises(OptionError):
        row_msg_id("column", "s", b"d", None, None)


def test_normalize_headers() -> None:
    assert normalize_headers(None) == {}
    assert normalize_headers({"a": "1", "b": ["2", "3"], "c": None}) == {
        "a": ["1"],
        "b": ["2", "3"],
    }
    assert normalize_headers([("a", [b"x"])]) == {"a": ["x"]}
    # a repeated name (a list of pairs, as Arrow gives a map back) keeps every value
    assert normalize_headers([("a", ["1"]), ("b", ["2"]), ("a", ["3", "4"])]) == {
        "a": ["1", "3", "4"],
        "b": ["2"],
    }


_names = st.sampled_from(["A", "b-c", "Nats-Msg-Id", "X"])
_values = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), max_size=6)


@settings(deadline=None)  # the first call loads Arrow's kernels; no timing is tested
@given(
    st.lists(st.one_of(st.none(), st.lists(st.tuples(_names, _values), max_size=5)), max_size=12)
)
def test_header_blocks_round_trip_and_map_array(msgs: list[list[tuple[str, str]] | None]) -> None:
    """encode_headers -> header_map_array gives what header_pairs gives per block: repeated
    names grouped with every value in order, no headers -> null."""
    blocks = [None if m is None else encode_headers([(k, [v]) for k, v in m]) for m in msgs]
    want: list[list[tuple[str, list[str]]] | None] = []
    for m in msgs:
        grouped: dict[str, list[str]] = {}
        for k, v in m or []:
            grouped.setdefault(k, []).append(v.strip())
        want.append(list(grouped.items()) or None)
    assert [header_pairs(b) for b in blocks] == want
    assert header_map_array(blocks).to_pylist() == want
    assert header_map_lists(blocks).to_pylist() == want
    bulk = header_map_bulk(pa.array(blocks, pa.binary()))
    repeated = any(len({k for k, _ in m}) < len(m) for m in msgs if m)
    if bulk is not None:
        assert bulk.to_pylist() == want
    else:  # only a repeated name or a block without lines leaves the Arrow path
        assert repeated or all(not m for m in msgs)


def test_header_map_bulk_shapes() -> None:
    """The Arrow path takes the plain shape (with nulls, a colon in a value, several lines)
    and leaves the rest (repeated name, status line, no lines, not UTF-8) to the list path."""
    plain = [b"NATS/1.0\r\nNats-Msg-Id: 7\r\n\r\n", None, b"NATS/1.0\r\nA: a:b\r\nB:  \r\n\r\n"]
    got = header_map_bulk(pa.array(plain, pa.binary()))
    assert got is not None and got.equals(header_map_lists(plain))
    assert got.to_pylist() == [[("Nats-Msg-Id", ["7"])], None, [("A", ["a:b"]), ("B", [""])]]
    for odd in (
        b"NATS/1.0\r\nK: v\r\nK: w\r\n\r\n",
        b"NATS/1.0 503\r\n\r\n",
        b"NATS/1.0\r\n\r\n",
        b"NATS/1.0\r\nA: \xff\r\n\r\n",
    ):
        assert header_map_bulk(pa.array([plain[0], odd], pa.binary())) is None
        assert header_map_array([plain[0], odd]).equals(header_map_lists([plain[0], odd]))


def test_ack_subject_and_consumer_config() -> None:
    m = parse_ack_subject("$JS.ACK.ORDERS.c1.1.42.40.1700000000123456789.7")
    assert (m.stream_seq, m.timestamp_ns, m.pending) == (42, 1_700_000_000_123_456_789, 7)
    m = parse_ack_subject("$JS.ACK.hub.ACCHASH.ORDERS.c1.1.42.40.1700000000123456789.7.rnd")
    assert (m.stream_seq, m.pending) == (42, 7)
    with pytest.raises(ValueError):
        parse_ack_subject("_INBOX.x")
    c = consumer_config(5, None, ["a.>"])
    assert (c["deliver_policy"], c["opt_start_seq"], c["filter_subject"]) == (
        "by_start_sequence",
        5,
        "a.>",
    )
    assert (c["ack_policy"], c["num_replicas"], c["mem_storage"]) == ("none", 1, True)
    c = consumer_config(None, 1_700_000_000_000_000_001, ["a", "b"])
    assert c["opt_start_time"] == "2023-11-14T22:13:20.000000001Z"
    assert c["filter_subjects"] == ["a", "b"]


def test_wire_headers() -> None:
    from pipeline.plan import ConnectOptions
    from pipeline.wire import parse_headers, supports

    assert parse_headers(b"NATS/1.0\r\nA: 1\r\nB: x: y\r\nA: 2\r\n\r\n") == (
        None,
        [("A", ["1", "2"]), ("B", ["x: y"])],
    )
    assert parse_headers(b"NATS/1.0 404 No Messages\r\n\r\n") == ("404", [])
    assert supports(ConnectOptions(servers=("nats://h:1",), user="u", password="p"))
    assert not supports(ConnectOptions(servers=("nats://h:1",), creds="/x.creds"))
