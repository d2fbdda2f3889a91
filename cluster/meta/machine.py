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

Accounts: assignments are keyed by (account, stream name) (``streams``);
every stream entry names its account and touches that account's stream only,
subjects overlap only within an account, and an entry or snapshot document
without an account (written before accounts were carried) is the machine's
``default_account``'s.  Raft group names stay unique over every account (the
proposer draws a name not in ``groups()``).

Snapshots are one cbor2 document of the whole state (``snapshot``/``restore``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import cbor2

from cluster.meta.entries import (
    ACCOUNT_NOT_ENABLED,
    BAD_ENTRY,
    DEFAULT_ACCOUNT,
    NAME_IN_USE,
    PEER_NOT_MEMBER,
    PEER_REMAP_FAILED,
    REPLICAS_NOT_UPDATABLE,
    SERVER_NOT_MEMBER,
    SNAPSHOT_VERSION,
    STREAM_NOT_FOUND,
    SUBJECT_OVERLAP,
    Assigned,
    Effect,
    EntryError,
    MetaError,
    MetaOp,
    PeerRecord,
    PeerRegistered,
    PeerReplaced,
    Removed,
    ServerRemoved,
    StreamAssigned,
    StreamAssignment,
    StreamPeersChanged,
    StreamRemoved,
    StreamUpdated,
    _account,
    _i,
    _map,
    _origin,
    _s,
    _strs,
    decode_entry,
)
from cluster.model import StreamConfig
from cluster.placement import NoPlacement, PeerSpec, PlacementRequest, place

__all__ = ["MetaMachine", "specs_of"]

# ---------------------------------------------------------------- the machine


@dataclass
class MetaMachine:
    """The replicated meta state (``raft.fsm.StateMachine``).

    Attributes:
        peers: servers known to placement, by name.
        streams: stream assignments, by ``(account, name)``.
        listener: receives effects as entries apply (None: none emitted).
        solo: a standalone server's name: the machine of a cluster of one,
            which places every stream on that server without consulting
            ``placement`` (nats-server ignores it without a cluster).
        overlap: ``overlap(config, others)``: whether a stream's subjects
            overlap another's (the shell's subject rules; pure).  The proposer
            checks too, against its view; apply checks again against the
            state, so two creates decided by successive leaders cannot both
            capture one subject (None: not checked).  Subjects are an
            account's own: only the same account's streams are compared.
        default_account: the account of entries and snapshot documents that
            name none (written before accounts were carried: the single
            JetStream account of the cluster that wrote them).
    """

    peers: dict[str, PeerRecord] = field(default_factory=dict)
    streams: dict[tuple[str, str], StreamAssignment] = field(default_factory=dict)
    listener: Callable[[Effect], None] | None = None
    solo: str | None = None
    overlap: Callable[[Mapping[str, Any], Iterable[Mapping[str, Any]]], bool] | None = None
    default_account: str = DEFAULT_ACCOUNT
    #: accounts being purged: account -> the names of its streams still to delete (an
    #: ACCOUNT.PURGE survives a change of meta leader: the next one resumes it)
    purging: dict[str, set[str]] = field(default_factory=dict)
    #: ``configs()``'s parses: key -> (the assignment parsed, its config)
    _parsed: dict[tuple[str, str], tuple[StreamAssignment, StreamConfig]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # -- queries ----------------------------------------------------------

    def stream(self, name: str, account: str | None = None) -> StreamAssignment | None:
        """The assignment of ``account``'s (None: the default account's) stream ``name``."""
        return self.streams.get((self.default_account if account is None else account, name))

    def account_streams(self, account: str | None = None) -> dict[str, StreamAssignment]:
        """``account``'s assignments (None: the default account's), by name, sorted."""
        acc = self.default_account if account is None else account
        return {n: sa for (a, n), sa in sorted(self.streams.items()) if a == acc}

    def groups(self) -> set[str]:
        """The Raft group names in use (every account's: groups share the servers'
        peer links, so a proposer draws a new name until it is not among them)."""
        return {sa.group for sa in self.streams.values()}

    def accounts(self) -> list[str]:
        """The accounts that have streams, sorted."""
        return sorted({a for a, _ in self.streams})

    def configs(self, account: str | None = None) -> dict[str, StreamConfig]:
        """``account``'s (None: the default account's) stream configs, parsed (once
        per assignment), by name."""
        acc = self.default_account if account is None else account
        cache = self._parsed
        out = {}
        for key, sa in self.streams.items():
            if key[0] != acc:
                continue
            hit = cache.get(key)
            if hit is None or hit[0] is not sa:
                hit = cache[key] = (sa, StreamConfig.from_dict(sa.config))
            out[key[1]] = hit[1]
        for key in [k for k in cache if k not in self.streams]:
            del cache[key]
        return out

    def load(self) -> dict[str, int]:
        """Assets hosted per server (placement's load)."""
        out = dict.fromkeys(self.peers, 0)
        for sa in self.streams.values():
            for p in sa.peers:
                out[p] = out.get(p, 0) + 1
        return out

    def assigned_to(self, server: str) -> list[StreamAssignment]:
        """Streams ``server`` holds (every account's), by (account, name)."""
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
            if op is MetaOp.PURGE_ACCOUNT:
                return self._purge_account(d)
            return self._delete_stream(d)
        except EntryError:
            return BAD_ENTRY

    def _emit(self, effect: Effect) -> None:
        if self.listener is not None:
            self.listener(effect)

    def _peer(self, d: Mapping[str, Any]) -> PeerRegistered:
        accounts = tuple(_strs(d, "accounts")) if "accounts" in d else None
        rec = PeerRecord(_s(d, "name"), _s(d, "cluster"), tuple(_strs(d, "tags")), accounts)
        self.peers[rec.name] = rec
        return PeerRegistered(rec)

    def _add_stream(self, d: Mapping[str, Any]) -> Assigned | MetaError:
        config = _map(d, "config")
        name = _s(config, "name")
        reply = _s(d, "reply")
        group, created_ns = _s(d, "group"), _i(d, "created")
        origin = _origin(d)
        account = _account(d, self.default_account)
        existing = self.streams.get((account, name))
        if existing is not None:
            if dict(existing.config) != config:
                return NAME_IN_USE
            self._emit(StreamAssigned(existing, reply, created=False, origin=origin))
            return Assigned(existing, created=False)
        if self._overlaps(config, (account, name)):
            return SUBJECT_OVERLAP
        if "peers" in d:
            chosen: tuple[str, ...] | NoPlacement = self._pinned(config, d)
        else:
            chosen = self._place(config, d, account=account)
        if isinstance(chosen, NoPlacement):
            if "peers" not in d and self._needs_lacking(config, d, account):
                return ACCOUNT_NOT_ENABLED
            return MetaError(400, 10005, chosen.description)
        sa = StreamAssignment(name, config, group, chosen, created_ns, account=account)
        self.streams[sa.key] = sa
        self._emit(StreamAssigned(sa, reply, created=True, origin=origin))
        return Assigned(sa, created=True)

    def _place(
        self,
        config: Mapping[str, Any],
        d: Mapping[str, Any],
        keep: Sequence[str] = (),
        exclude: str | None = None,
        account: str | None = None,
    ) -> tuple[str, ...] | NoPlacement:
        """Placement over the known servers but ``exclude`` and, given ``account``, the
        servers that said JetStream does not run in it there."""
        if self.solo is not None:
            return (self.solo,)
        online = set(_strs(d, "online"))
        load = self.load()
        specs = [
            PeerSpec(p.name, p.cluster, p.tags, p.name in online, load.get(p.name, 0))
            for _, p in sorted(self.peers.items())
            if p.name != exclude
            and (account is None or p.accounts is None or account in p.accounts)
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

    def _needs_lacking(self, config: Mapping[str, Any], d: Mapping[str, Any], account: str) -> bool:
        """Whether placement fails only for the servers lacking ``account``'s JetStream
        (nats-server places there and the create fails: 503 10039)."""
        lacking = any(
            p.accounts is not None and account not in p.accounts for p in self.peers.values()
        )
        return lacking and not isinstance(self._place(config, d), NoPlacement)

    def _overlaps(self, config: Mapping[str, Any], key: tuple[str, str]) -> bool:
        """Whether ``config`` overlaps another stream of its account (subjects are an
        account's own)."""
        if self.overlap is None:
            return False
        others = [sa.config for k, sa in self.streams.items() if k[0] == key[0] and k != key]
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
        sa = self.streams.get((_account(d, self.default_account), name))
        if sa is None:
            return STREAM_NOT_FOUND
        if peer not in sa.peers:
            return PEER_NOT_MEMBER
        if len(sa.peers) < 2:
            return PEER_REMAP_FAILED
        keep = [p for p in sa.peers if p != peer]
        # the removed server is not a candidate (it leaves)
        chosen = self._place(sa.config, d, keep=keep, exclude=peer, account=sa.account)
        if isinstance(chosen, NoPlacement) or not chosen:
            return PEER_REMAP_FAILED
        added = chosen[0]
        new = StreamAssignment(
            name,
            sa.config,
            sa.group,
            (*keep, added),
            sa.created_ns,
            sa.replicated,
            (added,),
            account=sa.account,
        )
        self.streams[new.key] = new
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
        key = (_account(d, self.default_account), name)
        old = self.streams.get(key)
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
        if config.get("subjects") != old.config.get("subjects") and self._overlaps(config, key):
            return SUBJECT_OVERLAP
        self.streams[key] = sa
        self._emit(StreamUpdated(sa, old.config, reply, origin, old.peers))
        return Assigned(sa, created=False)

    def _scale(
        self, old: StreamAssignment, config: Mapping[str, Any], scale: Mapping[str, Any]
    ) -> StreamAssignment | MetaError:
        """The assignment of ``old`` scaled to ``config``'s ``num_replicas``."""
        want = _replicas(config)
        if want > len(old.peers):
            chosen = self._place(config, scale, keep=old.peers, account=old.account)
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
            old.account,
        )

    def _delete_stream(self, d: Mapping[str, Any]) -> Removed | MetaError:
        name, reply = _s(d, "name"), _s(d, "reply")  # checked before the state changes
        sa = self.streams.pop((_account(d, self.default_account), name), None)
        if sa is None:
            return STREAM_NOT_FOUND
        left = self.purging.get(sa.account)
        if left is not None:
            left.discard(name)
            if not left:
                del self.purging[sa.account]
        self._emit(StreamRemoved(sa, reply))
        return Removed(sa)

    def _purge_account(self, d: Mapping[str, Any]) -> tuple[str, ...]:
        """ACCOUNT.PURGE: the account's streams now are marked for deletion (more
        marks add to them); the names, sorted."""
        account = _s(d, "account")
        names = {n for (a, n) in self.streams if a == account}
        if names:
            self.purging.setdefault(account, set()).update(names)
        return tuple(sorted(self.purging.get(account, ())))

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
            chosen = self._place(sa.config, d, keep=keep, exclude=server, account=sa.account)
            added = chosen[0] if not isinstance(chosen, NoPlacement) and chosen else None
            changes.append((sa, added))
        del self.peers[server]
        for sa, added in changes:
            rest = tuple(p for p in sa.peers if p != server)
            peers = (*rest, added) if added is not None else rest
            joiners = (added,) if added is not None else ()
            new = StreamAssignment(
                sa.name,
                sa.config,
                sa.group,
                peers,
                sa.created_ns,
                sa.replicated,
                joiners,
                account=sa.account,
            )
            self.streams[new.key] = new
            self._emit(StreamPeersChanged(new, sa.peers, server, added or ""))
        return ServerRemoved(server, tuple(sa.name for sa, _ in changes))

    # -- snapshots ----------------------------------------------------------

    def snapshot(self) -> bytes:
        return cbor2.dumps(
            {
                "v": SNAPSHOT_VERSION,
                "peers": [_peer_doc(p) for _, p in sorted(self.peers.items())],
                "streams": [sa.to_doc() for _, sa in sorted(self.streams.items())],
                "purging": {a: sorted(n) for a, n in sorted(self.purging.items())},
            },
            canonical=True,
        )

    def restore(self, reader: BinaryIO) -> None:
        doc = cbor2.loads(reader.read())
        if not isinstance(doc, dict) or doc.get("v") != SNAPSHOT_VERSION:
            raise EntryError("unknown meta snapshot format")
        peers = {}
        for name, cluster, tags, *rest in doc["peers"]:
            accounts = tuple(rest[0]) if rest and rest[0] is not None else None
            peers[name] = PeerRecord(name, cluster, tuple(tags), accounts)
        streams = {}
        for sd in doc["streams"]:
            sa = StreamAssignment.from_doc(sd, self.default_account)
            streams[sa.key] = sa
        purging = {str(a): set(n) for a, n in (doc.get("purging") or {}).items()}
        self.peers, self.streams, self.purging = peers, streams, purging


def _peer_doc(p: PeerRecord) -> list[Any]:
    """A peer in a snapshot: [name, cluster, tags] and, when told, its accounts."""
    doc: list[Any] = [p.name, p.cluster, list(p.tags)]
    if p.accounts is not None:
        doc.append(list(p.accounts))
    return doc


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
