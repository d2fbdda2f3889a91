"""Runs of PUBs handed over in one call (``connection``'s fast path): a run to one
subject, reply-less singles to changing subjects, and the scan that finds the subjects of a run
sharing one small payload."""

from __future__ import annotations

from collections.abc import Callable

#: largest payload a run of reply-less PUBs to differing subjects may share
#: (JetStream acks: ``+ACK``, ``-NAK``, empty, ...) to be handed over as one call
MANY_PAYLOAD_MAX = 8
#: bytes looked at per attempt to take such a run (bounds the work per attempt)
MANY_WINDOW = 16384
_WS = (b" ", b"\t", b"\r", b"\n")


def hand_run(
    on_pub: Callable[[bytes, bytes | None, bytes], object],
    on_pub_run: Callable[[bytes, list[bytes | None], list[bytes]], object],
    subject: bytes,
    replies: list[bytes | None],
    payloads: list[bytes],
) -> None:
    """Hand over a run of messages to one subject (a run of one to ``on_pub``),
    then empty the lists (the callbacks do not keep them: they are reused)."""
    if len(payloads) == 1:
        on_pub(subject, replies[0], payloads[0])
    else:
        on_pub_run(subject, replies, payloads)
    replies.clear()
    payloads.clear()


def hand_mixed(
    on_mixed: Callable[[list[bytes], list[bytes]], object] | None,
    subjects: list[bytes],
    payloads: list[bytes],
) -> None:
    """Hand over reply-less singles to changing subjects, then empty the lists."""
    assert on_mixed is not None
    on_mixed(subjects, payloads)
    subjects.clear()
    payloads.clear()


def many_subjects(buf: bytes, pos: int, payload: bytes, longest: int) -> list[bytes] | None:
    """The subjects of a run of ``PUB <subject> <size>\r\n<payload>\r\n``
    ops (single spaces, no reply, this payload) at ``pos``: each op of it that
    another PUB follows (at least two; the run ends at ``pos`` + the ops'
    lengths; a last op followed by something else goes the usual way), or None.

    One ``split`` of a bounded window on what separates two such subjects
    (the rest of one op and the next op's verb); a piece between two
    separators is a subject exactly when it is 1..``longest`` bytes without
    whitespace.
    """
    sep = b" %d\r\n%b\r\nPUB " % (len(payload), payload)
    pieces = buf[pos + 4 : pos + 4 + MANY_WINDOW].split(sep)
    pieces.pop()  # the run's last op and what follows it, or a partial op
    if len(pieces) < 2:
        return None
    joined = b"".join(pieces)
    if (
        b" " in joined
        or b"\t" in joined
        or b"\r" in joined
        or b"\n" in joined
        or b"" in pieces
        or max(map(len, pieces)) > longest
    ):
        k = 0
        for piece in pieces:
            if not piece or len(piece) > longest or any(w in piece for w in _WS):
                break
            k += 1
        if k < 2:
            return None
        del pieces[k:]
    return pieces
