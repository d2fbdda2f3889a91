"""raft.syncer.SyncThread: jobs run in its thread, one at a time; results, errors,
callbacks and cancellation as documented; close stops the thread."""

from __future__ import annotations

import threading

import pytest
import trio

from raft.syncer import SyncThread

WAIT_S = 10.0


async def test_run_in_the_thread_in_order_and_errors_raised_again() -> None:
    st = SyncThread("t-run")
    seen: list[tuple[int, str]] = []
    try:
        for i in range(50):
            await st.run(lambda i=i: seen.append((i, threading.current_thread().name)))
        assert seen == [(i, "t-run") for i in range(50)]

        def boom() -> None:
            raise OSError(28, "No space left on device")

        with pytest.raises(OSError, match="No space"):
            await st.run(boom)
        await st.run(seen.clear)  # the thread goes on after a failed job
        assert seen == []
    finally:
        st.close()
    await trio.to_thread.run_sync(st._thread.join, WAIT_S)
    assert not st._thread.is_alive()
    with pytest.raises(RuntimeError):
        st.submit(seen.clear)


async def test_start_calls_back_in_the_trio_thread() -> None:
    st = SyncThread("t-start")
    trio_thread = threading.current_thread()
    got: list[tuple[BaseException | None, bool]] = []
    done = trio.Event()

    def on_done(err: BaseException | None) -> None:
        got.append((err, threading.current_thread() is trio_thread))
        done.set()

    def fail() -> None:
        raise ValueError("x")

    try:
        st.start(fail, on_done)
        with trio.fail_after(WAIT_S):
            await done.wait()
        assert len(got) == 1 and isinstance(got[0][0], ValueError) and got[0][1]
        await st.run(lambda: None)  # a run after a start
    finally:
        st.close()


async def test_cancelled_wait_still_waits_for_the_job_and_close_waits_for_it() -> None:
    st = SyncThread("t-cancel")
    release = threading.Event()
    finished: list[bool] = []

    def slow() -> None:
        release.wait(WAIT_S)
        finished.append(True)

    with trio.CancelScope() as scope:
        scope.cancel()  # cancelled before the wait even starts
        st.submit(slow)
        trio.lowlevel.current_trio_token().run_sync_soon(release.set)
        st.close()  # during the job: takes effect when it ends
        await st.wait()
    assert finished == [True]
    await trio.to_thread.run_sync(st._thread.join, WAIT_S)
    assert not st._thread.is_alive()
