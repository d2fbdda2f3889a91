"""``Nats-Msg-Id`` as the stores see it: the id a stored message carries.

The stream state machine keeps the duplicate window; after a restart it
rebuilds the window from the ids of the messages inside it.  The stores keep
those ids beside their index (the file store per segment, written with the
segment's checkpoint) so the rebuild reads only them, never the stream.
"""

from __future__ import annotations

from store.ttl import header_value, msg_ttl_s

__all__ = ["MSG_ID_HEADER", "id_bytes_and_ttl", "msg_id_of"]

MSG_ID_HEADER = b"Nats-Msg-Id"
_ONLY_ID_HEAD = b"NATS/1.0\r\nNats-Msg-Id:"
_ONLY_ID_SKIP = len(_ONLY_ID_HEAD)


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


def id_bytes_and_ttl(headers: bytes | memoryview) -> tuple[bytes, int]:
    """The ``Nats-Msg-Id`` of a stored message's non-empty header block as bytes
    (``msg_id_of`` before it decodes: ``b""`` for none) and ``msg_ttl_s`` of it,
    in one look for the common block that holds only a ``Nats-Msg-Id``
    (``NATS/1.0\\r\\nNats-Msg-Id: v\\r\\n\\r\\n``: no TTL), and by the two scans
    otherwise.  The stores keep ids as bytes (what their checkpoints hold)."""
    if type(headers) is not bytes:
        headers = bytes(headers)
    if headers.startswith(_ONLY_ID_HEAD) and headers.endswith(b"\r\n\r\n"):
        if headers.count(b"\r\n") == 3:
            return headers[_ONLY_ID_SKIP:-4].strip(b" \t"), 0
    return header_value(headers, MSG_ID_HEADER) or b"", msg_ttl_s(headers)
