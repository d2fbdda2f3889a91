"""A store that fails under a replicated apply (ENOSPC while a file segment rolls) marks its
replica damaged: it stops leading, answering reads, serving catch-up, marking and taking
snapshots, so nothing trusts a store that missed an entry (a restart rebuilds it from its
mark, the journal and its peers)."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from cluster.ops import Publish, StreamMsg, StreamPolicy, encode_op
from cluster.replicated import ReplicatedStreamFSM
from cluster.stream_fsm import StreamStateMachine
from raft.errors import InvariantViolation
from store.limits import StreamLimits
from store.memory import MemoryStreamStore

T0 = 1_700_000_000 * 1_000_000_000


class FailingStore(MemoryStreamStore):
    full = False

    def append(self, *a: Any, **kw: Any) -> Any:
        if self.full:
            raise OSError(errno.ENOSPC, "no space left on device")
        return super().append(*a, **kw)


def _msg(i: int) -> bytes:
    return encode_op(StreamMsg((Publish("s", None, b"%d" % i, T0 + i),)))


def test_a_store_failing_under_an_apply_marks_the_replica_damaged() -> None:
    store = FailingStore(StreamLimits())
    rfsm = ReplicatedStreamFSM(StreamStateMachine(store, StreamPolicy(name="S")), 0)
    told: list[int] = []
    rfsm.on_damaged = lambda: told.append(1)
    rfsm.apply_at(_msg(1), 1)
    assert rfsm.can_lead() and rfsm.current
    store.full = True
    with pytest.raises(OSError):
        rfsm.apply_at(_msg(2), 2)
    with pytest.raises(OSError):
        rfsm.apply_at(_msg(3), 3)
    assert rfsm.damaged and told == [1]  # told once
    assert not rfsm.can_lead() and not rfsm.current  # never leads, answers, serves or marks
    assert rfsm.applied == 1  # the mark never passes the failed entry
    with pytest.raises(InvariantViolation, match="damaged"):
        rfsm.snapshot()  # no snapshot describes the damaged store
