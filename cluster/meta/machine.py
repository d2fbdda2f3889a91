"""The meta state machine: which streams the cluster's JetStream has, and where.

Theory of operation
-------------------
The meta group ``_meta_`` is a Raft group of every JetStream server of the
cluster.  Its state is small and lives in memory: the servers known to
placement (``PeerRecord``: name, cluster, tags) and the stream assignments
(``StreamAssignment``: config, Raft group name, peers, creation time).  Every
server applies the same entries in the same order and reaches the same state
(DESIGN rule 2): placement runs *inside* ``apply`` with an RNG seeded from
the entry, and whatever the proposer observed (wall-clock time, which peers
answer, the group name it drew, the ``unique_tag`` setting) travels in the
entry.  ``apply`` never reads a clock, the network or a global RNG.

Entries are cbor2 maps ``{"v": 1, "op": code, ...}`` (codes in ``MetaOp``:
append only, never renumber).  ``decode_entry`` checks every field; a
malformed entry applies as a no-op with an error result, never an exception.

Results go back to the proposer (``Assigned``, ``Removed``, ``MetaError``,
``PeerRegistered``); *effects* go to every replica through ``listener``
(``StreamAssigned``, ``StreamUpdated``, ``StreamRemoved``), each carrying the
reply subject of the client request, so the server that hosts the stream —
not the proposer — answers the client once the change is real on it.  Effects
are only emitted while ``listener`` is set: replays of the journal at start
emit nothing; the shell reconciles from the state instead.

Scaling (STREAM.UPDATE with another ``num_replicas``) is decided here too,
from the state and the entry only: growing keeps every current peer and
places the new ones with the same placement code (the newcomers are
``joiners``: with no state of their own they start their replica knowing only
the peers that were there before them, so they can never elect each other
over the data's holders, and none of them leads before it caught up — a
replica with a hole never stands); an R1 stream that was never replicated
gets the Raft group name the proposer drew (``raft`` turns on: its host turns
its store into the group's first state).  Shrinking keeps the stream's leader
as the proposer saw it (``leader`` in the entry) and then the older peers;
the group stays a Raft group even at one replica (its consumers live in its
log).  The servers make the membership real one change at a time
(``node.jetstream.membership``).

Snapshots are one cbor2 document of the whole state (``snapshot``/``restore``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, BinaryIO

import cbor2

from cluster.model import StreamConfig
from cluster.placement import NoPlacement, PeerSpec, PlacementRequest, place

__all__ = [
    "Assigned",
    "MetaError",
    "MetaMachine",
    "MetaOp",
    "PeerRecord",
    "PeerRegistered",
    "PeerReplaced",
    "Removed",
    "ServerRemoved",
    "StreamAssigned",
    "StreamAssignment",
    "StreamPeersChanged",
    "StreamRemoved",
    "StreamUpdated",
    "add_stream_entry",
    "delete_stream_entry",
    "peer_entry",
    "remove_peer_entry",
    "remove_server_entry",
    "scale_fields",
    "update_stream_entry",
]

FORMAT_VERSION = 1
SNAPSHOT_VERSION = 1


class MetaOp(IntEnum):
    """Meta entry codes (append only; never renumber or reuse)."""

    PEER = 1
    ADD_STREAM = 2
    UPDATE_STREAM = 3
    DELETE_STREAM = 4
    REMOVE_STREAM_PEER = 5
    REMOVE_SERVER = 6


# ---------------------------------------------------------------- state types


@dataclass(frozen=True, slots=True)
class PeerRecord:
    """A JetStream server as placement knows it."""

    name: str
    cluster: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamAssignment:
    """One stream of the cluster.

    Attributes:
        name: the stream name.
        config: the stream's config as JSON-able data (``StreamConfig.to_dict``).
        group: its Raft group name (``S-R1F-…``).
        peers: the servers holding it; the first is the preferred leader.
        created_ns: creation time (the proposer's clock).
        raft: whether it runs a Raft group (None: when it has two peers or
            more; a stream scaled down to one keeps its group).
        joiners: peers added by the last scale-up, which join the running
            group (they start knowing only the others, never each other).
        desired_ns: when the last scale was asked (the proposer's clock; 0: never).
        origin: the replica count before the last scale (StreamInfo ``desired``).
    """

    name: str
    config: Mapping[str, Any]
    group: str
    peers: tuple[str, ...]
    created_ns: int
    raft: bool | None = None
    joiners: tuple[str, ...] = ()
    desired_ns: int = 0
    origin: int = 0

    @property
    def replicated(self) -> bool:
        """Whether the stream runs a Raft group (else an R1 ``LocalGroup``)."""
        return self.raft if self.raft is not None else len(self.peers) > 1

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "config": dict(self.config),
            "group": self.group,
            "peers": list(self.peers),
            "created": self.created_ns,
        }
        if self.raft is not None:
            doc["raft"] = self.raft
        if self.joiners:
            doc["joiners"] = list(self.joiners)
        if self.desired_ns or self.origin:
            doc["desired"] = [self.desired_ns, self.origin]
        return doc

    @classmethod
    def from_doc(cls, d: Mapping[str, Any]) -> StreamAssignment:
        raft = d.get("raft")
        if raft is not None and not isinstance(raft, bool):
            raise EntryError("raft: not a bool")
        desired = d.get("desired", [0, 0])
        if (
            not isinstance(desired, list)
            or len(desired) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in desired)
        ):
            raise EntryError("desired: not [time, origin]")
        return cls(
            _s(d, "name"),
            _map(d, "config"),
            _s(d, "group"),
            tuple(_strs(d, "peers")),
            _i(d, "created"),
            raft,
            tuple(_strs(d, "joiners")) if "joiners" in d else (),
            desired[0],
            desired[1],
        )


# ---------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class MetaError:
    """A refused meta change (the API error to answer with)."""

    code: int
    err_code: int
    description: str


@dataclass(frozen=True, slots=True)
class Assigned:
    """ADD_STREAM applied; ``created`` is False for an identical re-create."""

    assignment: StreamAssignment
    created: bool


@dataclass(frozen=True, slots=True)
class Removed:
    """DELETE_STREAM applied."""

    assignment: StreamAssignment


@dataclass(frozen=True, slots=True)
class PeerReplaced:
    """REMOVE_STREAM_PEER applied: ``removed`` left, ``added`` took its place."""

    assignment: StreamAssignment
    removed: str
    added: str


@dataclass(frozen=True, slots=True)
class ServerRemoved:
    """REMOVE_SERVER applied: ``streams`` had their peers changed."""

    server: str
    streams: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PeerRegistered:
    """PEER applied."""

    peer: PeerRecord


# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class StreamAssigned:
    """A stream was assigned (``created``) or an identical create re-sent."""

    assignment: StreamAssignment
    reply: str
    created: bool
    #: the request's subject, body and client (``origin_doc``), for the answer's audit
    origin: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamUpdated:
    """A stream's config was replaced (``old`` is the config before);
    ``old_peers`` differ from the assignment's when it was scaled."""

    assignment: StreamAssignment
    old: Mapping[str, Any]
    reply: str
    origin: Mapping[str, Any] = field(default_factory=dict)
    old_peers: tuple[str, ...] = ()

    @property
    def scaled(self) -> bool:
        return bool(self.old_peers) and self.old_peers != self.assignment.peers


@dataclass(frozen=True, slots=True)
class StreamRemoved:
    """A stream was deleted."""

    assignment: StreamAssignment
    reply: str


@dataclass(frozen=True, slots=True)
class StreamPeersChanged:
    """A stream's peer set changed (PEER.REMOVE, SERVER.REMOVE): ``old`` is the set
    before; ``added`` is "" when no free server could take the removed one's place."""

    assignment: StreamAssignment
    old: tuple[str, ...]
    removed: str
    added: str


Effect = StreamAssigned | StreamUpdated | StreamRemoved | StreamPeersChanged

NAME_IN_USE = MetaError(400, 10058, "stream name already in use with a different configuration")
STREAM_NOT_FOUND = MetaError(404, 10059, "stream not found")
SUBJECT_OVERLAP = MetaError(400, 10065, "subjects overlap with an existing stream")
REPLICAS_NOT_UPDATABLE = MetaError(400, 10061, "Replicas configuration can not be updated")
BAD_ENTRY = MetaError(500, 10010, "malformed meta entry")
PEER_NOT_MEMBER = MetaError(400, 10040, "peer not a member")
SERVER_NOT_MEMBER = MetaError(400, 10044, "server is not a member of the cluster")
PEER_REMAP_FAILED = MetaError(503, 10075, "peer remap failed")


# ---------------------------------------------------------------- entries


def peer_entry(peer: PeerRecord) -> bytes:
    """Register (or refresh) a server's placement facts."""
    return _dump(MetaOp.PEER, {"name": peer.name, "cluster": peer.cluster, "tags": list(peer.tags)})


def add_stream_entry(
    config: Mapping[str, Any],
    *,
    group: str,
    created_ns: int,
    seed: int,
    online: Iterable[str],
    unique_tag: str,
    reply: str,
    origin: Mapping[str, Any] | None = None,
    peers: Sequence[str] | None = None,
) -> bytes:
    """Create a stream: placement happens in apply.

    Args:
        config: the validated config (``StreamConfig.to_dict``).
        group: the Raft group name the proposer drew (used if this is new).
        created_ns: the proposer's wall clock.
        seed: seeds placement's RNG.
        online: servers the proposer sees as up (others are excluded).
        unique_tag: the proposer's ``unique_tag`` setting ("" for none).
        reply: the client's reply subject (answered by the stream's host).
        origin: the request (``origin_doc``), which the host's answer audits.
        peers: where the stream already is (a restore on the proposer): placed
            there, not by placement (they must be known servers, as many as
            the stream's replicas).
    """
    body = {
        "config": dict(config),
        "group": group,
        "created": created_ns,
        "seed": seed,
        "online": sorted(online),
        "unique_tag": unique_tag,
        "reply": reply,
    }
    if origin:
        body["origin"] = dict(origin)
    if peers is not None:
        body["peers"] = list(peers)
    return _dump(MetaOp.ADD_STREAM, body)


def update_stream_entry(
    config: Mapping[str, Any],
    *,
    reply: str,
    origin: Mapping[str, Any] | None = None,
    scale: Mapping[str, Any] | None = None,
) -> bytes:
    """Replace a stream's config (validated by the proposer against the state).

    Args:
        origin: the request (``origin_doc``), which the host's answer audits.
        scale: required when ``num_replicas`` changes (``scale_fields``);
            without it such an update is refused (10061), as before scaling.
    """
    body: dict[str, Any] = {"config": dict(config), "reply": reply}
    if origin:
        body["origin"] = dict(origin)
    if scale is not None:
        body["scale"] = dict(scale)
    return _dump(MetaOp.UPDATE_STREAM, body)


def scale_fields(
    *,
    group: str,
    seed: int,
    online: Iterable[str],
    unique_tag: str,
    leader: str,
    created_ns: int = 0,
) -> dict[str, Any]:
    """What a scaling update carries from the proposer's view.

    Args:
        group: a Raft group name drawn for a stream that gets its first group.
        seed: seeds placement's RNG.
        online: servers the proposer sees as up.
        unique_tag: the proposer's ``unique_tag`` setting.
        leader: the stream's leader as the proposer saw it ("" unknown):
            kept when scaling down.
        created_ns: the proposer's wall clock (StreamInfo ``desired.created``).
    """
    return {
        "created": created_ns,
        "group": group,
        "seed": seed,
        "online": sorted(online),
        "unique_tag": unique_tag,
        "leader": leader,
    }


def delete_stream_entry(name: str, *, reply: str) -> bytes:
    """Delete a stream."""
    return _dump(MetaOp.DELETE_STREAM, {"name": name, "reply": reply})


def remove_peer_entry(
    stream: str, peer: str, *, seed: int, online: Iterable[str], unique_tag: str
) -> bytes:
    """Replace ``peer`` in ``stream``'s assignment (STREAM.PEER.REMOVE): the
    replacement is placed in apply, among ``online`` servers not in the group.

    Args:
        stream: the stream name.
        peer: the server name to remove.
        seed: seeds placement's RNG.
        online: servers the proposer sees as up.
        unique_tag: the proposer's ``unique_tag`` setting ("" for none).
    """
    return _dump(
        MetaOp.REMOVE_STREAM_PEER,
        {
            "stream": stream,
            "peer": peer,
            "seed": seed,
            "online": sorted(online),
            "unique_tag": unique_tag,
        },
    )


def remove_server_entry(server: str, *, seed: int, online: Iterable[str], unique_tag: str) -> bytes:
    """Remove a server from the cluster's JetStream (``$JS.API.SERVER.REMOVE``): it
    leaves placement, and each replicated stream it held takes a free server in its place
    when one fits (placed in apply), else keeps running on its other peers.

    Args:
        server: the server name.
        seed: seeds placement's RNG.
        online: servers the proposer sees as up.
        unique_tag: the proposer's ``unique_tag`` setting ("" for none).
    """
    return _dump(
        MetaOp.REMOVE_SERVER,
        {"server": server, "seed": seed, "online": sorted(online), "unique_tag": unique_tag},
    )


def _dump(op: MetaOp, body: dict[str, Any]) -> bytes:
    body["v"] = FORMAT_VERSION
    body["op"] = int(op)
    return cbor2.dumps(body, canonical=True)


class EntryError(ValueError):
    """A meta entry that does not decode."""


def _s(d: Mapping[str, Any], k: str) -> str:
    v = d.get(k)
    if not isinstance(v, str):
        raise EntryError(f"{k}: not a string")
    return v


def _i(d: Mapping[str, Any], k: str) -> int:
    v = d.get(k)
    if not isinstance(v, int) or isinstance(v, bool):
        raise EntryError(f"{k}: not an integer")
    return v


def _strs(d: Mapping[str, Any], k: str) -> list[str]:
    v = d.get(k)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise EntryError(f"{k}: not a list of strings")
    return v


def _map(d: Mapping[str, Any], k: str) -> dict[str, Any]:
    v = d.get(k)
    if not isinstance(v, dict):
        raise EntryError(f"{k}: not a map")
    return v


def origin_doc(subject: str, request: bytes, client: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a host needs to audit its answer to a request it did not receive
    (nats-server's assignments carry the client, subject and request too)."""
    doc: dict[str, Any] = {"subject": subject, "request": request.decode(errors="replace")}
    if client is not None:
        doc["client"] = dict(client)
    return doc


def _origin(d: Mapping[str, Any]) -> Mapping[str, Any]:
    v = d.get("origin")
    if v is None:
        return {}
    if not isinstance(v, dict) or not isinstance(v.get("subject"), str):
        raise EntryError("origin: not a request")
    return v


def decode_entry(raw: bytes) -> tuple[MetaOp, dict[str, Any]]:
    """``(op, body)`` of an entry.

    Raises:
        EntryError: not a meta entry of a known version and op.
    """
    try:
        d = cbor2.loads(raw)
    except Exception as e:  # cbor2 raises many types; all mean "malformed"
        raise EntryError(f"not cbor: {e}") from None
    if not isinstance(d, dict) or d.get("v") != FORMAT_VERSION:
        raise EntryError("unknown format")
    code = d.get("op")
    if not isinstance(code, int) or isinstance(code, bool):
        raise EntryError(f"op {code!r}: not an integer")
    try:
        op = MetaOp(code)
    except ValueError:
        raise EntryError(f"unknown op {code}") from None
    return op, d


# ---------------------------------------------------------------- the machine


@dataclass
class MetaMachine:
    """The replicated meta state (``raft.fsm.StateMachine``).

    Attributes:
        peers: servers known to placement, by name.
        streams: stream assignments, by name.
        listener: receives effects as entries apply (None: none emitted).
        solo: a standalone server's name: the machine of a cluster of one,
            which places every stream on that server without consulting
            ``placement`` (nats-server ignores it without a cluster).
        overlap: ``overlap(config, others)``: whether a stream's subjects
            overlap another's (the shell's subject rules; pure).  The proposer
            checks too, against its view; apply checks again against the
            state, so two creates decided by successive leaders cannot both
            capture one subject (None: not checked).
    """

    peers: dict[str, PeerRecord] = field(default_factory=dict)
    streams: dict[str, StreamAssignment] = field(default_factory=dict)
    listener: Callable[[Effect], None] | None = None
    solo: str | None = None
    overlap: Callable[[Mapping[str, Any], Iterable[Mapping[str, Any]]], bool] | None = None
    #: ``configs()``'s parses: name -> (the assignment parsed, its config)
    _parsed: dict[str, tuple[StreamAssignment, StreamConfig]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # -- queries ----------------------------------------------------------

    def configs(self) -> dict[str, StreamConfig]:
        """Every stream's config, parsed (once per assignment), by name."""
        cache = self._parsed
        out = {}
        for name, sa in self.streams.items():
            hit = cache.get(name)
            if hit is None or hit[0] is not sa:
                hit = cache[name] = (sa, StreamConfig.from_dict(sa.config))
            out[name] = hit[1]
        for name in [n for n in cache if n not in out]:
            del cache[name]
        return out

    def load(self) -> dict[str, int]:
        """Assets hosted per server (placement's load)."""
        out = dict.fromkeys(self.peers, 0)
        for sa in self.streams.values():
            for p in sa.peers:
                out[p] = out.get(p, 0) + 1
        return out

    def assigned_to(self, server: str) -> list[StreamAssignment]:
        """Streams ``server`` holds, by name."""
        return [sa for _, sa in sorted(self.streams.items()) if server in sa.peers]

    # -- apply --------------------------------------------------------------

    def apply(self, entry: bytes) -> object:
        try:
            op, d = decode_entry(entry)
            if op is MetaOp.PEER:
                return self._peer(d)
            if op is MetaOp.ADD_STREAM:
                return self._add_stream(d)
            if op is MetaOp.UPDATE_STREAM:
                return self._update_stream(d)
            if op is MetaOp.REMOVE_STREAM_PEER:
                return self._remove_peer(d)
            if op is MetaOp.REMOVE_SERVER:
                return self._remove_server(d)
            return self._delete_stream(d)
        except EntryError:
            return BAD_ENTRY

    def _emit(self, effect: Effect) -> None:
        if self.listener is not None:
            self.listener(effect)

    def _peer(self, d: Mapping[str, Any]) -> PeerRegistered:
        rec = PeerRecord(_s(d, "name"), _s(d, "cluster"), tuple(_strs(d, "tags")))
        self.peers[rec.name] = rec
        return PeerRegistered(rec)

    def _add_stream(self, d: Mapping[str, Any]) -> Assigned | MetaError:
        config = _map(d, "config")
        name = _s(config, "name")
        reply = _s(d, "reply")
        group, created_ns = _s(d, "group"), _i(d, "created")
        origin = _origin(d)
        existing = self.streams.get(name)
        if existing is not None:
            if dict(existing.config) != config:
                return NAME_IN_USE
            self._emit(StreamAssigned(existing, reply, created=False, origin=origin))
            return Assigned(existing, created=False)
        if self._overlaps(config, name):
            return SUBJECT_OVERLAP
        chosen = self._pinned(config, d) if "peers" in d else self._place(config, d)
        if isinstance(chosen, NoPlacement):
            return MetaError(400, 10005, chosen.description)
        sa = StreamAssignment(name, config, group, chosen, created_ns)
        self.streams[name] = sa
        self._emit(StreamAssigned(sa, reply, created=True, origin=origin))
        return Assigned(sa, created=True)

    def _place(
        self,
        config: Mapping[str, Any],
        d: Mapping[str, Any],
        keep: Sequence[str] = (),
        exclude: str | None = None,
    ) -> tuple[str, ...] | NoPlacement:
        if self.solo is not None:
            return (self.solo,)
        online = set(_strs(d, "online"))
        load = self.load()
        specs = [
            PeerSpec(p.name, p.cluster, p.tags, p.name in online, load.get(p.name, 0))
            for _, p in sorted(self.peers.items())
            if p.name != exclude
        ]
        replicas = config.get("num_replicas") or 1
        if not isinstance(replicas, int) or replicas < 1:
            raise EntryError("num_replicas: not a positive integer")
        kept = [s for s in specs if s.name in keep]
        if keep:
            replicas = max(replicas - len(kept), 1)
        pl = config.get("placement") or {}
        if not isinstance(pl, dict):
            raise EntryError("placement: not a map")
        tags = pl.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise EntryError("placement.tags: not a list of strings")
        cluster = pl.get("cluster") or None
        if cluster is not None and not isinstance(cluster, str):
            raise EntryError("placement.cluster: not a string")
        req = PlacementRequest(replicas, cluster, tuple(tags))
        rng = random.Random(_i(d, "seed"))
        return place(req, specs, unique_tag=_s(d, "unique_tag"), rng=rng, keep=kept)

    def _overlaps(self, config: Mapping[str, Any], name: str) -> bool:
        if self.overlap is None:
            return False
        others = [sa.config for n, sa in self.streams.items() if n != name]
        return bool(others) and self.overlap(config, others)

    def _pinned(self, config: Mapping[str, Any], d: Mapping[str, Any]) -> tuple[str, ...]:
        """The peers an entry names (a restore): known servers, one per replica."""
        peers = _strs(d, "peers")
        replicas = config.get("num_replicas") or 1
        if self.solo is not None:
            return (self.solo,)
        if len(set(peers)) != len(peers) or len(peers) != replicas:
            raise EntryError("peers: not one distinct server per replica")
        if any(p not in self.peers for p in peers):
            raise EntryError("peers: unknown server")
        return tuple(peers)

    def _remove_peer(self, d: Mapping[str, Any]) -> PeerReplaced | MetaError:
        """Replace a member by a free server honouring the stream's placement
        (tags, cluster, unique_tag); 10075 when none is free (nothing changes).
        An R1 stream is refused the same way: moving it would need its data
        copied (its only replica goes), which is not built."""
        name, peer = _s(d, "stream"), _s(d, "peer")
        _i(d, "seed"), _strs(d, "online"), _s(d, "unique_tag")  # checked before any answer
        sa = self.streams.get(name)
        if sa is None:
            return STREAM_NOT_FOUND
        if peer not in sa.peers:
            return PEER_NOT_MEMBER
        if len(sa.peers) < 2:
            return PEER_REMAP_FAILED
        keep = [p for p in sa.peers if p != peer]
        # the removed server is not a candidate (it leaves)
        chosen = self._place(sa.config, d, keep=keep, exclude=peer)
        if isinstance(chosen, NoPlacement) or not chosen:
            return PEER_REMAP_FAILED
        added = chosen[0]
        new = StreamAssignment(
            name, sa.config, sa.group, (*keep, added), sa.created_ns, sa.replicated, (added,)
        )
        self.streams[name] = new
        self._emit(StreamPeersChanged(new, sa.peers, peer, added))
        return PeerReplaced(new, peer, added)

    def _update_stream(self, d: Mapping[str, Any]) -> Assigned | MetaError:
        config = _map(d, "config")
        name = _s(config, "name")
        reply = _s(d, "reply")  # every field checked before the state changes
        origin = _origin(d)
        scale = d.get("scale")
        if scale is not None and not isinstance(scale, dict):
            raise EntryError("scale: not a map")
        if scale is not None:
            _s(scale, "group"), _i(scale, "seed"), _strs(scale, "online")
            _s(scale, "unique_tag"), _s(scale, "leader"), _i(scale, "created")
        old = self.streams.get(name)
        if old is None:
            return STREAM_NOT_FOUND
        want = _replicas(config)
        if want == _replicas(old.config):
            sa = dataclasses.replace(old, config=config)
        else:
            if scale is None:  # an entry from before scaling existed
                return REPLICAS_NOT_UPDATABLE
            scaled = self._scale(old, config, scale)
            if isinstance(scaled, MetaError):
                return scaled
            sa = scaled
        if config.get("subjects") != old.config.get("subjects") and self._overlaps(config, name):
            return SUBJECT_OVERLAP
        self.streams[name] = sa
        self._emit(StreamUpdated(sa, old.config, reply, origin, old.peers))
        return Assigned(sa, created=False)

    def _scale(
        self, old: StreamAssignment, config: Mapping[str, Any], scale: Mapping[str, Any]
    ) -> StreamAssignment | MetaError:
        """The assignment of ``old`` scaled to ``config``'s ``num_replicas``."""
        want = _replicas(config)
        if want > len(old.peers):
            chosen = self._place(config, scale, keep=old.peers)
            if isinstance(chosen, NoPlacement):
                return MetaError(400, 10005, chosen.description)
            added = tuple(p for p in chosen if p not in old.peers)[: want - len(old.peers)]
            if len(old.peers) + len(added) < want:
                return MetaError(400, 10005, "no suitable peers for placement")
            group = old.group if old.replicated else _s(scale, "group")
            peers = (*old.peers, *added)
            joiners = added
        else:
            leader = _s(scale, "leader")
            order = [leader] if leader in old.peers else []
            peers = tuple([*order, *(p for p in old.peers if p != leader)][:want])
            group, joiners = old.group, ()
        return StreamAssignment(
            old.name,
            config,
            group,
            peers,
            old.created_ns,
            True if want > len(old.peers) else old.replicated,
            joiners,
            _i(scale, "created"),
            _replicas(old.config),
        )

    def _delete_stream(self, d: Mapping[str, Any]) -> Removed | MetaError:
        name, reply = _s(d, "name"), _s(d, "reply")  # checked before the state changes
        sa = self.streams.pop(name, None)
        if sa is None:
            return STREAM_NOT_FOUND
        self._emit(StreamRemoved(sa, reply))
        return Removed(sa)

    def _remove_server(self, d: Mapping[str, Any]) -> ServerRemoved | MetaError:
        """SERVER.REMOVE: the server leaves placement; each replicated stream it held
        gets a replacement when one fits, else runs on its other peers (the
        reference keeps such an R3 on two).  An R1 stream on it keeps its assignment:
        re-creating it elsewhere would start it empty (the reference does; trijet
        never drops acknowledged data on a guess), so it waits for the server."""
        server = _s(d, "server")
        _i(d, "seed"), _strs(d, "online"), _s(d, "unique_tag")  # checked before any answer
        if server not in self.peers:
            return SERVER_NOT_MEMBER
        # placement first, over the state before the change (all decided, then applied)
        changes: list[tuple[StreamAssignment, str | None]] = []
        for _, sa in sorted(self.streams.items()):
            if server not in sa.peers or len(sa.peers) < 2:
                continue
            keep = [p for p in sa.peers if p != server]
            chosen = self._place(sa.config, d, keep=keep, exclude=server)
            added = chosen[0] if not isinstance(chosen, NoPlacement) and chosen else None
            changes.append((sa, added))
        del self.peers[server]
        for sa, added in changes:
            rest = tuple(p for p in sa.peers if p != server)
            peers = (*rest, added) if added is not None else rest
            joiners = (added,) if added is not None else ()
            new = StreamAssignment(
                sa.name, sa.config, sa.group, peers, sa.created_ns, sa.replicated, joiners
            )
            self.streams[sa.name] = new
            self._emit(StreamPeersChanged(new, sa.peers, server, added or ""))
        return ServerRemoved(server, tuple(sa.name for sa, _ in changes))

    # -- snapshots ----------------------------------------------------------

    def snapshot(self) -> bytes:
        return cbor2.dumps(
            {
                "v": SNAPSHOT_VERSION,
                "peers": [[p.name, p.cluster, list(p.tags)] for _, p in sorted(self.peers.items())],
                "streams": [sa.to_doc() for _, sa in sorted(self.streams.items())],
            },
            canonical=True,
        )

    def restore(self, reader: BinaryIO) -> None:
        doc = cbor2.loads(reader.read())
        if not isinstance(doc, dict) or doc.get("v") != SNAPSHOT_VERSION:
            raise EntryError("unknown meta snapshot format")
        peers = {}
        for name, cluster, tags in doc["peers"]:
            peers[name] = PeerRecord(name, cluster, tuple(tags))
        streams = {}
        for sd in doc["streams"]:
            sa = StreamAssignment.from_doc(sd)
            streams[sa.name] = sa
        self.peers, self.streams = peers, streams


def _replicas(config: Mapping[str, Any]) -> int:
    n = config.get("num_replicas") or 1
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise EntryError("num_replicas: not a positive integer")
    return n


def specs_of(machine: MetaMachine, online: Sequence[str]) -> list[PeerSpec]:
    """Placement's view of the known servers (for stepdown and checks outside apply)."""
    load = machine.load()
    up = set(online)
    return [
        PeerSpec(p.name, p.cluster, p.tags, p.name in up, load.get(p.name, 0))
        for _, p in sorted(machine.peers.items())
    ]
