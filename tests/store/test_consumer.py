"""ConsumerStore: memory and file implementations, crash safety of the file one."""

from __future__ import annotations

from pathlib import Path

import cbor2
import pytest

from store.api import ConsumerState, ConsumerStore, Pending
from store.consumer import (
    LOG_PREALLOC_BYTES,
    FileConsumerStore,
    decode_consumer_state,
    encode_consumer_state,
    scan_log,
)
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


def test_codec_keeps_started_and_reads_six_field_bodies_as_started() -> None:
    started = ConsumerState(started=True)
    assert decode_consumer_state(encode_consumer_state(started)) == started
    # a body written before ``started`` was kept: every saved state followed
    # the consumer's creation, which chose its start
    legacy = cbor2.dumps([0, 0, 0, 0, {}, {}])
    assert decode_consumer_state(legacy) == started


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


def _state(i: int) -> ConsumerState:
    return ConsumerState(
        delivered_consumer_seq=i,
        delivered_stream_seq=i,
        ack_floor_consumer_seq=i - 1,
        ack_floor_stream_seq=i - 1,
        pending={i: Pending(i, i * 10)},
    )


def test_file_sync_appends_to_the_log_only(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    for i in range(1, 6):
        cs.save(_state(i))
        cs.sync()
    assert not (d / "state").exists()  # no rewrite on the hot path
    data = (d / "log").read_bytes()
    end, last, records = scan_log(data)
    assert len(data) == LOG_PREALLOC_BYTES  # appends overwrite preallocated zeros
    assert data.count(0, end) == len(data) - end
    assert records == 5 and last == encode_consumer_state(_state(5))
    assert FileConsumerStore(d).load() == _state(5)
    cs.sync()  # nothing changed: nothing appended
    assert scan_log((d / "log").read_bytes())[2] == 5


@pytest.mark.parametrize("cut", [1, 4, 8, 9, -1, "no-header"])
def test_file_log_torn_tail_is_cut(tmp_path: Path, cut: int | str) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    cs.save(_state(1))
    cs.sync()
    good = scan_log((d / "log").read_bytes())[0]
    cs.save(_state(2))
    cs.sync()
    data = (d / "log").read_bytes()
    end = scan_log(data)[0]
    if cut == "no-header":  # the body reached the disk, its header did not
        torn = bytes(8) + data[good + 8 : end]
    else:
        assert isinstance(cut, int)
        torn = data[good : good + cut] if cut > 0 else data[good : end - 1]
    rest = len(data) - good - len(torn)
    (d / "log").write_bytes(data[:good] + torn + bytes(rest))  # crash mid-append
    again = FileConsumerStore(d)
    assert again.load() == _state(1)
    after = (d / "log").read_bytes()
    assert scan_log(after)[0] == good and after.count(0, good) == len(after) - good
    again.save(_state(3))
    again.sync()
    assert FileConsumerStore(d).load() == _state(3)


def test_file_log_bit_flip_in_last_record_falls_back(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    for i in (1, 2):
        cs.save(_state(i))
        cs.sync()
    data = bytearray((d / "log").read_bytes())
    data[scan_log(bytes(data))[0] - 1] ^= 0x01
    (d / "log").write_bytes(bytes(data))
    assert FileConsumerStore(d).load() == _state(1)


def test_file_log_compaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import store.consumer as mod

    monkeypatch.setattr(mod, "LOG_COMPACT_BYTES", 200)
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    for i in range(1, 40):
        cs.save(_state(i))
        cs.sync()
        data = (d / "log").read_bytes()
        assert scan_log(data)[0] <= 200 + 8 * 64
        assert len(data) == LOG_PREALLOC_BYTES
        assert FileConsumerStore(d).load() == _state(i)
    assert (d / "state").exists()
    assert FileConsumerStore(d).load() == _state(39)


def test_file_crash_between_compaction_rename_and_log_truncation(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    for i in (1, 2):
        cs.save(_state(i))
        cs.sync()
    log_before = (d / "log").read_bytes()
    cs.close()  # compacts: state = _state(2), log emptied
    assert scan_log((d / "log").read_bytes())[2] == 0
    assert FileConsumerStore(d).load() == _state(2)
    (d / "log").write_bytes(log_before)  # the truncation never reached the disk
    assert FileConsumerStore(d).load() == _state(2)
    (d / "state.tmp").write_bytes(b"TJCS\x01torn")  # or the crash hit the temp file
    assert FileConsumerStore(d).load() == _state(2)


def test_file_log_header_and_empty_log(tmp_path: Path) -> None:
    d = tmp_path / "c"
    cs = FileConsumerStore(d)
    cs.save(STATE)
    cs.close()
    (d / "log").write_bytes(b"")  # crash while the log was being created
    assert FileConsumerStore(d).load() == STATE
    (d / "log").write_bytes(b"XXXX\x01")
    with pytest.raises(CorruptionError):
        FileConsumerStore(d)
