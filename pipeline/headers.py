"""NATS header blocks for the Spark source and sink: encoding (multi-valued), parsing, and
the Arrow ``map<string, array<string>>`` column the source builds per chunk.

Theory of operation: nats-py folds a repeated header name into one value; the pipeline keeps
every value.  ``encode_headers`` writes a block one line per value; ``header_pairs`` reads one
back; ``header_map_array`` turns a chunk's blocks into one Arrow map column — by Arrow kernels
over the whole chunk when every block has the plain shape (``header_map_bulk``), else from
flat Python lists (``header_map_lists``).  Both give the same content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import wire

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})


def encode_headers(headers: Sequence[tuple[str, Sequence[str]]]) -> bytes | None:
    """``[(name, [values…])]`` as a header block, one line per value (repeated names stay
    repeated, in order); None when there is nothing to send.  Names are checked as nats-py
    checks them; CR/LF in values become spaces, as nats-py does."""
    lines = [b"NATS/1.0"]
    for name, values in headers:
        key = name.strip()
        if not key:
            continue
        if not _HEADER_NAME.fullmatch(key):
            raise ValueError(f"invalid header name {name!r}")
        for v in values:
            lines.append(f"{key}: {v.strip().translate(_NEWLINES)}".encode())
    if len(lines) == 1:
        return None
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def msg_id_block(msg_id: str) -> bytes:
    """``encode_headers([("Nats-Msg-Id", [msg_id])])`` for the common case, faster."""
    return b"NATS/1.0\r\nNats-Msg-Id: %s\r\n\r\n" % msg_id.strip().translate(_NEWLINES).encode()


def header_pairs(block: bytes | None) -> list[tuple[str, list[str]]] | None:
    """A message's header block as ``[(name, [values…])]`` (repeated names keep every value in
    order; None for no block or no headers)."""
    if block is None:
        return None
    return wire.parse_headers(block)[1] or None


def utf8_array(values: Sequence[bytes] | pa.Array) -> pa.Array:
    """UTF-8 bytes (a list or a binary array) as a string array (invalid UTF-8 decoded with
    replacement characters)."""
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.binary())
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: as parse_headers decodes it
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()],
            pa.string(),
        )


_BLOCK_START = b"NATS/1.0\r\n"
_BLOCK_END = b"\r\n\r\n"


def header_map_array(blocks: Sequence[bytes | None] | pa.Array) -> pa.Array:
    """Header blocks as one ``map<string, array<string>>`` Arrow array (the same content as
    ``header_pairs`` per block: names and values stripped, a repeated name one entry with
    every value in order, no headers -> null).

    Built by Arrow kernels over the whole chunk when every block has the plain shape
    (``header_map_bulk``), else from flat Python lists (``header_map_lists``).  ``blocks``
    may be a binary Arrow array (null: no headers)."""
    arr = blocks if isinstance(blocks, pa.Array) else pa.array(blocks, pa.binary())
    out = header_map_bulk(arr)
    if out is not None:
        return out
    return header_map_lists(arr.to_pylist() if isinstance(blocks, pa.Array) else blocks)


def header_map_bulk(arr: pa.Array) -> pa.Array | None:
    """``header_map_array`` by Arrow kernels, or None when a block is not of the plain shape
    this path handles: ``NATS/1.0\r\n`` (no status), one or more ``Name: value`` lines,
    ``\r\n\r\n``, UTF-8, no name repeated within a block."""
    valid = arr.drop_null()
    if not len(valid):
        return None
    ok = pc.and_(
        pc.and_(pc.starts_with(valid, _BLOCK_START), pc.ends_with(valid, _BLOCK_END)),
        pc.greater(pc.binary_length(valid), len(_BLOCK_START) + len(_BLOCK_END)),
    )
    if not pc.all(ok).as_py():
        return None
    inner = pc.binary_slice(arr, len(_BLOCK_START), -len(_BLOCK_END))
    lines = pc.split_pattern(inner, "\r\n")
    flat = lines.flatten()
    if not pc.all(pc.match_substring(flat, ":")).as_py():
        return None
    kv = pc.split_pattern(flat, ":", max_splits=1)
    try:
        keys = pc.ascii_trim_whitespace(pc.list_element(kv, 0).cast(pa.string()))
        values = pc.ascii_trim_whitespace(pc.list_element(kv, 1).cast(pa.string()))
    except pa.ArrowInvalid:  # not UTF-8: the list path decodes with replacement
        return None
    counts = pc.fill_null(pc.list_value_length(lines), 0)
    if pc.max(counts).as_py() > 1:
        t = pa.table({"row": pc.list_parent_indices(lines), "key": keys})
        if t.group_by(["row", "key"]).aggregate([]).num_rows != len(keys):
            return None  # a repeated name: grouped by the list path
    offsets = pa.concat_arrays(
        [pa.array([0], pa.int32()), pc.cumulative_sum(counts).cast(pa.int32())]
    )
    items = pa.ListArray.from_arrays(_arange(len(values) + 1), values)
    return pa.MapArray.from_arrays(offsets, keys, items, mask=pc.is_null(arr))


_ARANGE: list[pa.Array] = [pa.array([0], pa.int32())]


def _arange(n: int) -> pa.Array:
    """``0, 1, …, n - 1`` as int32 (a slice of one cached array; building from a Python
    range costs ~0.3 µs per element)."""
    a = _ARANGE[0]
    if len(a) < n:
        size = max(n, 2 * len(a), 1 << 16)
        a = _ARANGE[0] = pc.subtract(
            pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int32()), size)), 1
        )
    return a.slice(0, n)


def header_map_lists(blocks: Sequence[bytes | None]) -> pa.Array:
    """``header_map_array`` from flat Python lists (any block shape)."""
    map_offsets: list[int] = [0]
    keys: list[bytes] = []
    item_offsets: list[int] = [0]
    values: list[bytes] = []
    mask: list[bool] = []
    for block in blocks:
        start = len(keys)
        if block is not None:
            for line in block.split(b"\r\n")[1:]:
                k, sep, v = line.partition(b":")
                if sep:
                    keys.append(k.strip())
                    values.append(v.strip())
                    item_offsets.append(len(values))
            n = len(keys) - start
            if n > 1 and len(set(keys[start:])) != n:  # a repeated name: group its values
                grouped: dict[bytes, list[bytes]] = {}
                for k, v in zip(keys[start:], values[len(values) - n :], strict=True):
                    grouped.setdefault(k, []).append(v)
                del keys[start:], values[len(values) - n :], item_offsets[start + 1 :]
                for k, vs in grouped.items():
                    keys.append(k)
                    values.extend(vs)
                    item_offsets.append(len(values))
        mask.append(len(keys) == start)
        map_offsets.append(len(keys))
    items = pa.ListArray.from_arrays(pa.array(item_offsets, pa.int32()), utf8_array(values))
    return pa.MapArray.from_arrays(
        pa.array(map_offsets, pa.int32()), utf8_array(keys), items, mask=pa.array(mask, pa.bool_())
    )
