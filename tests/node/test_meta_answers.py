"""Who answers a stream-scoped API request while the stream's group elects
(``AccountMeta.answers``, the seam every routed copy of a request goes through).

Every server of a cluster gets a copy of each API request; for a stream it
runs, the one that leads the stream's group answers.  While the group elects
(no leader known) a request is parked and answered by the new leader -- except
a leader stepdown: it is the old leader's alone, and the election it meets is
usually its own, so a parked copy would make the new leader step down again
(seen as a second election and a publish refused right after a consumer
stepdown, tests/integration/test_cluster_r3_leaderchange.py) -- and a purge,
which is not idempotent: the old leader may have applied it, and applied again
by the new one it would remove messages acknowledged in between.  nats-server
leaves a leaderless asset's requests unanswered (reference/jetstream-cluster.md).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from node.jetstream.meta_account import AccountMeta


def _view(leader_id: str | None, is_leader: bool, transferring: bool = False) -> AccountMeta:
    rg = SimpleNamespace(leader_id=leader_id, is_leader=is_leader, transferring=transferring)
    stream = SimpleNamespace(replicated=rg)
    svc = SimpleNamespace(api=SimpleNamespace(streams={"LC": stream}))
    view = AccountMeta.__new__(AccountMeta)
    view.layer = SimpleNamespace()  # type: ignore[assignment]  # never asked: the stream runs here
    view.svc = svc  # type: ignore[assignment]
    view.account = "$G"
    return view


STEPDOWNS = [
    ("STREAM", "LEADER", "STEPDOWN", "LC"),
    ("CONSUMER", "LEADER", "STEPDOWN", "LC", "D"),
    ("STREAM", "PURGE", "LC"),  # not idempotent: a parked copy could purge newer messages
]
OTHERS = [("STREAM", "INFO", "LC"), ("CONSUMER", "INFO", "LC", "D"), ("STREAM", "MSG", "GET", "LC")]


@pytest.mark.parametrize("op", STEPDOWNS)
def test_a_stepdown_met_by_an_election_is_dropped_not_parked(op: Any) -> None:
    assert _view(None, False).answers(op) is False
    assert _view("n2", True).answers(op) is True  # the leader of the moment acts
    assert _view("n2", False).answers(op) is False


@pytest.mark.parametrize("op", OTHERS)
def test_other_requests_wait_for_the_new_leader(op: Any) -> None:
    assert _view(None, False).answers(op) is None  # parked
    assert _view("n2", True).answers(op) is True
    assert _view("n2", False).answers(op) is False


@pytest.mark.parametrize("op", OTHERS)
def test_a_leader_handing_over_holds_requests_for_its_successor(op: Any) -> None:
    assert _view("n2", True, transferring=True).answers(op) is None  # parked
    assert _view("n2", False).answers(op) is False  # ... then declined (and handed over)


def test_a_leader_handing_over_still_acts_on_stepdowns_and_purges() -> None:
    for op in STEPDOWNS:
        assert _view("n2", True, transferring=True).answers(op) is True
