"""S3 replica agreement: equal state and an equal rolling hash chain on every replica.

Theory of operation: after healing and quiescing, each node's own replica of each stream is read
(``chaos.readback``).  Its fingerprint is (first_seq, last_seq, messages, num_deleted) plus a
rolling SHA-256 chain ``h = sha256(h || seq || subject || sha256(payload))`` over its messages in
seq order — the chain-of-blocks idea: two replicas agree on the chain iff they hold the same
messages at the same seqs.  The majority fingerprint is the reference; every replica that differs
(or could not be read) is divergent, and for each the first seq where it parts from the reference
is reported.  Linear in the number of stored messages.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from chaos.checkers import RunData, StreamRead, Verdict

STREAMS = ("LOG", "CHAIN", "WQ")


def chain_hash(read: StreamRead) -> str:
    h = b"\0" * 32
    for seq in sorted(read.msgs):
        subject, payload = read.msgs[seq]
        leaf = hashlib.sha256(payload.encode()).digest()
        h = hashlib.sha256(h + seq.to_bytes(8, "big") + subject.encode() + b"\0" + leaf).digest()
    return h.hex()[:16]


def fingerprint(read: StreamRead) -> tuple[object, ...]:
    st = read.state or {}
    keys = ("first_seq", "last_seq", "messages", "num_deleted")
    return (*(st.get(k, 0) for k in keys), chain_hash(read))


def _first_difference(a: StreamRead, b: StreamRead) -> int | None:
    for seq in sorted(set(a.msgs) | set(b.msgs)):
        if a.msgs.get(seq) != b.msgs.get(seq):
            return seq
    return None


def s3_replica_agreement(data: RunData) -> Verdict:
    v = Verdict("S3", "replica agreement: equal state and hash chain on every replica", None)
    divergent: dict[str, list[str]] = {}
    for stream in STREAMS:
        # a node is read for the streams it is a replica of
        reads = {n: r.get(stream) for n, r in data.reads.items() if stream in r}
        if all(r is None for r in reads.values()):
            continue  # this run did not read that stream at all
        fps = {
            n: fingerprint(r)
            for n, r in reads.items()
            if r is not None and r.error is None and r.state is not None
        }
        v.checked += len(reads)
        if not fps:
            v.detail["unknown"] = f"no replica of {stream} readable"
            continue
        ref_fp, votes = Counter(fps.values()).most_common(1)[0]
        ref_node = next(n for n, fp in fps.items() if fp == ref_fp)
        ref = reads[ref_node]
        assert ref is not None
        v.detail.setdefault("fingerprints", {})[stream] = {n: list(fp) for n, fp in fps.items()}
        for n, r in reads.items():
            if n not in fps:
                v.detail.setdefault("unreadable", {}).setdefault(stream, []).append(n)
                v.offend({"stream": stream, "node": n, "unreadable": r.error if r else "absent"})
            elif fps[n] != ref_fp:
                divergent.setdefault(stream, []).append(n)
                where = _first_difference(ref, r) if r is not None else None
                v.offend(
                    {
                        "stream": stream,
                        "node": n,
                        "state": list(fps[n]),
                        "majority": list(ref_fp),
                        "first_difference_at_seq": where,
                    }
                )
        if votes * 2 <= len(reads):
            v.detail.setdefault("no_majority", []).append(stream)
    v.detail["divergent"] = divergent
    v.detail["divergent_replicas"] = sum(len(x) for x in divergent.values())
    return v.finish()


def check(data: RunData) -> list[Verdict]:
    return [s3_replica_agreement(data)]
