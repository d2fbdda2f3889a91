"""A replica's stream directory with a damaged config.json, in a cluster (meta_effects).

Regression (chaos corrupt-minority --target trijet --seed 1864753826): a flipped bit in a
follower's ``streams/LOG/config.json`` made ``saved_one`` raise, ``ensure_local`` failed at
every start, and the replica never ran again (S1 on that node, S3, L1).  The assignment is the
config's authority: the directory is reopened under it when its own group's journal is there,
else set aside and started fresh.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from chaos.net import FakeNetwork
from cluster.meta import StreamAssignment
from cluster.model import StreamConfig
from cluster.replicated import ReplicaSpec
from cluster.stream_registry import SavedConfigDamaged, StreamRegistry
from node.jetstream.meta_effects import _damaged

GROUP = "S-R3F-abcdefgh"


def _assignment() -> StreamAssignment:
    cfg = StreamConfig.from_dict({"name": "LOG", "subjects": ["log.>"], "num_replicas": 3})
    return StreamAssignment("LOG", cfg.to_dict(), GROUP, ("n1", "n2", "n3"), 1234)


def _spec(group: str = GROUP) -> ReplicaSpec:
    return ReplicaSpec(group, "n2", ("n1", "n2", "n3"), FakeNetwork().links("n2"))


def _damaged_dir(root: Path, journals: tuple[str, ...]) -> None:
    d = root / "streams" / "LOG"
    (d / "raft").mkdir(parents=True)
    for g in journals:
        (d / "raft" / f"{g}.journal").write_bytes(b"x")
    doc = json.dumps({"config": {"name": "LOG"}, "created_ns": 1234})
    (d / "config.json").write_text(doc[:20])  # cut short


async def test_saved_one_names_the_groups_of_a_damaged_directory(tmp_path: Path) -> None:
    _damaged_dir(tmp_path, (GROUP,))
    async with trio.open_nursery() as nursery:
        reg = StreamRegistry(str(tmp_path), nursery)
        with pytest.raises(SavedConfigDamaged) as info:
            reg.saved_one("LOG")
    assert info.value.groups == {GROUP}


def test_own_group_data_is_reopened_under_the_assignment() -> None:
    sa = _assignment()
    exc = SavedConfigDamaged("LOG", "JSONDecodeError", frozenset({GROUP}))
    cfg, created = _damaged(sa, _spec(), exc)
    assert created == sa.created_ns  # reopened (ensure_local then rewrites config.json)
    assert cfg.name == "LOG" and cfg.num_replicas == 3


@pytest.mark.parametrize("groups", [frozenset(), frozenset({"S-R3F-older000"})])
def test_other_data_is_set_aside(groups: frozenset[str]) -> None:
    sa = _assignment()
    _, created = _damaged(sa, _spec(), SavedConfigDamaged("LOG", "x", groups))
    assert created < sa.created_ns  # quarantined as an older incarnation, started fresh


def test_r1_data_with_a_damaged_config_is_set_aside() -> None:
    sa = _assignment()
    _, created = _damaged(sa, None, SavedConfigDamaged("LOG", "x", frozenset({GROUP})))
    assert created < sa.created_ns
