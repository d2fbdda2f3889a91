"""The API handover across a replicated stream's leader change (``node.jetstream.handover``).

Each server decides on its own view whether it answers a request; across a
leader change the old leader forwards what it declines to the new leader,
which answers each request once (its own copy or the forwarded one, never
both) and prefers its own copy, whose reply interest it knows to have arrived.
The group's leadership is a real ``ReplicatedGroup``'s bookkeeping over a
stand-in Raft member; time is trio's mock clock.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from cluster.naming import peer_id
from cluster.replicated import ReplicatedGroup
from node.jetstream.common import ApiRequest
from node.jetstream.handover import FWD_PREFIX, HANDOVER_S, HOLD_S, Handover, original_subject

INFO = ("STREAM", "INFO", "S")
SUBJECT = b"$JS.API.STREAM.INFO.S"


class _Group(ReplicatedGroup):
    """A ``ReplicatedGroup``'s leadership bookkeeping over a stand-in member."""

    def __init__(self) -> None:  # no Raft: only what the handover reads
        self.raft = SimpleNamespace(is_leader=False, leader_id=None)
        self._was_leader = False
        self._lead_changed_at = None
        self.leader_changed_at = None

    def set(self, leader: str | None, me: str) -> None:
        """The leadership watch saw ``leader`` lead (``me`` is this server)."""
        now = trio.current_time()
        if leader != self.raft.leader_id:
            self.leader_changed_at = now
        self.raft.leader_id = leader
        lead = leader == me
        self.raft.is_leader = lead
        if lead != self._was_leader:
            self._was_leader = lead
            self._lead_changed_at = now


class _Meta:
    def __init__(self, svc: Any) -> None:
        self.svc = svc
        self.parked: list[Any] = []

    def answers(self, op: tuple[str, ...]) -> bool | None:
        rg = self.svc.rg
        if rg.leader_id is None:
            return None
        return bool(rg.is_leader)

    def park(self, req: Any, dispatch: Any, declined: Any = None) -> None:
        self.parked.append((trio.current_time(), req, dispatch, declined))

    def unpark(self) -> None:
        parked, self.parked = self.parked, []
        for t, req, dispatch, declined in parked:
            verdict = self.answers(req.op)
            if verdict is None:
                self.parked.append((t, req, dispatch, declined))
            elif verdict:
                dispatch(req)
            elif declined is not None:
                declined(req, t)


def _server(name: str) -> Any:
    rg = _Group()
    svc = SimpleNamespace(
        server=SimpleNamespace(server_name=name),
        api=SimpleNamespace(streams={"S": SimpleNamespace(replicated=rg)}),
        rg=rg,
        sent=[],
        answered=[],
    )
    svc.client = SimpleNamespace(
        publish=lambda subject, body, reply=None, headers=None: svc.sent.append((subject, reply))
    )
    svc.meta = _Meta(svc)
    svc.answer_here = svc.answered.append
    svc.handover = Handover(svc)  # type: ignore[arg-type]
    return svc


def _req(reply: bytes = b"_INBOX.1", op: tuple[str, ...] = INFO, subject: bytes = SUBJECT) -> Any:
    return ApiRequest(subject, op, reply, None, b"")


def _own(svc: Any, req: Any) -> None:
    """What ``JetStreamService._on_api`` does with the server's own copy."""
    verdict = svc.meta.answers(req.op)
    if svc.handover.held:
        svc.handover.own_copy(req, verdict)
    if verdict is None:
        svc.meta.park(req, lambda r: _dispatch(svc, r), svc.handover.declined)
    elif not verdict:
        svc.handover.declined(req)
    else:
        _dispatch(svc, req)


def _dispatch(svc: Any, req: Any) -> None:
    if svc.handover.first(req):
        svc.answered.append(req)


def test_forward_subject_names_the_leader_by_peer_id() -> None:
    fwd = FWD_PREFIX + peer_id("n2").encode() + b"." + SUBJECT
    assert original_subject(fwd) == SUBJECT
    assert original_subject(b"$TRIJET.FWD.x") is None
    assert original_subject(b"$JS.API.INFO") is None


async def test_the_old_leader_forwards_what_it_declines_just_after_the_hand_over(
    autojump_clock: Any,
) -> None:
    old = _server("n1")
    old.rg.set("n1", "n1")
    await trio.sleep(1)
    old.rg.set("n2", "n1")  # handed over to n2
    _own(old, _req(b"_INBOX.a"))
    assert old.sent == [(FWD_PREFIX + peer_id("n2").encode() + b"." + SUBJECT, b"_INBOX.a")]
    await trio.sleep(HANDOVER_S + 0.1)
    _own(old, _req(b"_INBOX.b"))  # long after: the new leader had it too
    assert len(old.sent) == 1


async def test_a_request_held_through_the_election_is_forwarded_once_the_leader_is_known(
    autojump_clock: Any,
) -> None:
    old = _server("n1")
    old.rg.set("n1", "n1")
    old.rg.set(None, "n1")  # electing: the copy is held
    _own(old, _req(b"_INBOX.a"))
    assert old.meta.parked and not old.sent
    await trio.sleep(HANDOVER_S + 0.5)  # a long election: the arrival time counts
    old.rg.set("n3", "n1")
    old.meta.unpark()
    assert [r for _, r in old.sent] == [b"_INBOX.a"]


async def test_a_follower_never_forwards(autojump_clock: Any) -> None:
    f = _server("n3")
    f.rg.set("n1", "n3")
    f.rg.set("n2", "n3")
    _own(f, _req())
    assert f.sent == [] and f.answered == []


async def test_stepdowns_purges_pulls_and_requests_without_reply_are_never_forwarded(
    autojump_clock: Any,
) -> None:
    old = _server("n1")
    old.rg.set("n1", "n1")
    old.rg.set("n2", "n1")
    for op, subject in [
        (("STREAM", "LEADER", "STEPDOWN", "S"), b"$JS.API.STREAM.LEADER.STEPDOWN.S"),
        (("STREAM", "PURGE", "S"), b"$JS.API.STREAM.PURGE.S"),
        (("CONSUMER", "MSG", "NEXT", "S", "D"), b"$JS.API.CONSUMER.MSG.NEXT.S.D"),
    ]:
        old.handover.declined(_req(op=op, subject=subject))
    old.handover.declined(_req(reply=b""))
    assert old.sent == []


async def test_the_new_leader_answers_a_request_once_whichever_copy_comes_first(
    autojump_clock: Any,
) -> None:
    new = _server("n2")
    new.rg.set("n1", "n2")
    new.rg.set("n2", "n2")
    # its own copy first, answered; then the forwarded one: dropped
    _own(new, _req(b"_INBOX.a"))
    new.handover.hold(_req(b"_INBOX.a"))
    assert [r.reply for r in new.answered] == [b"_INBOX.a"]
    # the forwarded copy first, released (its own copy was declined before)
    new.handover.release(_req(b"_INBOX.b"))
    _dispatch(new, _req(b"_INBOX.b"))  # the own copy, answered after: dropped
    assert [r.reply for r in new.answered] == [b"_INBOX.a", b"_INBOX.b"]
    # two own copies alike are two requests: both answered
    _own(new, _req(b"_INBOX.c"))
    _own(new, _req(b"_INBOX.c"))
    assert [r.reply for r in new.answered].count(b"_INBOX.c") == 2


async def test_a_forwarded_copy_waits_for_the_own_copy_and_yields_to_it(
    autojump_clock: Any,
) -> None:
    new = _server("n2")
    new.rg.set("n2", "n2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(new.handover.run)
        new.handover.hold(_req(b"_INBOX.a"))
        await trio.sleep(HOLD_S / 2)
        assert new.answered == []  # held
        _own(new, _req(b"_INBOX.a"))  # the own copy, answered: the forwarded one dropped
        assert [r.reply for r in new.answered] == [b"_INBOX.a"]
        await trio.sleep(HOLD_S)
        assert len(new.answered) == 1 and not new.handover.held
        nursery.cancel_scope.cancel()


async def test_a_forwarded_copy_is_answered_when_the_own_copy_was_declined(
    autojump_clock: Any,
) -> None:
    new = _server("n2")
    new.rg.set("n1", "n2")
    _own(new, _req(b"_INBOX.a"))  # declined: n1 led at its arrival
    new.rg.set(None, "n2")
    new.rg.set("n2", "n2")
    new.handover.hold(_req(b"_INBOX.a"))  # answered at once, not held
    assert [r.reply for r in new.answered] == [b"_INBOX.a"]
    assert not new.handover.held


async def test_a_forwarded_copy_without_its_own_is_answered_after_the_hold(
    autojump_clock: Any,
) -> None:
    new = _server("n2")
    new.rg.set("n2", "n2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(new.handover.run)
        new.handover.hold(_req(b"_INBOX.a"))
        await trio.sleep(HOLD_S + 0.01)
        assert [r.reply for r in new.answered] == [b"_INBOX.a"]
        nursery.cancel_scope.cancel()


async def test_a_leader_deposed_while_it_read_forwards_the_request(autojump_clock: Any) -> None:
    old = _server("n1")
    old.rg.set("n1", "n1")
    _own(old, _req(b"_INBOX.a"))  # answered here: the read barrier runs ...
    old.rg.set(None, "n1")  # ... and fails: deposed
    old.handover.deposed(old.answered.pop())
    await trio.sleep(HANDOVER_S * 3)  # however long the election takes
    old.rg.set("n3", "n1")
    old.meta.unpark()
    assert [r for _, r in old.sent] == [b"_INBOX.a"]


async def test_a_released_copy_follows_the_lead_if_it_moved_on(autojump_clock: Any) -> None:
    new = _server("n2")
    new.rg.set("n2", "n2")
    new.rg.set("n3", "n2")  # lost the lead before the copy was released
    new.handover.release(_req(b"_INBOX.a"))
    assert new.answered == []
    assert new.sent == [(FWD_PREFIX + peer_id("n3").encode() + b"." + SUBJECT, b"_INBOX.a")]


def test_replicated_group_leadership_bookkeeping() -> None:
    async def body() -> None:
        g = _Group()
        assert g.lost_lead_at(trio.current_time()) is None  # never led
        g.set("n1", "n1")
        assert g.gained_lead_lately(trio.current_time(), 1.0)
        await trio.sleep(2)
        assert not g.gained_lead_lately(trio.current_time(), 1.0)
        g.raft.is_leader = False  # Raft knows before the watch does
        assert g.lost_lead_at(trio.current_time()) == trio.current_time()
        g.set("n2", "n1")
        lost = trio.current_time()
        await trio.sleep(1)
        assert g.lost_lead_at(trio.current_time()) == lost

    trio.run(body, clock=trio.testing.MockClock(autojump_threshold=0))
