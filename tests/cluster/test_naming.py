"""cluster.naming: peer ids and group names as nats-server 2.15.1 shapes them (§10)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.naming import META_GROUP, group_name, peer_id


@pytest.mark.parametrize(
    ("name", "pid"), [("n1", "fjFyEjc1"), ("n2", "44jzkV9D"), ("n3", "BXScrY9i")]
)
def test_peer_ids_observed_on_the_reference(name: str, pid: str) -> None:
    assert peer_id(name) == pid


@given(st.text(min_size=1, max_size=40))
def test_peer_id_shape(name: str) -> None:
    assert re.fullmatch(r"[0-9A-Za-z]{8}", peer_id(name))


@pytest.mark.parametrize(
    ("kind", "replicas", "file", "prefix"),
    [("S", 3, True, "S-R3F-"), ("S", 1, False, "S-R1M-"), ("C", 2, True, "C-R2F-")],
)
def test_group_name_shape(kind: str, replicas: int, file: bool, prefix: str) -> None:
    name = group_name(kind, replicas, file, random.Random(1))  # type: ignore[arg-type]
    assert name.startswith(prefix)
    assert re.fullmatch(r"[SC]-R\d[FM]-[0-9A-Za-z]{8}", name)


def test_group_name_is_deterministic_per_rng_state_and_varies() -> None:
    a = group_name("S", 3, True, random.Random(42))
    assert a == group_name("S", 3, True, random.Random(42))
    r = random.Random(42)
    names = {group_name("S", 3, True, r) for _ in range(100)}
    assert len(names) == 100 and META_GROUP not in names


def test_group_name_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        group_name("X", 1, True, random.Random())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        group_name("S", 0, True, random.Random())
