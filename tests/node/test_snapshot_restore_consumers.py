"""RESTORE's consumer step (``snapshot_api._restore_consumers``): each archived
consumer is started with its archived state seeded, and a consumer that
cannot be started takes the restored stream away again (all or nothing).

The failure cannot be provoked through a real server (the stream directory
is fresh, the archive is verified before), so the consumer manager and the
stream facade are stand-ins recording what they are asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from cluster.consumer_model import ConsumerConfig
from cluster.stream_archive import ArchivedConsumer
from node.jetstream.snapshot_api import _ConsumerRestoreError, _restore_consumers
from store.api import ConsumerState


@dataclass
class _Registry:
    seeds: dict[tuple[str, str], ConsumerState] = field(default_factory=dict)

    def seed(self, stream: str, name: str, state: ConsumerState | None) -> None:
        if state is None:
            self.seeds.pop((stream, name), None)
        else:
            self.seeds[(stream, name)] = state


@dataclass
class _Manager:
    fail: str = ""
    registry: _Registry = field(default_factory=_Registry)
    started: list[tuple[str, ConsumerConfig, ConsumerState]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    async def start(self, stream: Any, name: str, cfg: ConsumerConfig) -> None:
        if name == self.fail:
            raise OSError("disk full")
        self.started.append((name, cfg, self.registry.seeds[(stream.cfg.name, name)]))

    def drop_stream(self, stream: str) -> None:
        self.dropped.append(stream)


@dataclass
class _Api:
    deleted: list[str] = field(default_factory=list)

    async def delete_stream(self, name: str) -> None:
        self.deleted.append(name)


@dataclass
class _Svc:
    consumers: _Manager
    api: _Api = field(default_factory=_Api)


@dataclass
class _Cfg:
    name: str


@dataclass
class _Stream:
    cfg: _Cfg


STREAM = _Stream(_Cfg("S"))
ONE = ArchivedConsumer(
    "ONE", ConsumerConfig(durable_name="ONE"), 1, ConsumerState(delivered_stream_seq=4)
)
EPH = ArchivedConsumer("Eph1", ConsumerConfig(), 2, ConsumerState(delivered_stream_seq=7))


async def test_each_consumer_starts_from_its_archived_state() -> None:
    svc = _Svc(_Manager())
    await _restore_consumers(svc, STREAM, (ONE, EPH))  # type: ignore[arg-type]
    got = [(n, c.name, s.delivered_stream_seq) for n, c, s in svc.consumers.started]
    assert got == [("ONE", "ONE", 4), ("Eph1", "Eph1", 7)]  # configs name the consumer
    assert svc.consumers.registry.seeds == {}
    assert (svc.consumers.dropped, svc.api.deleted) == ([], [])


async def test_a_consumer_that_fails_takes_the_stream_away_again() -> None:
    svc = _Svc(_Manager(fail="Eph1"))
    with pytest.raises(_ConsumerRestoreError, match=r"^consumer restore failed: disk full$"):
        await _restore_consumers(svc, STREAM, (ONE, EPH))  # type: ignore[arg-type]
    assert [n for n, _, _ in svc.consumers.started] == ["ONE"]
    assert (svc.consumers.dropped, svc.api.deleted) == (["S"], ["S"])
    assert svc.consumers.registry.seeds == {}  # no seed left for a later create


async def test_no_consumers_touches_nothing() -> None:
    svc = _Svc(_Manager(fail="ONE"))
    await _restore_consumers(svc, STREAM, ())  # type: ignore[arg-type]
    assert (svc.consumers.started, svc.api.deleted) == ([], [])
