"""The source's range reader and the sink's publisher without Spark, on both data planes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nats
import pytest

from pipeline.headers import encode_headers, msg_id_block
from pipeline.natsio import RangeReader, connect, next_stored, seq_at_time
from pipeline.plan import ConnectOptions
from pipeline.publish import Publisher
from tests.conftest import StartServer
from tests.support.aio import run


async def _fill(url: str) -> None:
    nc = await connect(ConnectOptions(servers=(url,)), raw_headers=True)
    try:
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.>"])
        # a repeated header name: both values stored and read back, in order
        pub = Publisher(nc)
        await pub.start()
        block = encode_headers([("K", ["v", "w"]), ("Nats-Msg-Id", ["m1"])])
        await pub.publish("r.h", b"with-headers", block)
        assert (await pub.flush()).published == 1
        await pub.close()
        futs = [await js.publish_async(f"r.{'ab'[i % 2]}", b"%d" % i) for i in range(999)]
        for f in futs:
            await f
        await js.delete_msg("R", 500)
    finally:
        await nc.close()


class _NothingPendingReader(RangeReader):
    """A reader told "nothing pending" by every delivery (as by a new stream leader that has
    not applied its whole log): it must still read its range to the end, by sequence."""

    def _after(self, last_seq: int, none_pending: bool) -> None:
        super()._after(last_seq, True)


async def _read(
    conn: ConnectOptions,
    first: int,
    end: int,
    filters: tuple[str, ...],
    raw: bool,
    cls: type[RangeReader] = RangeReader,
):
    r = cls(conn, "R", first, end, filters, fetch_batch=64, raw=raw)
    out = []
    try:
        await r.open()
        while (c := await r.next_chunk()) is not None:
            out += list(zip(c.seq_list(), c.subject_list(), c.header_list(), c.data, strict=True))
    finally:
        await r.close()
    return out


@pytest.mark.parametrize("raw", [True, False], ids=["wire", "nats-py"])
def test_range_reader(
    start_server: StartServer, server_kind: str, raw: bool, tmp_path: Path
) -> None:
    sp = start_server(server_kind, ["-js", "-sd", str(tmp_path / "store")])
    run(lambda: _fill(sp.url))
    conn = ConnectOptions(servers=("nats://127.0.0.1:1", sp.url))  # a dead seed is skipped

    def read(first: int, end: int, *filters: str) -> list:
        return run(lambda: _read(conn, first, end, filters, raw))

    rows = read(1, 1001)
    assert [s for s, *_ in rows] == [s for s in range(1, 1001) if s != 500]
    assert rows[0][1:] == ("r.h", [("K", ["v", "w"]), ("Nats-Msg-Id", ["m1"])], b"with-headers")
    assert rows[1][2] is None and rows[1][3] == b"0"
    # stops by sequence: a sub-range, a sparse filter, a range past the end, an empty range
    assert [s for s, *_ in read(100, 200)] == list(range(100, 200))
    assert [s for s, *_ in read(2, 301, "r.b")] == list(range(3, 301, 2))
    assert [s for s, *_ in read(995, 5000)] == list(range(995, 1001))
    assert read(1001, 2000) == [] and read(7, 7) == []
    assert read(1, 1001, "r.none") == []
    # "nothing pending" is only a hint: checked against the stream by sequence
    lying = [s for s, *_ in run(lambda: _read(conn, 2, 700, ("r.b",), raw, _NothingPendingReader))]
    assert lying == [s for s in range(3, 700, 2) if s != 500]

    async def probe() -> list[int | None]:
        nc = await connect(conn)
        try:
            return [
                await next_stored(nc, "$JS.API", "R", 500),
                await next_stored(nc, "$JS.API", "R", 500, ("r.a",)),
                await next_stored(nc, "$JS.API", "R", 2, ("r.none", "r.a")),
                await next_stored(nc, "$JS.API", "R", 1001),
            ]
        finally:
            await nc.close()

    assert run(probe) == [501, 502, 2, None]


def test_publisher_and_seq_at_time(
    start_server: StartServer, server_kind: str, tmp_path: Path
) -> None:
    sp = start_server(server_kind, ["-js", "-sd", str(tmp_path / "store")])

    async def go() -> None:
        nc = await nats.connect(sp.url)
        try:
            await nc.jetstream().add_stream(name="P", subjects=["p.>"])
            for expect_dups in (0, 300):
                pub = Publisher(nc, max_inflight=32, timeout_s=10)
                await pub.start()
                for i in range(300):
                    await pub.publish("p.x", b"%d" % i, {"Nats-Msg-Id": f"id-{i}"})
                res = await pub.flush()
                await pub.close()
                assert (res.published, res.duplicates) == (300 - expect_dups, expect_dups)
            # the batch path (frames built here, PubAcks without Msg objects): a window
            # smaller than the batch, the same ids dropped, new ones stored
            raw = await connect(ConnectOptions(servers=(sp.url,)), raw_headers=True)
            try:
                pub = Publisher(raw, max_inflight=64, timeout_s=10)
                await pub.start()
                items = [("p.x", b"%d" % i, msg_id_block(f"id-{i}")) for i in range(310)]
                await pub.publish_many(items[:150])
                await pub.publish_many(items[150:])
                res = await pub.flush()
                assert (res.published, res.duplicates) == (10, 300)
                with pytest.raises(nats.errors.BadSubjectError):
                    await pub.publish_many([("p.x y", b"", None)])
                await pub.close()
            finally:
                await raw.close()
            bad = Publisher(nc, timeout_s=10)
            await bad.start()
            await bad.publish("p.x", b"x", {"Nats-Expected-Last-Sequence": "1"})
            with pytest.raises(RuntimeError, match=r"10071|wrong last sequence"):
                await bad.flush()
            conn = ConnectOptions(servers=(sp.url,))
            assert await seq_at_time(conn, nc, "P", 0) == 1
            assert await seq_at_time(conn, nc, "P", 2**62) is None
        finally:
            await nc.close()

    run(go)


@pytest.mark.parametrize("raw", [True, False], ids=["wire", "nats-py"])
def test_range_reader_over_tls_with_a_password(
    start_server: StartServer, server_kind: str, raw: bool, tmp_path: Path, tls_certs: Any
) -> None:
    conf = (
        f'jetstream {{ store_dir: "{tmp_path / "store"}" }}\n'
        'authorization { user: "spark", password: "s3cret" }\n'
        "tls {\n"
        f'  cert_file: "{tls_certs.server_cert}"\n'
        f'  key_file: "{tls_certs.server_key}"\n'
        f'  ca_file: "{tls_certs.ca_cert}"\n'
        "  verify: true\n"
        "  timeout: 2\n"
        "}\n"
    )
    sp = start_server(server_kind, config=conf)
    conn = ConnectOptions(
        servers=(f"tls://127.0.0.1:{sp.port}",),
        user="spark",
        password="s3cret",
        tls_ca=str(tls_certs.ca_cert),
        tls_cert=str(tls_certs.client_cert),
        tls_key=str(tls_certs.client_key),
    )

    async def go() -> list[int]:

        nc = await connect(conn)
        try:
            js = nc.jetstream()
            await js.add_stream(name="T", subjects=["t.>"])
            for i in range(20):
                await js.publish("t.x", b"%d" % i)
        finally:
            await nc.close()
        r = RangeReader(conn, "T", 1, 21, raw=raw)
        seqs: list[int] = []
        try:
            await r.open()
            while (c := await r.next_chunk()) is not None:
                seqs += c.seq_list()
        finally:
            await r.close()
        return seqs

    assert run(go) == list(range(1, 21))
    bad = ConnectOptions(
        servers=conn.servers,
        user="spark",
        password="wrong",
        tls_ca=conn.tls_ca,
        tls_cert=conn.tls_cert,
        tls_key=conn.tls_key,
    )
    # nats-py gives up with "no servers available" after the -ERR; the wire client says why
    with pytest.raises(
        Exception, match=r"(?i)authorization" if raw else r"(?i)no servers|authoriz"
    ):
        run(lambda: _read_t(bad, raw))


async def _read_t(conn: ConnectOptions, raw: bool) -> None:
    from pipeline.wire import RawConnection

    if raw:
        rc = RawConnection(conn, "bad")
        try:
            await rc.connect()
        finally:
            await rc.close()
    else:
        nc = await connect(conn)
        await nc.close()
