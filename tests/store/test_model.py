"""The file store against the memory store as a model, over random operations.

A hypothesis ``RuleBasedStateMachine`` drives both stores with the same
operations (including limits changes, purges, truncates, snapshot/restore and
close+reopen of the file store) and checks after each step that everything
observable is equal.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from store.errors import LimitExceeded, MsgNotFound, StoreEOF
from store.file import FileStreamStore
from store.limits import Accounting, Discard, StreamLimits
from store.memory import MemoryStreamStore

SUBJECTS = ["a.1", "a.2", "b.1", "b.x.y", "c"]
FILTERS: list[str | tuple[str, ...]] = [">", "a.*", "a.1", "b.>", "*.1", "c", "zz", "*.x.*"]
FILTERS += [("a.1", "c"), ("a.*", "c"), ("a.1", "a.2", "b.1", "b.x.y", "c"), ("zz", "a.2")]

limits_st = st.builds(
    StreamLimits,
    max_msgs=st.sampled_from([-1, -1, 3, 8, 20]),
    max_bytes=st.sampled_from([-1, -1, 300, 1000]),
    max_age_ns=st.sampled_from([0, 0, 50]),
    max_msgs_per_subject=st.sampled_from([-1, -1, 1, 2, 4]),
    max_msg_size=st.sampled_from([-1, -1, 40]),
    discard=st.sampled_from([Discard.OLD, Discard.NEW]),
    discard_new_per_subject=st.booleans(),
    msg_ttl=st.booleans(),
)


class FileVsMemory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path()
        self.now = 1000
        self.opts: dict[str, object] = {}
        self.model = MemoryStreamStore(accounting=Accounting.FILE)
        self.file: FileStreamStore | None = None

    @initialize(
        seg=st.sampled_from([150, 400, 4096]),
        compression=st.booleans(),
        limits=limits_st,
    )
    def setup(self, seg: int, compression: bool, limits: StreamLimits) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tjmodel-"))
        self.opts = {"segment_bytes_max": seg, "compression": compression}
        self.file = FileStreamStore(self.dir, limits, **self.opts)  # type: ignore[arg-type]
        self.model.update_limits(limits)

    @property
    def fs(self) -> FileStreamStore:
        assert self.file is not None
        return self.file

    def both(self, fn):  # type: ignore[no-untyped-def]
        outs = []
        for s in (self.model, self.fs):
            try:
                outs.append(("ok", fn(s)))
            except (LimitExceeded, MsgNotFound) as e:
                outs.append(("err", type(e)))
        assert outs[0] == outs[1], outs
        return outs[0]

    @rule(
        subj=st.sampled_from(SUBJECTS),
        hdr=st.booleans(),
        n=st.integers(0, 30),
        dt=st.integers(0, 20),
    )
    def append(self, subj: str, hdr: bool, n: int, dt: int) -> None:
        self.now += dt
        ttl = ("", "Nats-TTL: 1\r\n", "Nats-TTL: never\r\n", "Nats-TTL: 40\r\n")[n % 4]
        h = f"NATS/1.0\r\nK: v\r\n{ttl}Nats-Msg-Id: m{n % 7}\r\n\r\n".encode() if hdr else b""
        p = bytes([65 + n % 26]) * n
        self.both(lambda s: s.append(subj, h, p, self.now))

    @rule(k=st.integers(1, 15), subj=st.sampled_from(SUBJECTS))
    def append_many(self, k: int, subj: str) -> None:
        for i in range(k):
            self.now += 1
            self.both(lambda s, i=i: s.append(subj, b"", b"x" * i, self.now))

    @rule(back=st.integers(0, 12), erase=st.booleans())
    def remove(self, back: int, erase: bool) -> None:
        seq = max(1, self.model.state().last_seq - back)
        self.both(lambda s: s.remove(seq, erase=erase))

    @rule(
        filt=st.sampled_from([None, ">", "a.*", "c", "b.x.y"]),
        back=st.one_of(st.none(), st.integers(0, 10)),
        keep=st.one_of(st.none(), st.integers(0, 4)),
    )
    def purge(self, filt: str | None, back: int | None, keep: int | None) -> None:
        seq = None if back is None else max(0, self.model.state().last_seq - back)
        if seq is not None and keep:
            keep = None
        self.both(lambda s: s.purge(filter=filt, seq=seq, keep=keep))

    @rule(delta=st.integers(-10, 5))
    def compact(self, delta: int) -> None:
        seq = self.model.state().last_seq + delta
        self.both(lambda s: s.compact(seq))

    @rule(back=st.integers(0, 12))
    def truncate(self, back: int) -> None:
        seq = max(0, self.model.state().last_seq - back)
        self.both(lambda s: s.truncate(seq))

    @rule(dt=st.integers(0, 100))
    def expire(self, dt: int) -> None:
        self.now += dt
        self.both(lambda s: s.expire(self.now))

    @rule(limits=limits_st)
    def update_limits(self, limits: StreamLimits) -> None:
        self.both(lambda s: s.update_limits(limits))

    @rule()
    def reopen(self) -> None:
        self.fs.close()
        self.file = FileStreamStore(self.dir, self.model.limits, **self.opts)  # type: ignore[arg-type]
        assert self.fs.recovery_report.clean
        assert self.fs.recovery_report.torn_tail_bytes == 0

    @rule()
    def sync(self) -> None:
        self.fs.sync()

    @precondition(lambda self: self.file is not None)
    @rule(to_model=st.booleans())
    def snapshot_restore(self, to_model: bool) -> None:
        buf = io.BytesIO()
        (self.fs if to_model else self.model).snapshot(buf)
        buf.seek(0)
        (self.model if to_model else self.fs).restore(buf)

    @rule(filt=st.sampled_from(FILTERS), back=st.integers(0, 40))
    def load_next(self, filt: str, back: int) -> None:
        start = max(0, self.model.state().last_seq - back)
        self.both(lambda s: s.load_next(filt, start))

    @rule(filt=st.sampled_from(FILTERS))
    def load_last(self, filt: str) -> None:
        self.both(lambda s: s.load_last(filt))

    @rule(back=st.integers(0, 20))
    def load(self, back: int) -> None:
        seq = max(1, self.model.state().last_seq - back)
        self.both(lambda s: s.load(seq))

    @rule(back=st.integers(0, 60), k=st.integers(1, 60))
    def load_walk(self, back: int, k: int) -> None:
        """Consecutive loads, as a consumer does (served by read-ahead)."""
        last = self.model.state().last_seq
        start = max(1, last - back)
        for seq in range(start, min(last, start + k - 1) + 1):
            self.both(lambda s, seq=seq: s.load(seq))

    @rule(back=st.integers(-3, 60), k=st.integers(0, 70))
    def load_run(self, back: int, k: int) -> None:
        """A batch read (``load_run``), from before the first to past the last."""
        start = self.model.state().last_seq - back
        self.both(lambda s: s.load_run(start, k))

    @rule(filt=st.sampled_from(FILTERS), back=st.integers(-3, 60), k=st.integers(0, 40))
    def load_next_run(self, filt: str | tuple[str, ...], back: int, k: int) -> None:
        """A filtered batch read equals ``load_next`` in a loop, on both stores."""
        start = self.model.state().last_seq - back
        want = []
        seq = start
        while len(want) < k:
            m = self.model.load_next(filt, seq)
            if m is None:
                break
            want.append(m)
            seq = m.seq + 1
        got = self.both(lambda s: s.load_next_run(filt, start, k))
        assert got == ("ok", want)

    @rule(filt=st.sampled_from(FILTERS), back=st.integers(-3, 60), width=st.integers(-2, 60))
    def count_in_range(self, filt: str | tuple[str, ...], back: int, width: int) -> None:
        lo = self.model.state().last_seq - back
        hi = lo + width
        want = len(self.model.load_next_run(filt, lo, 10_000)) if hi >= lo else 0
        want -= len(self.model.load_next_run(filt, hi + 1, 10_000)) if hi >= lo else 0
        assert self.both(lambda s: s.count_in_range(filt, lo, hi)) == ("ok", want)

    @rule(back_ns=st.integers(0, 200))
    def msg_ids_since(self, back_ns: int) -> None:
        self.both(lambda s: s.msg_ids_since(self.now - back_ns))

    @invariant()
    def same_state(self) -> None:
        if self.file is None:
            return
        a = self.model.state(deleted_details=True, subjects_filter=">")
        b = self.fs.state(deleted_details=True, subjects_filter=">")
        assert a == b
        assert self.model.stored_bytes() == self.fs.stored_bytes() == b.bytes
        assert self.model.subject_state() == self.fs.subject_state()
        assert self.model.next_expiry_ns() == self.fs.next_expiry_ns()

    def teardown(self) -> None:
        try:
            if self.file is not None:
                self.file.close()
                # final check: what is on disk matches the model
                again = FileStreamStore(self.dir, self.model.limits, **self.opts)  # type: ignore[arg-type]
                try:
                    want = self.model.state(deleted_details=True)
                    assert again.state(deleted_details=True) == want
                    assert list(again.iter_live()) == list(self.model._msgs.values())
                finally:
                    again.close()
        finally:
            if self.dir != Path():
                shutil.rmtree(self.dir, ignore_errors=True)


FileVsMemory.TestCase.settings = settings(
    max_examples=int(os.environ.get("STORE_MODEL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestFileVsMemory = FileVsMemory.TestCase


def test_store_error_types_cover_eof() -> None:
    assert issubclass(StoreEOF, MsgNotFound)
