"""``Nats-Msg-Id`` as the stores see it: the id a stored message carries.

The stream state machine keeps the duplicate window; after a restart it
rebuilds the window from the ids of the messages inside it.  The stores keep
those ids beside their index (the file store per segment, written with the
segment's checkpoint) so the rebuild reads only them, never the stream.
"""

from __future__ import annotations

from store.ttl import header_value

__all__ = ["MSG_ID_HEADER", "msg_id_of"]

MSG_ID_HEADER = b"Nats-Msg-Id"


def msg_id_of(headers: bytes | memoryview) -> str:
    """The ``Nats-Msg-Id`` of a header block, or ``""`` if it has none.

    The first value of the case-sensitive key, trimmed of blanks, decoded as
    the state machine decodes header values.
    """
    if not headers:
        return ""
    raw = header_value(bytes(headers), MSG_ID_HEADER)
    if not raw:
        return ""
    return raw.decode("utf-8", "surrogateescape")
