"""The JetStream meta group: replicated stream assignments and placement.

``machine`` is the pure state machine; the shell that runs it in a server is
``node.jetstream.meta``.
"""

from cluster.meta.entries import (
    Assigned,
    MetaError,
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
    add_stream_entry,
    delete_stream_entry,
    origin_doc,
    peer_entry,
    purge_account_entry,
    remove_peer_entry,
    remove_server_entry,
    scale_fields,
    update_stream_entry,
)
from cluster.meta.machine import (
    MetaMachine,
)

__all__ = [
    "Assigned",
    "MetaError",
    "MetaMachine",
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
    "origin_doc",
    "peer_entry",
    "purge_account_entry",
    "remove_peer_entry",
    "remove_server_entry",
    "scale_fields",
    "update_stream_entry",
]
