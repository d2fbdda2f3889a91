"""A JetStream domain: the API answers on ``$JS.<domain>.API.>`` as well, and
PubAcks and infos carry the domain — the same on trijet and nats-server."""

from __future__ import annotations

import json
from pathlib import Path

import nats
import pytest

from tests.support import start_server
from tests.support.aio import noop_cb, run

CONFIG = """
jetstream {
  store_dir: "{workdir}/store"
  domain: hub
}
"""


@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_domain_prefix_pub_ack_and_info(kind: str, tmp_path: Path) -> None:
    server = start_server(kind, config=CONFIG, workdir=tmp_path)

    async def main() -> dict[str, object]:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        try:
            js = nc.jetstream(domain="hub")
            si = await js.add_stream(name="D", subjects=["d.>"])
            ack = await js.publish("d.1", b"x")
            # the plain prefix reaches the same JetStream
            plain = json.loads((await nc.request("$JS.API.STREAM.INFO.D", b"", timeout=5)).data)
            dom = json.loads((await nc.request("$JS.hub.API.STREAM.INFO.D", b"", timeout=5)).data)
            info = json.loads((await nc.request("$JS.hub.API.INFO", b"", timeout=5)).data)
            # a domain nobody serves has no responders
            with pytest.raises(nats.errors.NoRespondersError):
                await nc.request("$JS.other.API.INFO", b"", timeout=5)
            raw = await nc.request("d.2", b"y", timeout=5)
            return {
                "created_domain": si.domain if hasattr(si, "domain") else None,
                "ack": (ack.stream, ack.seq, ack.domain),
                "raw_ack": json.loads(raw.data),
                "plain_domain": plain.get("domain"),
                "dom_domain": dom.get("domain"),
                "dom_msgs": dom["state"]["messages"],
                "info_domain": info.get("domain"),
            }
        finally:
            await nc.close()

    try:
        got = run(main)
    finally:
        server.stop()
    assert got["ack"] == ("D", 1, "hub")
    assert got["raw_ack"] == {"stream": "D", "domain": "hub", "seq": 2}
    assert got["plain_domain"] == got["dom_domain"] == got["info_domain"] == "hub"
    assert got["dom_msgs"] == 1
