"""Units behind the hostile-input fixes: bounded JSON, the overlap trie, the
iterative sublist walk, the monitor's connection table, quarantine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.quarantine import Quarantine
from node.jsapi.godecode import GoJSONError, scan_go
from node.monitor.httpd import ConnectionTable
from node.protocol.boundedjson import DEPTH_MAX, JSONDepthError, depth_of, loads
from node.subjects import OverlapIndex, overlaps
from node.sublist import Sublist


class Sub:
    def __init__(self, subject: bytes, queue: bytes | None = None) -> None:
        self.subject = subject
        self.queue = queue


def test_loads_deep_within_limit_without_recursion() -> None:
    v = loads(b"[" * DEPTH_MAX + b"]" * DEPTH_MAX)
    assert depth_of(v) == DEPTH_MAX


def test_loads_past_limit_is_gos_error() -> None:
    with pytest.raises(JSONDepthError, match=r"^exceeded max depth at offset 10001$"):
        loads(b"[" * (DEPTH_MAX + 1) + b"]" * (DEPTH_MAX + 1))


def test_go_scanner_depth_offset_matches_reference() -> None:
    # nats-server 2.15.1 answered this body with "... at offset 10033"
    body = b'{"name":"S","subjects":["a"],"x":' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    with pytest.raises(GoJSONError, match=r"^exceeded max depth at offset 10033$"):
        scan_go(body)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=_json, pad=st.integers(0, 300))
def test_loads_agrees_with_json(value: object, pad: int) -> None:
    text = json.dumps(value)
    # wrapping in many arrays sends it down the iterative path
    wrapped = "[" * pad + text + "]" * pad
    assert loads(wrapped.encode()) == json.loads(wrapped)


@settings(max_examples=300, deadline=None)
@given(
    patterns=st.lists(
        st.lists(st.sampled_from(["a", "b", "*", ">", ""]), min_size=1, max_size=4).map(".".join),
        max_size=12,
    ),
    query=st.lists(st.sampled_from(["a", "b", "*", ">", ""]), min_size=1, max_size=4).map(".".join),
)
def test_overlap_index_matches_pairwise(patterns: list[str], query: str) -> None:
    enc = [p.encode() for p in patterns]
    want = sorted(i for i, p in enumerate(enc) if overlaps(query.encode(), p))
    assert sorted(OverlapIndex(enc).overlapping(query.encode())) == want


def test_sublist_walks_thousands_of_tokens() -> None:
    sl: Sublist[Sub] = Sublist()
    stars = Sub(b".".join([b"*"] * 5000))
    fwc = Sub(b".".join([b"*"] * 4999) + b".>")
    sl.insert(stars)
    sl.insert(fwc)
    subject = b".".join([b"t"] * 5000)
    assert set(sl.match(subject).psubs) == {stars, fwc}
    assert sl.remove(stars) and sl.remove(fwc)
    assert len(sl.match(subject)) == 0


def test_connection_table_evicts_oldest_idle() -> None:
    async def scenario() -> None:
        table = ConnectionTable(limit=3)
        a, b, c = (table.admit(t) for t in (1.0, 2.0, 3.0))
        assert a and b and c
        b.idle_since = None  # answering a request: not evictable
        d = table.admit(4.0)
        assert d is not None and a.scope.cancel_called and not b.scope.cancel_called
        c.idle_since = d.idle_since = None
        assert table.admit(5.0) is None  # everyone busy: the newcomer is refused

    trio.run(scenario)


def test_quarantine_moves_aside_and_lists(tmp_path: Path) -> None:
    d = tmp_path / "streams" / "S1"
    d.mkdir(parents=True)
    (d / "config.json").write_text("{garbage")
    q = Quarantine(tmp_path)
    moved = q.put("stream", "S1", d, "bad json")
    assert moved is not None and not d.exists() and (moved / "config.json").exists()
    assert [(x.kind, x.name) for x in q.found()] == [("stream", "S1")]
