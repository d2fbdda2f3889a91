"""cluster.replicated: a stream group born from an R1 store (STREAM.UPDATE 1 → 2/3).

The holder's group starts with itself alone over its existing store (sequence
numbers kept), snapshots that state before any member joins, and a member
added then installs the snapshot and fetches every message through catch-up
(``cluster.catchup``) — never a journal replay without them.  The R1
consumers' states ride in the bootstrap file into the group's table.  A
restart mid-bootstrap does it again from the file.
"""

from __future__ import annotations

import random
from pathlib import Path

import trio
import trio.testing

from chaos.net import FakeNetwork
from cluster.consumer_fsm import ConsumerStateMachine, policy_of
from cluster.consumer_model import ConsumerConfig
from cluster.consumer_table import config_bytes
from cluster.group_bootstrap import BOOTSTRAP_FILE, read_bootstrap, write_bootstrap
from cluster.ops import ConsumerCreated, Publish, StreamMsg, StreamPolicy
from cluster.replicated import ReplicatedGroup, read_mark
from cluster.stream_fsm import StreamStateMachine
from store.file import FileStreamStore
from store.memory import MemoryConsumerStore

T0 = 1_700_000_000 * 1_000_000_000
N = 40
#: the mock clock jumps once every task has waited this long in real time; the
#: journal's fsync and the snapshot run in threads, which trio sees as waiting: on
#: a loaded machine (a full run at load 6-8) a threshold of 0.01 let the mock clock
#: race ahead of them past a 60 s bound (the bootstrap takes ~0.85 mock seconds)
AUTOJUMP_S = 0.05
#: bound in mock seconds (each is at least AUTOJUMP_S of real waiting per 50 ms)
MOCK_BOUND_S = 600


def _r1_store(d: Path, n: int) -> FileStreamStore:
    store = FileStreamStore(d, segment_bytes_max=1024)
    fsm = StreamStateMachine(store, StreamPolicy("S"))
    for i in range(n):
        fsm.apply_op(StreamMsg((Publish("s.a", None, b"%d" % i, T0 + i),)))
    store.sync()
    return store


def _consumer_entry() -> tuple[str, bytes, int, str, bytes]:
    cfg = ConsumerConfig.from_dict({"durable_name": "D", "ack_policy": "explicit"})
    fsm = ConsumerStateMachine("D", MemoryConsumerStore(), save_each_op=False)
    fsm.apply_op(ConsumerCreated("D", policy_of(cfg), 1, ()))
    return ("D", config_bytes(cfg), 7, "C-R3F-x", fsm.snapshot())


def _group(n: str, peers: list[str], store: object, net: FakeNetwork, d: Path) -> ReplicatedGroup:
    fsm = StreamStateMachine(store, StreamPolicy("S"))  # type: ignore[arg-type]
    g = ReplicatedGroup("S-R3F-boot", n, peers, fsm, store, net.links(n), d, random.Random(n))  # type: ignore[arg-type]
    return g


def _payloads(store: FileStreamStore) -> list[bytes]:
    st = store.state()
    return [store.load(s).payload for s in range(st.first_seq, st.last_seq + 1)]


async def test_a_member_added_after_the_bootstrap_gets_every_message(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = AUTOJUMP_S
    net = FakeNetwork(1)
    held = _r1_store(tmp_path / "a" / "msgs", N)
    entry = _consumer_entry()
    write_bootstrap(tmp_path / "a" / "raft", [entry])
    a = _group("a", ["a"], held, net, tmp_path / "a" / "raft")
    assert a.rfsm.consumers.entries["D"].created_ns == 7  # the R1 consumer, in the table
    assert read_mark(tmp_path / "a" / "raft")[:2] == (0, N)  # nothing cut, nothing skipped
    empty = FileStreamStore(tmp_path / "b" / "msgs", segment_bytes_max=1024)
    b = _group("b", ["a", "b"], empty, net, tmp_path / "b" / "raft")  # a joiner: knows a only
    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        await nursery.start(a.run)
        with trio.fail_after(MOCK_BOUND_S):
            await a.bootstrapped.wait()
            assert not (tmp_path / "a" / "raft" / BOOTSTRAP_FILE).exists()
            assert a.is_leader and a.raft.status()["snapshots_taken"] >= 1
            out = await a.propose(StreamMsg((Publish("s.a", None, b"after", T0 + N),)))
            assert out.results[0].seq == N + 1  # the holder's sequence numbers go on
            await nursery.start(b.run)
            await a.raft.add_member("b")
            for _ in range(2000):  # bounded: b installs the snapshot and catches up
                if empty.state().last_seq == N + 1 and b.rfsm.current:
                    break
                await trio.sleep(0.05)
            await a.propose(StreamMsg((Publish("s.a", None, b"both", T0 + N + 1),)))
            for _ in range(2000):
                if empty.state().last_seq == N + 2:
                    break
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert _payloads(empty) == _payloads(held)
    assert len(_payloads(held)) == N + 2
    assert b.catchup_msgs >= N  # through catch-up, not the journal
    assert "D" in b.rfsm.consumers.entries  # the consumer came with the snapshot


async def test_a_restart_before_the_snapshot_bootstraps_again(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = AUTOJUMP_S
    d = tmp_path / "a"
    store = _r1_store(d / "msgs", N)
    write_bootstrap(d / "raft", [_consumer_entry()])
    a = _group("a", ["a"], store, FakeNetwork(1), d / "raft")  # never run: a crash
    del a
    store.close()
    assert read_bootstrap(d / "raft") is not None
    store = FileStreamStore(d / "msgs", segment_bytes_max=1024)
    net = FakeNetwork(1)
    a = _group("a", ["a"], store, net, d / "raft")
    assert store.state().last_seq == N and "D" in a.rfsm.consumers.entries
    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        await nursery.start(a.run)
        with trio.fail_after(MOCK_BOUND_S):
            await a.bootstrapped.wait()
        nursery.cancel_scope.cancel()
    assert read_bootstrap(d / "raft") is None and store.state().last_seq == N
