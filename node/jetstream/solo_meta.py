"""The meta layer of a standalone server: a cluster of one.

Theory of operation
-------------------
A standalone server runs the same meta state machine as a cluster
(``cluster.meta.MetaMachine``, with ``solo`` set so every stream is placed on
this server) and the same request path: STREAM.CREATE, UPDATE and DELETE are
checked by ``node.jetstream.clustered`` against the meta state, turned into
meta entries, applied, and the effects make the change real through
``node.jetstream.meta_effects`` — which also answers the client, exactly as
the host of a stream answers in a cluster.

What differs is the group: where a cluster replicates meta entries through
the Raft group ``_meta_``, a group of one has nobody to agree with, so an
entry is applied as it is proposed (``LocalGroup`` stands in the same place
for an R1 stream).  The meta state needs no log of its own either: every
assignment of a single server is one stream directory on its disk, so at
start the state is rebuilt from the streams the store recovered
(``adopt``), and a restored stream (STREAM.RESTORE) is adopted the same way.
Nothing is written or fsynced for the meta layer: single-node creates cost
what they cost before.

Effects are handled inside ``propose``, in order, before it returns: the API
answers one request at a time, so the next request sees the change made.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from cluster.meta import (
    MetaMachine,
    StreamAssigned,
    StreamAssignment,
    StreamRemoved,
    StreamUpdated,
    add_stream_entry,
)
from cluster.meta.entries import (
    Effect,
)
from cluster.model import Storage, StreamConfig
from cluster.naming import group_name
from cluster.placement import PeerSpec
from node.jsapi.streamconfig import configs_overlap

if TYPE_CHECKING:
    from cluster.replica_spec import ReplicaSpec
    from cluster.streams import Stream
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)


class SoloMeta:
    """A standalone server's meta layer (the interface of ``MetaLayer`` that
    the request path and the effects use).

    Args:
        svc: the JetStream service.
    """

    cluster_name = ""
    links = None

    def __init__(self, svc: JetStreamService) -> None:
        self.svc = svc
        server = svc.server
        self.name = server.server_name
        self.tags = tuple(server.cfg.server_tags)
        self.unique_tag = server.cfg.jetstream.unique_tag or ""
        self.machine = MetaMachine(
            solo=self.name, overlap=configs_overlap, default_account=svc.account.name
        )
        self.rng = random.Random(server.rng.random())

    # -- who answers: always this server ---------------------------------------

    is_leader = True

    @property
    def leader(self) -> str:
        return self.name

    def online(self) -> list[str]:
        return [self.name]

    async def online_for(self, replicas: int) -> list[str]:
        return [self.name]

    def answers(self, op: tuple[str, ...]) -> bool:
        return True

    def unavailable(self, op: tuple[str, ...]) -> bool:
        return False

    def kick(self) -> None:
        """Nothing waits for a leader here."""

    # -- the state --------------------------------------------------------------

    def configs(self) -> dict[str, StreamConfig]:
        """Every stream's config, by name (the meta state's, parsed once)."""
        return self.machine.configs()

    def assignment(self, stream: str) -> StreamAssignment | None:
        return self.machine.stream(stream)

    def hosts(self, sa: StreamAssignment) -> bool:
        return True

    def replica_spec(
        self, sa: StreamAssignment, members: tuple[str, ...] | None = None
    ) -> ReplicaSpec | None:
        return None  # every stream of a single server is R1

    def specs(self, names: list[str]) -> list[PeerSpec]:
        return [PeerSpec(n, "", self.tags, n == self.name, 0) for n in names]

    # -- changes ------------------------------------------------------------------

    def adopt(self, stream: Stream) -> None:
        """Record a stream that exists on disk (recovered at start, or restored)
        as this server's assignment, without acting on it."""
        cfg = stream.cfg
        entry = add_stream_entry(
            cfg.to_dict(),
            group=group_name("S", 1, cfg.storage is Storage.FILE, self.rng),
            created_ns=stream.created_ns,
            seed=0,
            online=[self.name],
            unique_tag="",
            reply="",
        )
        self.machine.listener = None
        self.machine.apply(entry)

    async def propose(self, entry: bytes) -> object:
        """Apply a meta entry and act on its effects; the machine's result."""
        effects: list[Effect] = []
        self.machine.listener = effects.append
        try:
            result = self.machine.apply(entry)
        finally:
            self.machine.listener = None
        for effect in effects:
            try:
                await self._on_effect(effect)
            except Exception:
                log.exception("event=meta_effect_failed effect=%r", effect)
        return result

    async def _on_effect(self, effect: Effect) -> None:
        from node.jetstream import meta_effects

        if isinstance(effect, StreamAssigned):
            await meta_effects.assigned(self.svc, effect)
        elif isinstance(effect, StreamUpdated):
            await meta_effects.updated(self.svc, effect)
        elif isinstance(effect, StreamRemoved):
            if effect.assignment.name in self.svc.api.streams:
                await meta_effects.removed(self.svc, effect)

    # -- monitoring -------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any]:
        return {"leader": self.name}
