"""Sans-IO wire codec for Raft traffic between trijet nodes.

Theory of operation
-------------------
Two layers, both pure (no I/O, no trio):

* **Frames.** A peer link carries a sequence of frames, each
  ``u32 body_len | u8 group_id_len | group_id (utf-8) | payload``. One link
  multiplexes every Raft group the two nodes share, so each frame names its
  group. ``body_len`` is checked against ``frame_bytes_max`` *before* anything
  is buffered, so a hostile or broken peer cannot make us allocate more than
  one frame's worth. :class:`FrameDecoder` is resumable: feed it any chunking
  of the byte stream (one byte at a time works) and pull complete frames.

* **Messages.** A frame payload is a CBOR array of pysyncobj messages (one
  driver cycle's output for one peer). pysyncobj's messages are plain dicts;
  every type it sends is mapped *explicitly* to a positional CBOR array here
  and validated field by field on the way back. Nothing is pickled; unknown
  CBOR tags are refused and the values of known ones fail the strict type
  checks (``type(v) is int`` etc.); and an unknown type, a missing or extra field, or a field
  of the wrong type raises :class:`WireError`. The only pysyncobj message not
  supported is the chunked ``transmission`` form of ``append_entries``
  (pysyncobj pickles the entry for it); :mod:`raft.core` configures pysyncobj
  so that it never produces one (entries are bounded below
  ``appendEntriesBatchSizeBytes``) and encoding one raises.

Three message types are trijet's own, for hibernating groups (:mod:`raft.quiet`):
``quiet`` (term, idx, log_term, commit, round), ``quiet_ack`` (term, idx, round) and
``wake`` (term).

``next_node_idx`` carries one field pysyncobj does not send: ``term`` (the
sender's term when the response was made). pysyncobj's responses carry no
term, so a stale response from an earlier term could raise a leader's match
index; :mod:`raft.core` stamps the term on send and drops mismatches on
receipt.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import cbor2

__all__ = [
    "FRAME_BYTES_MAX_DEFAULT",
    "GROUP_ID_BYTES_MAX",
    "FrameDecoder",
    "WireError",
    "decode_messages",
    "encode_frame",
    "encode_messages",
]

FRAME_BYTES_MAX_DEFAULT: Final = 8 * 1024 * 1024
GROUP_ID_BYTES_MAX: Final = 255
_HEADER = struct.Struct(">I")

Message = dict[str, Any]

_T_REQUEST_VOTE: Final = 1
_T_RESPONSE_VOTE: Final = 2
_T_APPEND_ENTRIES: Final = 3
_T_APPEND_SNAPSHOT: Final = 4
_T_NEXT_NODE_IDX: Final = 5
_T_APPLY_COMMAND: Final = 6
_T_APPLY_COMMAND_RESPONSE: Final = 7
_T_TIMEOUT_NOW: Final = 8
# raft.quiet's own (never seen by pysyncobj)
_T_QUIET: Final = 9
_T_QUIET_ACK: Final = 10
_T_WAKE: Final = 11


class WireError(ValueError):
    """Bytes that are not a valid frame or message (from a broken or hostile peer)."""


# ---------------------------------------------------------------- frames


def encode_frame(
    group_id: str, payload: bytes, frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT
) -> bytes:
    """Encode one frame.

    Args:
        group_id: Raft group name, 1..255 utf-8 bytes.
        payload: opaque bytes (normally :func:`encode_messages` output).
        frame_bytes_max: bound on the body (everything after the length prefix).

    Returns:
        The frame bytes, length prefix included.

    Raises:
        WireError: group id empty or too long, or the frame exceeds the bound.
    """
    gid = group_id.encode("utf-8")
    if not 0 < len(gid) <= GROUP_ID_BYTES_MAX:
        raise WireError(f"group id length {len(gid)} out of range")
    body_len = 1 + len(gid) + len(payload)
    if body_len > frame_bytes_max:
        raise WireError(f"frame body {body_len} bytes > frame_bytes_max {frame_bytes_max}")
    return b"".join((_HEADER.pack(body_len), bytes((len(gid),)), gid, payload))


class FrameDecoder:
    """Resumable decoder of a frame stream.

    ``feed`` bytes as they arrive, then call ``next_frame`` until it returns
    ``None``. After a :class:`WireError` the stream is unusable (the caller
    closes the link).
    """

    def __init__(self, frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT) -> None:
        self.frame_bytes_max = frame_bytes_max
        self._buf = bytearray()
        self._pos = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> None:
        """Append received bytes; raises WireError if a declared length is over the bound."""
        if self._pos and self._pos >= len(self._buf) // 2:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data
        self._check_header()

    def _check_header(self) -> None:
        if len(self._buf) - self._pos >= 4:
            (body_len,) = _HEADER.unpack_from(self._buf, self._pos)
            if body_len > self.frame_bytes_max or body_len < 2:
                raise WireError(f"frame body length {body_len} out of range")

    def next_frame(self) -> tuple[str, bytes] | None:
        """Return the next complete ``(group_id, payload)`` or None if more bytes are needed."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (body_len,) = _HEADER.unpack_from(buf, pos)
        if body_len > self.frame_bytes_max or body_len < 2:
            raise WireError(f"frame body length {body_len} out of range")
        end = pos + 4 + body_len
        if len(buf) < end:
            return None
        gid_len = buf[pos + 4]
        if gid_len == 0 or 1 + gid_len > body_len:
            raise WireError("bad group id length")
        try:
            gid = bytes(buf[pos + 5 : pos + 5 + gid_len]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise WireError("group id is not utf-8") from e
        payload = bytes(buf[pos + 5 + gid_len : end])
        self._pos = end
        if self._pos == len(buf):
            buf.clear()
            self._pos = 0
        else:
            self._check_header()
        return gid, payload


# ---------------------------------------------------------------- messages


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise WireError(f"{what}: expected int, got {type(v).__name__}")
    return v


def _opt_int(v: Any, what: str) -> int | None:
    return None if v is None else _int(v, what)


def _bool(v: Any, what: str) -> bool:
    if type(v) is not bool:
        raise WireError(f"{what}: expected bool, got {type(v).__name__}")
    return v


def _bytes(v: Any, what: str) -> bytes:
    if type(v) is not bytes:
        raise WireError(f"{what}: expected bytes, got {type(v).__name__}")
    return v


def _encode_one(m: Message) -> list[Any]:
    t = m.get("type")
    if t == "request_vote":
        return [_T_REQUEST_VOTE, m["term"], m["last_log_index"], m["last_log_term"]]
    if t == "response_vote":
        return [_T_RESPONSE_VOTE, m["term"]]
    if t == "append_entries":
        if "transmission" in m:
            raise WireError("chunked append_entries transmission is not supported")
        if "prevLogIdx" in m:
            entries = [[e[0], e[1], e[2]] for e in m.get("entries", ())]
            return [
                _T_APPEND_ENTRIES,
                m["term"],
                m["commit_index"],
                m["prevLogIdx"],
                m["prevLogTerm"],
                entries,
            ]
        ser = m.get("serialized")
        if ser is not None:
            ser = [ser[0], ser[1], ser[2]]
        return [_T_APPEND_SNAPSHOT, m["term"], m["commit_index"], ser]
    if t == "next_node_idx":
        return [
            _T_NEXT_NODE_IDX,
            m["next_node_idx"],
            m["reset"],
            m["success"],
            m.get("term"),
        ]
    if t == "apply_command":
        return [_T_APPLY_COMMAND, m["command"], m.get("request_id")]
    if t == "apply_command_response":
        return [
            _T_APPLY_COMMAND_RESPONSE,
            m["request_id"],
            m.get("error"),
            m.get("log_idx"),
            m.get("log_term"),
        ]
    if t == "timeout_now":
        return [_T_TIMEOUT_NOW, m["term"]]
    if t == "quiet":
        return [_T_QUIET, m["term"], m["idx"], m["log_term"], m["commit"], m["round"]]
    if t == "quiet_ack":
        return [_T_QUIET_ACK, m["term"], m["idx"], m["round"]]
    if t == "wake":
        return [_T_WAKE, m["term"]]
    raise WireError(f"unknown message type {t!r}")


def _decode_entry(e: Any) -> tuple[bytes, int, int]:
    if type(e) is not list or len(e) != 3:
        raise WireError("entry: expected [command, idx, term]")
    return (_bytes(e[0], "entry.command"), _int(e[1], "entry.idx"), _int(e[2], "entry.term"))


def _decode_one(a: Any) -> Message:
    if type(a) is not list or not a:
        raise WireError("message: expected non-empty array")
    t = a[0]
    n = len(a)
    if t == _T_REQUEST_VOTE and n == 4:
        return {
            "type": "request_vote",
            "term": _int(a[1], "term"),
            "last_log_index": _int(a[2], "last_log_index"),
            "last_log_term": _int(a[3], "last_log_term"),
        }
    if t == _T_RESPONSE_VOTE and n == 2:
        return {"type": "response_vote", "term": _int(a[1], "term")}
    if t == _T_APPEND_ENTRIES and n == 6:
        if type(a[5]) is not list:
            raise WireError("entries: expected array")
        return {
            "type": "append_entries",
            "term": _int(a[1], "term"),
            "commit_index": _int(a[2], "commit_index"),
            "prevLogIdx": _opt_int(a[3], "prevLogIdx"),
            "prevLogTerm": _opt_int(a[4], "prevLogTerm"),
            "entries": [_decode_entry(e) for e in a[5]],
        }
    if t == _T_APPEND_SNAPSHOT and n == 4:
        ser = a[3]
        if ser is not None:
            if type(ser) is not list or len(ser) != 3:
                raise WireError("serialized: expected [data, is_first, is_last]")
            ser = (
                _bytes(ser[0], "serialized.data"),
                _bool(ser[1], "serialized.is_first"),
                _bool(ser[2], "serialized.is_last"),
            )
        return {
            "type": "append_entries",
            "term": _int(a[1], "term"),
            "commit_index": _int(a[2], "commit_index"),
            "serialized": ser,
        }
    if t == _T_NEXT_NODE_IDX and n == 5:
        m: Message = {
            "type": "next_node_idx",
            "next_node_idx": _int(a[1], "next_node_idx"),
            "reset": _bool(a[2], "reset"),
            "success": _bool(a[3], "success"),
        }
        if a[4] is not None:
            m["term"] = _int(a[4], "term")
        return m
    if t == _T_APPLY_COMMAND and n == 3:
        m = {"type": "apply_command", "command": _bytes(a[1], "command")}
        if a[2] is not None:
            m["request_id"] = _int(a[2], "request_id")
        return m
    if t == _T_APPLY_COMMAND_RESPONSE and n == 5:
        m = {"type": "apply_command_response", "request_id": _int(a[1], "request_id")}
        if a[2] is not None:
            m["error"] = _int(a[2], "error")
        else:
            m["log_idx"] = _int(a[3], "log_idx")
            m["log_term"] = _int(a[4], "log_term")
        return m
    if t == _T_TIMEOUT_NOW and n == 2:
        return {"type": "timeout_now", "term": _int(a[1], "term")}
    if t == _T_QUIET and n == 6:
        return {
            "type": "quiet",
            "term": _int(a[1], "term"),
            "idx": _int(a[2], "idx"),
            "log_term": _int(a[3], "log_term"),
            "commit": _int(a[4], "commit"),
            "round": _int(a[5], "round"),
        }
    if t == _T_QUIET_ACK and n == 4:
        return {
            "type": "quiet_ack",
            "term": _int(a[1], "term"),
            "idx": _int(a[2], "idx"),
            "round": _int(a[3], "round"),
        }
    if t == _T_WAKE and n == 2:
        return {"type": "wake", "term": _int(a[1], "term")}
    raise WireError(f"unknown message type/arity {t!r}/{n}")


def encode_messages(messages: list[Message]) -> bytes:
    """Encode a list of pysyncobj message dicts as one CBOR payload.

    Raises:
        WireError: a message type or shape this codec does not map.
    """
    try:
        return cbor2.dumps([_encode_one(m) for m in messages])
    except (KeyError, IndexError, TypeError, cbor2.CBOREncodeError) as e:
        raise WireError(f"cannot encode message: {e!r}") from e


def _no_tags(decoder: Any, tag: Any) -> Any:
    raise WireError("CBOR tags are not accepted")


def decode_messages(payload: bytes) -> list[Message]:
    """Decode and validate a payload made by :func:`encode_messages`.

    Raises:
        WireError: not CBOR, a tag, an unknown message, or a field of the wrong type.
    """
    try:
        raw = cbor2.loads(payload, tag_hook=_no_tags, max_depth=8)
    except WireError:
        raise
    except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError) as e:
        raise WireError(f"bad CBOR payload: {e!r}") from e
    if type(raw) is not list:
        raise WireError("payload: expected array")
    return [_decode_one(a) for a in raw]
