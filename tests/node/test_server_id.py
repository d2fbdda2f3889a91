"""The server id: shaped as nats-server's (a public server nkey), made without nkeys."""

from __future__ import annotations

import base64

import nkeys

from node.server import _make_server_id


def test_server_id_is_a_public_server_nkey() -> None:
    ids = {_make_server_id() for _ in range(20)}
    assert len(ids) == 20
    for sid in ids:
        assert len(sid) == 56 and sid.startswith("N")
        raw = base64.b32decode(sid)
        assert len(raw) == 35 and raw[0] == nkeys.PREFIX_BYTE_SERVER
        assert nkeys.crc16(bytearray(raw[:-2])) == int.from_bytes(raw[-2:], "little")
