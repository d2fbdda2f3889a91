"""Real three-process groups over TcpPeerLinks on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from chaos.procs import Proc, tell_peers

IDS = ["a", "b", "c"]
SECRET = b"s3cret-cluster-key"

pytestmark = pytest.mark.timeout(90)


async def test_three_processes_elect_replicate_failover_and_refuse_wrong_secret(
    tmp_path: Path,
) -> None:
    procs = [Proc(i, IDS, tmp_path / i, SECRET) for i in IDS]
    intruder = Proc("0intruder", ["0intruder", *IDS], tmp_path / "x", b"wrong-secret")
    try:
        for p in procs:
            await p.start()
        await tell_peers(procs)
        with trio.fail_after(20):
            leader_id = (await procs[0].call(op="wait_leader"))["leader"]
        byid = {p.node_id: p for p in procs}
        leader = byid[leader_id]
        for i in range(20):
            r = await leader.call(op="propose", value=(b"v%d" % i).hex())
            assert r == {"ok": True, "result": i + 1}
        follower = next(p for p in procs if p is not leader)
        r = await follower.call(op="propose", value=b"from-follower".hex())
        assert r == {"ok": True, "result": 21}

        # a peer with the wrong secret is refused and logged; the group carries on
        await intruder.start(peers={i: byid[i].raft_port for i in IDS})
        with trio.fail_after(20):
            r = await byid["a"].call(op="wait_stat", name="auth_failures", min=1)
        assert r["stats"]["auth_failures"] >= 1
        r = await leader.call(op="propose", value=b"still-works".hex())
        assert r == {"ok": True, "result": 22}
        st = (await leader.call(op="status"))["status"]
        assert "0intruder" not in st["peers"]

        # SIGKILL the leader: the others elect a new one and go on
        await leader.kill()
        rest = [p for p in procs if p is not leader]
        with trio.fail_after(20):
            new_id = (await rest[0].call(op="wait_leader", exclude=leader_id))["leader"]
        new = byid[new_id]
        r = await new.call(op="propose", value=b"after-kill".hex())
        assert r == {"ok": True, "result": 23}

        # restart the killed member from its data dir: it catches up
        await leader.start()
        await tell_peers(procs)
        with trio.fail_after(20):
            target = (await new.call(op="status"))["status"]["applied"]
            await leader.call(op="wait_applied", count=target)
        vals = [bytes.fromhex(v) for v in (await leader.call(op="values"))["values"]]
        assert vals[:20] == [b"v%d" % i for i in range(20)]
        assert vals[20:23] == [b"from-follower", b"still-works", b"after-kill"]
    finally:
        for p in [*procs, intruder]:
            await p.kill()
