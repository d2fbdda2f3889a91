"""Batched apply (``ReplicatedStreamFSM.apply_run``, ``StreamStore.append_batch``,
``catchup.install_batch``) leaves exactly the state one-at-a-time apply leaves.

The reference applies every entry item by item (``apply_at``) with
``report_stored`` set, which takes the per-message path (``_publish`` for each
publish, one ``append`` each); its ``Stored`` effects are dropped before
outcomes are compared.  The batched side applies the same entries in runs of
random lengths.  Compared: every item's outcome, and the store (a hash over
sequence, subject, headers, payload and timestamp of every live message, its
state and subjects), the dedupe table and the applied index.  Stores: the file
store (small segments, so runs cross segment rolls) and the memory store.

The crash case applies runs, writes the applied mark between two runs (store
synced first, as the mark loop does), "crashes" after a later run (the store
directory as it is on disk, flushed or not), reopens it as a restart does
(``restore_to_mark``, dedupe rebuilt from the store) and replays the whole
journal in other runs: the result equals the reference, so nothing was applied
twice or skipped.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster import catchup
from cluster.ops import (
    ConsumerRemove,
    DeleteMsg,
    Expire,
    Publish,
    Purge,
    StreamMsg,
    StreamPolicy,
    encode_op,
)
from cluster.replicated import ReplicatedStreamFSM, restore_to_mark, write_mark
from cluster.stream_fsm import ApplyOutcome, Stored, StreamStateMachine
from raft.errors import ApplyFailed
from store.api import StoredMsg, StreamStore
from store.file import FileStreamStore
from store.file.checkpoint import checkpoints_settled
from store.limits import Discard, StreamLimits
from store.memory import MemoryStreamStore

T0 = 1_700_000_000 * 1_000_000_000
SEGMENT_BYTES = 700  # a few messages per segment: runs cross rolls
SUBJECTS = ("a", "b", "c.d")
#: a loaded CI machine makes example generation slow: never a failure
SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

POLICIES = {
    "plain": StreamPolicy("S"),
    "max_msgs_old": StreamPolicy("S", limits=StreamLimits(max_msgs=7)),
    "max_msgs_new": StreamPolicy("S", limits=StreamLimits(max_msgs=7, discard=Discard.NEW)),
    "per_subject": StreamPolicy("S", limits=StreamLimits(max_msgs_per_subject=2)),
    "max_size": StreamPolicy("S", limits=StreamLimits(max_msg_size=12)),
    "rollup": StreamPolicy("S", allow_rollup_hdrs=True, duplicate_window_ns=350_000_000),
    "ttl_markers": StreamPolicy(
        "S", allow_msg_ttl=True, subject_delete_marker_ttl_ns=2_000_000_000
    ),
}


def _headers(kind: str, n: int) -> bytes | None:
    return {
        "none": None,
        "empty": b"",
        "id": b"NATS/1.0\r\nNats-Msg-Id: m%d\r\n\r\n" % n,
        "ttl": b"NATS/1.0\r\nNats-TTL: 1s\r\n\r\n",
        "expect": b"NATS/1.0\r\nNats-Expected-Last-Sequence: %d\r\n\r\n" % n,
        "rollup": b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n",
    }[kind]


# an op as plain data: ("pub", [(subject, header kind, header n, payload len)]),
# ("del", seq), ("purge", subject | None), ("expire", dt), ("consumer",)
_pub = st.tuples(
    st.sampled_from(SUBJECTS),
    st.sampled_from(["none", "none", "none", "empty", "id", "ttl", "expect", "rollup"]),
    st.integers(0, 6),
    st.integers(0, 20),
)
_op = st.one_of(
    st.tuples(st.just("pub"), st.lists(_pub, min_size=1, max_size=6)),
    st.tuples(st.just("pub"), st.lists(_pub, min_size=1, max_size=6)),
    st.tuples(st.just("del"), st.integers(1, 30)),
    st.tuples(st.just("purge"), st.sampled_from([None, "a"])),
    st.tuples(st.just("expire"), st.integers(0, 3)),
    st.tuples(st.just("consumer")),
)
_entries = st.lists(st.lists(_op, min_size=1, max_size=3), min_size=1, max_size=25)


def _encode(entries: list[list[tuple[Any, ...]]], unique_ids: bool = False) -> list[list[bytes]]:
    """Plain-data entries as encoded Raft entry items; time moves 0.1 s a publish."""
    out: list[list[bytes]] = []
    t = T0
    n = 0
    for entry in entries:
        items = []
        for op in entry:
            if op[0] == "pub":
                msgs = []
                for subject, hkind, hn, plen in op[1]:
                    t += 100_000_000
                    n += 1
                    hdr = _headers(hkind, n if unique_ids and hkind == "id" else hn)
                    msgs.append(Publish(subject, hdr, bytes([n % 251]) * plen, t))
                items.append(encode_op(StreamMsg(tuple(msgs))))
            elif op[0] == "del":
                items.append(encode_op(DeleteMsg(op[1], erase=False)))
            elif op[0] == "purge":
                items.append(encode_op(Purge(filter=op[1])))
            elif op[0] == "expire":
                items.append(encode_op(Expire(t + op[1] * 1_000_000_000)))
            else:
                items.append(encode_op(ConsumerRemove("nobody")))
        out.append(items)
    return out


@contextmanager
def _tmpdir() -> Iterator[str]:
    """A temporary directory removed once the stores' background checkpoints in it are
    written (a store dropped without ``close`` may still have one under way)."""
    with tempfile.TemporaryDirectory() as d:
        try:
            yield d
        finally:
            checkpoints_settled()


def _store(kind: str, d: str, name: str) -> StreamStore:
    if kind == "memory":
        return MemoryStreamStore()
    return FileStreamStore(os.path.join(d, name), segment_bytes_max=SEGMENT_BYTES)


def _fingerprint(rfsm: ReplicatedStreamFSM) -> tuple[Any, ...]:
    store = rfsm.fsm.store
    h = hashlib.sha256()
    state = store.state()
    seq = state.first_seq
    while seq <= state.last_seq:
        run = store.load_run(seq, 64)
        if not run:
            break
        for m in run:
            h.update(
                b"%d|%s|%s|%s|%d;" % (m.seq, m.subject.encode(), m.headers, m.payload, m.ts_ns)
            )
        seq = run[-1].seq + 1
    subjects = sorted(store.subject_state().items())
    return (
        h.hexdigest(),
        (state.first_seq, state.last_seq, state.msgs, state.bytes, state.last_ts),
        subjects,
        tuple(rfsm.fsm.dedupe_entries()),
        rfsm.fsm.last_msg_id,
        rfsm.applied,
    )


def _comparable(result: object) -> object:
    if isinstance(result, ApplyFailed):
        return ("failed", str(result))
    if isinstance(result, ApplyOutcome):
        return ApplyOutcome(
            result.results, tuple(e for e in result.effects if not isinstance(e, Stored))
        )
    return result


def _reference(kind: str, d: str, policy: StreamPolicy, items: list[list[bytes]]) -> Any:
    rfsm = ReplicatedStreamFSM(StreamStateMachine(_store(kind, d, "ref"), policy), 0)
    rfsm.fsm.report_stored = True  # the per-message path: one _publish, one append each
    results = []
    for index, entry in enumerate(items, 1):
        for item in entry:
            try:
                results.append(_comparable(rfsm.apply_at(item, index)))
            except Exception as exc:
                results.append(_comparable(ApplyFailed(exc)))
    return results, _fingerprint(rfsm)


def _runs(n: int, cuts: list[int]) -> list[tuple[int, int]]:
    """``[1, n]`` cut into consecutive runs at ``cuts`` (entry indexes)."""
    points = sorted({c for c in cuts if 1 < c <= n})
    bounds = [1, *points, n + 1]
    return [(a, b) for a, b in pairwise(bounds) if a < b]


def _apply_runs(
    rfsm: ReplicatedStreamFSM, items: list[list[bytes]], runs: list[tuple[int, int]]
) -> list[object]:
    results: list[object] = []
    for a, b in runs:
        out = rfsm.apply_run([(items[i - 1], i) for i in range(a, b)])
        for per_entry in out:
            results.extend(_comparable(r) for r in per_entry)
    return results


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW_OK)
@given(
    kind=st.sampled_from(["file", "memory"]),
    policy=st.sampled_from(sorted(POLICIES)),
    entries=_entries,
    cuts=st.lists(st.integers(1, 26), max_size=6),
)
def test_batched_apply_equals_item_by_item(
    kind: str, policy: str, entries: list[list[tuple[Any, ...]]], cuts: list[int]
) -> None:
    items = _encode(entries)
    with _tmpdir() as d:
        ref_results, ref_state = _reference(kind, d, POLICIES[policy], items)
        rfsm = ReplicatedStreamFSM(
            StreamStateMachine(_store(kind, d, "batched"), POLICIES[policy]), 0
        )
        results = _apply_runs(rfsm, items, _runs(len(items), cuts))
        assert results == ref_results
        assert _fingerprint(rfsm) == ref_state


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(
    policy=st.sampled_from(["plain", "max_msgs_old", "per_subject", "ttl_markers"]),
    entries=_entries,
    cuts=st.lists(st.integers(1, 26), max_size=6),
    replay_cuts=st.lists(st.integers(1, 26), max_size=6),
    mark_run=st.integers(0, 6),
    crash_later=st.integers(0, 6),
    flushed=st.booleans(),
)
def test_crash_between_batches_recovers_exactly(
    policy: str,
    entries: list[list[tuple[Any, ...]]],
    cuts: list[int],
    replay_cuts: list[int],
    mark_run: int,
    crash_later: int,
    flushed: bool,
) -> None:
    pol = POLICIES[policy]
    items = _encode(entries, unique_ids=True)  # a restart rebuilds dedupe from the store
    with _tmpdir() as d:
        _, ref_state = _reference("file", d, pol, items)
        raft_dir = Path(d, "raft")
        store = FileStreamStore(os.path.join(d, "s"), segment_bytes_max=SEGMENT_BYTES)
        rfsm = ReplicatedStreamFSM(StreamStateMachine(store, pol), 0)
        runs = _runs(len(items), cuts)
        mark_at = min(mark_run, len(runs))
        crash_at = min(mark_at + crash_later, len(runs))
        for k, (a, b) in enumerate(runs[:crash_at], 1):
            rfsm.apply_run([(items[i - 1], i) for i in range(a, b)])
            if k == mark_at:  # the mark loop: store synced, then the mark
                store.sync()
                st_ = store.state()
                write_mark(raft_dir, rfsm.applied, st_.last_seq, st_.msgs)
        if flushed:  # the OS got the buffered records before the crash
            fd = store.flush_for_sync()
            if fd is not None:
                os.close(fd)
        # the crash: what is on disk now is all a restart finds.  A segment roll's
        # checkpoint is written by a background thread as ``*.tmp`` then renamed: a
        # temporary file may vanish while the copy lists the directory, and a restart
        # ignores it anyway, so it is left out (renamed files are whole either way)
        no_tmp = shutil.ignore_patterns("*.tmp")
        shutil.copytree(os.path.join(d, "s"), os.path.join(d, "s2"), ignore=no_tmp)
        if raft_dir.exists():
            shutil.copytree(raft_dir, Path(d, "raft2"), ignore=no_tmp)
        store2 = FileStreamStore(os.path.join(d, "s2"), segment_bytes_max=SEGMENT_BYTES)
        index = restore_to_mark(store2, Path(d, "raft2"), "G")
        fsm2 = StreamStateMachine(store2, pol)
        fsm2.recover_from_store()
        rfsm2 = ReplicatedStreamFSM(fsm2, index)
        # the journal replays from its start: entries up to the mark are skipped
        _apply_runs(rfsm2, items, _runs(len(items), replay_cuts))
        assert _fingerprint(rfsm2)[:3] == ref_state[:3]
        assert rfsm2.applied == ref_state[5]


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW_OK)
@given(
    kind=st.sampled_from(["file", "memory"]),
    msgs=st.lists(
        st.tuples(
            st.integers(1, 3),  # gap before (1: none)
            st.sampled_from(SUBJECTS),
            st.sampled_from([b"", b"NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n"]),
            st.binary(max_size=40),
        ),
        max_size=40,
    ),
    tail_gap=st.integers(0, 3),
    batch=st.integers(1, 12),
)
def test_install_batch_equals_one_append_each(
    kind: str, msgs: list[tuple[int, str, bytes, bytes]], tail_gap: int, batch: int
) -> None:
    """A catch-up batch (runs of consecutive sequences, gaps, a gap at the end)
    leaves the store one ``skip``/``append(seq=)`` per message leaves."""
    stored: list[StoredMsg] = []
    seq = 0
    for i, (gap, subject, hdr, payload) in enumerate(msgs):
        seq += gap
        stored.append(StoredMsg(seq, subject, hdr, payload, T0 + i))
    through = seq + tail_gap
    with _tmpdir() as d:
        ref = _store(kind, d, "ref")
        for m in stored:
            if m.seq > ref.state().last_seq + 1:
                ref.skip(m.seq - 1)
            ref.append(m.subject, m.headers, m.payload, m.ts_ns, seq=m.seq)
        if through > ref.state().last_seq:
            ref.skip(through)
        got = _store(kind, d, "got")
        for a in range(0, len(stored), batch):
            part = stored[a : a + batch]
            catchup.install_batch(got, part[-1].seq if a + batch < len(stored) else through, part)
        if not stored:
            catchup.install_batch(got, through, [])
        for s in (ref, got):
            s.sync()
        assert got.state() == ref.state()
        assert got.load_run(1, 100) == ref.load_run(1, 100)
        assert got.msg_ids_since(0) == ref.msg_ids_since(0)
