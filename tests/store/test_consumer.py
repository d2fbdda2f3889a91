"""ConsumerStore: memory and file implementations, crash safety of the file one."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.api import ConsumerState, ConsumerStore, Pending
from store.consumer import FileConsumerStore, decode_consumer_state, encode_consumer_state
from store.errors import CorruptionError, StoreClosed
from store.memory import MemoryConsumerStore

STATE = ConsumerState(
    delivered_consumer_seq=12,
    delivered_stream_seq=40,
    ack_floor_consumer_seq=9,
    ack_floor_stream_seq=31,
    pending={35: Pending(10, 1_700_000_000_000_000_001), 40: Pending(12, 2)},
    redelivered={35: 2},
)


@pytest.fixture(params=["memory", "file"])
def cstore(request: pytest.FixtureRequest, tmp_path: Path) -> ConsumerStore:
    if request.param == "memory":
        return MemoryConsumerStore()
    return FileConsumerStore(tmp_path / "c")


def test_codec_round_trip() -> None:
    assert decode_consumer_state(encode_consumer_state(STATE)) == STATE
    assert decode_consumer_state(encode_consumer_state(ConsumerState())) == ConsumerState()
    with pytest.raises(ValueError):
        decode_consumer_state(b"\x01\x02")


def test_save_load(cstore: ConsumerStore) -> None:
    assert cstore.load() == ConsumerState()
    cstore.save(STATE)
    assert cstore.load() == STATE
    cstore.sync()
    cstore.close()
    with pytest.raises(StoreClosed):
        cstore.load()


def test_file_persists_only_after_sync(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    cs.save(STATE)
    assert FileConsumerStore(d).load() == ConsumerState()  # not yet durable
    cs.sync()
    assert FileConsumerStore(d).load() == STATE
    cs.save(ConsumerState(delivered_consumer_seq=99))
    cs.close()  # close syncs
    assert FileConsumerStore(d).load().delivered_consumer_seq == 99


def test_file_ignores_torn_temp_and_detects_corruption(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    cs.save(STATE)
    cs.close()
    (d / "state.tmp").write_bytes(b"TJCS\x01garbage")  # crash mid-write of a newer state
    again = FileConsumerStore(d)
    assert again.load() == STATE
    assert not (d / "state.tmp").exists()
    data = bytearray((d / "state").read_bytes())
    data[-1] ^= 0x10
    (d / "state").write_bytes(bytes(data))
    with pytest.raises(CorruptionError):
        FileConsumerStore(d)


def test_file_delete(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    cs.save(STATE)
    cs.sync()
    cs.delete()
    assert not (d / "state").exists()
    assert FileConsumerStore(d).load() == ConsumerState()
