"""One account's view of the cluster's meta layer.

Theory of operation: a clustered server runs one member of ``_meta_``
(``node.jetstream.meta.MetaLayer``) for every account with JetStream; the
meta state keys assignments by (account, stream name).  Each account's
``JetStreamService`` holds an ``AccountMeta`` as ``svc.meta`` (and
``svc.assignments``): the same interface as the layer, narrowed to the
account.  Its ``configs``, ``assignment`` and ``replicated_block`` see only
the account's streams, ``answers`` decides who answers the account's API
requests from the account's own streams and assignments, and
``account`` is what the service's meta entries name.  What is not about
streams (the group, its leader, placement, links, the RNG, proposals) is the
layer's, reached through attribute delegation.

The home account's service (the first with JetStream) creates the layer and
runs it; the others share it (``for_service``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from cluster.meta import StreamAssignment
from cluster.model import StreamConfig
from node.jetstream.meta import META_LEADER_OPS, MetaLayer, stream_of_op

#: asked of the leader of the moment: never parked until the next one is known
STEPDOWN_OPS = frozenset({("STREAM", "LEADER", "STEPDOWN"), ("CONSUMER", "LEADER", "STEPDOWN")})
#: not idempotent: like a stepdown, only the leader at arrival acts on it
#: (never parked for the next leader while its group elects; ``AccountMeta.answers``)
UNREPEATABLE_OPS = frozenset({("STREAM", "PURGE")})

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService


class AccountMeta:
    """``svc``'s account's view of ``layer``.

    Args:
        layer: the server's meta layer.
        svc: the account's JetStream service.
    """

    def __init__(self, layer: MetaLayer, svc: JetStreamService) -> None:
        self.layer = layer
        self.svc = svc
        self.account: str = svc.account.name
        #: the service runs (its API and registries exist): the layer may reconcile it
        self.started = False
        layer.register(self)

    @classmethod
    def for_service(cls, svc: JetStreamService) -> AccountMeta:
        """The view of ``svc``: on the home service's layer, or a new layer
        (``svc`` is the home account's: the first service made)."""
        home = svc.server.jetstream
        layer = home.meta.layer if home is not None and home.meta is not None else None
        return cls(layer if layer is not None else MetaLayer(svc), svc)

    @property
    def runs_layer(self) -> bool:
        """Whether this view's service runs the layer (the home account's)."""
        return self.layer.svc is self.svc

    def mark_started(self) -> None:
        self.started = True
        self.layer.view_started()

    def __getattr__(self, name: str) -> Any:
        # the group, leadership, placement, links, rng, proposals: the layer's
        if name == "layer":  # not set yet (never recurse)
            raise AttributeError(name)
        return getattr(self.layer, name)

    # -- the account's assignments ------------------------------------------------

    @property
    def ready(self) -> trio.Event:
        return self.layer.ready

    def configs(self) -> dict[str, StreamConfig]:
        """The account's stream configs, by name (the meta state's, parsed once)."""
        return self.layer.machine.configs(self.account)

    def assignment(self, stream: str) -> StreamAssignment | None:
        """The account's assignment of ``stream``."""
        return self.layer.machine.stream(stream, self.account)

    def replicated_block(self, stream: Any) -> dict[str, Any]:
        """StreamInfo ``cluster`` of the account's replicated stream."""
        return self.layer.replicated_block(stream, self.account)

    def park(
        self,
        req: Any,
        dispatch: Callable[[Any], None],
        declined: Callable[[Any, float], None] | None = None,
    ) -> None:
        """Hold an API request until a meta leader is known (``declined``:
        told if another server answers it)."""
        self.layer.park(req, dispatch, self.answers, declined)

    def answers(self, op: tuple[str, ...]) -> bool | None:
        """Whether this server handles the account's API request (exactly one
        does); None while that depends on a meta leader not known yet (park it)."""
        layer = self.layer
        if op[:3] in META_LEADER_OPS:  # about a stream, decided by the meta leader
            if not layer.ready.is_set() or layer.leader is None:
                return None
            return layer.decider(self.account) == layer.name
        name = stream_of_op(op)
        local = None if name is None else self.svc.api.streams.get(name)
        if local is not None:  # this server runs the stream
            rg = local.replicated
            if rg is None:
                return True
            if rg.leader_id is None:
                # its group is electing: answered by the new leader -- but for a
                # leader stepdown, which is the old leader's alone to act on
                # (the election is often its own: the new leader would step
                # down again), and a purge, which is not idempotent (the old
                # leader may have applied it: applied again, it would remove
                # messages acknowledged in between); nats-server leaves a
                # leaderless asset's requests unanswered
                if op[:3] in STEPDOWN_OPS or op[:2] in UNREPEATABLE_OPS:
                    return False
                return None
            if rg.is_leader and rg.transferring and op[:3] not in STEPDOWN_OPS:
                # handing the lead over: its successor answers (held until the
                # transfer ends; a copy this old leader declines then is
                # handed over, ``node.jetstream.handover``) -- two leaders
                # answering the same request in the transfer's window were two
                # answers, and a read here could be stale
                return None if op[:2] not in UNREPEATABLE_OPS else True
            return bool(rg.is_leader)
        if not layer.ready.is_set():
            return True if layer.unavailable(op) else None
        leader = layer.leader
        if leader is None:
            return True if layer.unavailable(op) else None
        sa = None if name is None else self.assignment(name)
        if sa is not None and layer.hosts(sa):
            return None  # assigned here and starting: answered once it runs
        if layer.decider(self.account) != layer.name:
            return False
        return sa is None
