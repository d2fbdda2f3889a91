"""The meta group's vocabulary: its entries, state records, results and effects.

Theory of operation: ``cluster.meta.machine`` applies what is built here.  Entries are
cbor2 maps ``{"v": 1, "op": code, ...}`` (codes in ``MetaOp``: append only, never
renumber); ``decode_entry`` and the field readers (``_s``, ``_i``, ...) check every
field and raise ``EntryError`` on anything malformed.  Every stream entry names its
account (``account``): assignments are keyed by (account, stream name), so two
accounts may each have a stream ``ORDERS``.  An entry or snapshot written before
accounts were carried has none: it belongs to the machine's ``default_account`` (the
single JetStream account of the cluster that wrote it).  Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import cbor2

__all__ = [
    "ACCOUNT_NOT_ENABLED",
    "BAD_ENTRY",
    "DEFAULT_ACCOUNT",
    "FORMAT_VERSION",
    "NAME_IN_USE",
    "PEER_NOT_MEMBER",
    "PEER_REMAP_FAILED",
    "REPLICAS_NOT_UPDATABLE",
    "SERVER_NOT_MEMBER",
    "SNAPSHOT_VERSION",
    "STREAM_NOT_FOUND",
    "SUBJECT_OVERLAP",
    "Assigned",
    "Effect",
    "EntryError",
    "MetaError",
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
    "decode_entry",
    "delete_stream_entry",
    "origin_doc",
    "peer_entry",
    "purge_account_entry",
    "remove_peer_entry",
    "remove_server_entry",
    "scale_fields",
    "update_stream_entry",
]

FORMAT_VERSION = 1
SNAPSHOT_VERSION = 1
#: the account of an entry or snapshot that names none (a machine's default)
DEFAULT_ACCOUNT = "$G"


class MetaOp(IntEnum):
    """Meta entry codes (append only; never renumber or reuse)."""

    PEER = 1
    ADD_STREAM = 2
    UPDATE_STREAM = 3
    DELETE_STREAM = 4
    REMOVE_STREAM_PEER = 5
    REMOVE_SERVER = 6
    PURGE_ACCOUNT = 7


# ---------------------------------------------------------------- state types


@dataclass(frozen=True, slots=True)
class PeerRecord:
    """A JetStream server as placement knows it."""

    name: str
    cluster: str
    tags: tuple[str, ...] = ()
    #: the accounts JetStream runs in on that server (None: not told, every account;
    #: registrations from before accounts were reported)
    accounts: tuple[str, ...] | None = None


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
        account: the account the stream belongs to (with ``name``, its key).
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
    account: str = DEFAULT_ACCOUNT

    @property
    def key(self) -> tuple[str, str]:
        """``(account, name)``: the assignment's key in the meta state."""
        return self.account, self.name

    @property
    def replicated(self) -> bool:
        """Whether the stream runs a Raft group (else an R1 ``LocalGroup``)."""
        return self.raft if self.raft is not None else len(self.peers) > 1

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "account": self.account,
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
    def from_doc(
        cls, d: Mapping[str, Any], default_account: str = DEFAULT_ACCOUNT
    ) -> StreamAssignment:
        """Read ``to_doc``'s document (one without ``account``: ``default_account``'s)."""
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
            _account(d, default_account),
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
#: a placement that needs a server lacking the account's JetStream (nats-server answers
#: this when such a server is chosen and fails to create the stream)
ACCOUNT_NOT_ENABLED = MetaError(503, 10039, "JetStream not enabled for account")


# ---------------------------------------------------------------- entries


def peer_entry(peer: PeerRecord) -> bytes:
    """Register (or refresh) a server's placement facts."""
    doc: dict[str, Any] = {"name": peer.name, "cluster": peer.cluster, "tags": list(peer.tags)}
    if peer.accounts is not None:
        doc["accounts"] = list(peer.accounts)
    return _dump(MetaOp.PEER, doc)


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
    account: str | None = None,
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
        account: the stream's account (None: the machine's default account).
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
    return _dump(MetaOp.ADD_STREAM, _with_account(body, account))


def update_stream_entry(
    config: Mapping[str, Any],
    *,
    reply: str,
    origin: Mapping[str, Any] | None = None,
    scale: Mapping[str, Any] | None = None,
    account: str | None = None,
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
    return _dump(MetaOp.UPDATE_STREAM, _with_account(body, account))


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


def delete_stream_entry(name: str, *, reply: str, account: str | None = None) -> bytes:
    """Delete a stream (of ``account``; None: the machine's default account)."""
    return _dump(MetaOp.DELETE_STREAM, _with_account({"name": name, "reply": reply}, account))


def purge_account_entry(account: str) -> bytes:
    """ACCOUNT.PURGE: every stream the account has now is to be deleted (``purging``);
    each stream's own delete entry follows, from whichever server decides then."""
    return _dump(MetaOp.PURGE_ACCOUNT, {"account": account})


def remove_peer_entry(
    stream: str,
    peer: str,
    *,
    seed: int,
    online: Iterable[str],
    unique_tag: str,
    account: str | None = None,
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
    body = {
        "stream": stream,
        "peer": peer,
        "seed": seed,
        "online": sorted(online),
        "unique_tag": unique_tag,
    }
    return _dump(MetaOp.REMOVE_STREAM_PEER, _with_account(body, account))


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


def _with_account(body: dict[str, Any], account: str | None) -> dict[str, Any]:
    if account is not None:
        body["account"] = account
    return body


def _account(d: Mapping[str, Any], default: str) -> str:
    """An entry's or document's ``account`` (``default`` when it names none)."""
    if "account" not in d:
        return default
    return _s(d, "account")


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
