"""The stream shell (``cluster.streams.Stream``) over a memory store: PubAck
results after apply, listeners see every outcome, ``max_age`` expiry is
proposed by the stream's own expiry task, updates and deletes go through the
group."""

from __future__ import annotations

import trio

from cluster.model import StreamConfig
from cluster.stream_fsm import ApplyOutcome, DeleteResult, ExpireResult, PolicyResult, PubResult
from cluster.streams import Stream
from store.memory import MemoryStreamStore


def _stream(**kw: object) -> Stream:
    cfg = StreamConfig(name="S", subjects=("s.>",), **kw)  # type: ignore[arg-type]
    return Stream(cfg, MemoryStreamStore(cfg.limits()), created_ns=1)


async def _publish(stream: Stream, subject: str, payload: bytes) -> object:
    got: list[object] = []
    done = trio.Event()

    def on_result(r: object) -> None:
        got.append(r)
        done.set()

    assert stream.offer(subject, None, payload, on_result)
    await done.wait()
    return got[0]


async def test_max_age_expiry_is_proposed_when_due() -> None:
    stream = _stream(max_age_ns=200_000_000)
    expired = trio.Event()
    outcomes: list[ApplyOutcome] = []

    def listen(o: ApplyOutcome) -> None:
        outcomes.append(o)
        if any(isinstance(r, ExpireResult) and r.removed for r in o.results):
            expired.set()

    stream.listeners.append(listen)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            r = await _publish(stream, "s.a", b"x")
            assert isinstance(r, PubResult) and r.seq == 1
            await expired.wait()
            nursery.cancel_scope.cancel()
    st = stream.store.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 2, 1)
    assert isinstance(outcomes[0].results[0], PubResult)  # listeners saw the publish too


async def test_update_and_delete_go_through_the_group() -> None:
    stream = _stream()
    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        for i in range(5):
            await _publish(stream, "s.a", b"%d" % i)
        new_cfg = StreamConfig(name="S", subjects=("s.>",), max_msgs=2)
        r = await stream.update(new_cfg)
        assert r == PolicyResult(3)
        assert stream.cfg is new_cfg and stream.fsm.policy.limits.max_msgs == 2
        assert await stream.delete_msg(5, erase=False) == DeleteResult(5)
        nursery.cancel_scope.cancel()
    assert stream.store.state().msgs == 1
