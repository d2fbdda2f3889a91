"""store: bytes kept safe.

A leaf package (imports nothing else of trijet).  ``store.api`` holds the
``StreamStore`` / ``ConsumerStore`` protocols, value types and the sync
contract; ``store.errors`` the named errors; ``store.limits`` the pure
retention/discard decisions; ``store.memory`` the reference in-memory stores;
``store.file`` the durable segment-file stream store; ``store.consumer`` the
durable consumer store; ``store.snapshot`` the portable snapshot format.
"""

from store.api import (
    ConsumerState,
    ConsumerStore,
    Pending,
    RecoveryReport,
    StoredMsg,
    StreamState,
    StreamStore,
    SubjectState,
    SyncPolicy,
)
from store.limits import Accounting, Discard, StreamLimits

__all__ = [
    "Accounting",
    "ConsumerState",
    "ConsumerStore",
    "Discard",
    "Pending",
    "RecoveryReport",
    "StoredMsg",
    "StreamLimits",
    "StreamState",
    "StreamStore",
    "SubjectState",
    "SyncPolicy",
]
