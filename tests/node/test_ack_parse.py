"""Plain ack runs: the C-level parse of many ack subjects at once
(``_plain_ack_seqs``) agrees with reading them one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.opfields import UINT64_MAX
from node.jetstream.delivery import _ack_seq, _plain_ack_seqs

PREFIX = b"$JS.ACK.S.C."

token = st.one_of(
    st.integers(0, 2**64 + 5).map(lambda i: b"%d" % i),
    st.sampled_from([b"", b"x", b"-1", b"+1", b"1_0", b"$JS", b"ACK", b"\n"]),
)
subject = st.one_of(
    st.lists(token, min_size=5, max_size=5).map(lambda t: PREFIX + b".".join(t)),
    st.lists(token, min_size=3, max_size=7).map(lambda t: PREFIX + b".".join(t)),
    st.lists(token, min_size=5, max_size=5).map(lambda t: b"$JS.ACK.S.D." + b".".join(t)),
)


def _one_by_one(subjects: list[bytes]) -> tuple[list[int], list[int]] | None:
    """What the batch parse must give: every subject nine non-empty tokens
    with the prefix and in-range digits, else None."""
    sseqs, dseqs = [], []
    for s in subjects:
        tokens = s.split(b".")
        if (
            len(tokens) != 9
            or not s.startswith(PREFIX)
            or b"" in tokens
            or any(b"\n" in t for t in tokens)
        ):
            return None
        if not (tokens[5].isdigit() and tokens[6].isdigit()):
            return None
        a, b = _ack_seq(tokens[5]), _ack_seq(tokens[6])
        if int(tokens[5]) > UINT64_MAX or int(tokens[6]) > UINT64_MAX:
            return None
        sseqs.append(a)
        dseqs.append(b)
    return sseqs, dseqs


@settings(max_examples=400, deadline=None)
@given(st.lists(subject, min_size=1, max_size=8))
def test_plain_ack_seqs_agrees_with_one_by_one(subjects: list[bytes]) -> None:
    assert _plain_ack_seqs(subjects, b"\n" + PREFIX) == _one_by_one(subjects)


def test_plain_ack_seqs_typical_run() -> None:
    subjects = [PREFIX + b"1.%d.%d.1763791234567890123.%d" % (i, i + 7, 99 - i) for i in range(50)]
    assert _plain_ack_seqs(subjects, b"\n" + PREFIX) == (
        list(range(50)),
        [i + 7 for i in range(50)],
    )
