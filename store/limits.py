"""Retention and discard decisions, as pure functions.

Theory of operation
-------------------
Both stores call these functions so they decide identically (and identically
to nats-server 2.x ``memstore.go`` / ``filestore.go``):

* ``check_append`` runs *before* a message is stored.  ``max_msg_size``
  (headers + payload, as ``stream.go`` counts it) always rejects.  Under
  ``discard: new``: a subject at ``max_msgs_per_subject`` rejects if
  ``discard_new_per_subject``; a full stream rejects with ``MaxMsgs`` /
  ``MaxBytes`` unless the subject is at its per-subject limit, because then
  storing replaces that subject's oldest message (for bytes: only if the
  oldest is at least as large as the new one).
* After storing, the store removes the subject's oldest messages while the
  subject is above ``max_msgs_per_subject`` (under either discard policy),
  then, under ``discard: old`` only, the stream's oldest messages while
  ``msgs > max_msgs`` or ``bytes > max_bytes`` (``over_limits``).  Like
  nats-server this may remove the message just stored if it alone exceeds
  ``max_bytes``.
* ``max_age``: messages are in timestamp order, so only the front can expire:
  the first live message expires when ``ts <= now - max_age``, unless its
  ``Nats-TTL`` says ``never`` (then the next one is looked at).  Per-message
  TTLs (``store.ttl``) expire messages anywhere in the stream.

``-1`` (and 0, normalised) means unlimited for counts and sizes; ``0`` means
unlimited for ``max_age``.  Byte accounting follows nats-server:
file storage ``22 + len(subj) + len(payload) + 8`` plus ``4 + len(hdr)`` when
headers are present; memory storage ``len(subj) + len(hdr) + len(payload) + 16``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from store.errors import LimitExceeded, MaxBytes, MaxMsgs, MaxMsgSize, MaxMsgsPerSubject

__all__ = [
    "Accounting",
    "Discard",
    "StreamLimits",
    "check_append",
    "expired",
    "msg_size",
    "next_expiry",
    "over_limits",
    "over_subject_limit",
]


class Discard(enum.Enum):
    """What happens when a stream limit is reached."""

    OLD = "old"
    NEW = "new"


class Accounting(enum.Enum):
    """Which nats-server byte formula the ``bytes`` stat uses."""

    FILE = "file"
    MEMORY = "memory"


def _unlimited(v: int) -> int:
    return -1 if v <= 0 else v


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """The StreamConfig fields the store enforces.

    Attributes:
        max_msgs: Stream message limit (-1 unlimited).
        max_bytes: Accounted bytes limit (-1 unlimited).
        max_age_ns: Age limit in ns (0 unlimited).
        max_msgs_per_subject: Per-subject limit (-1 unlimited).
        max_msg_size: Headers + payload limit (-1 unlimited).
        discard: ``Discard.OLD`` or ``Discard.NEW``.
        discard_new_per_subject: With ``discard: new``, reject a message whose
            subject is at ``max_msgs_per_subject`` instead of replacing.
        msg_ttl: Honour positive per-message TTLs (``Nats-TTL`` headers; the
            stream's ``allow_msg_ttl``).  See ``store.ttl``.
    """

    max_msgs: int = -1
    max_bytes: int = -1
    max_age_ns: int = 0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: Discard = Discard.OLD
    discard_new_per_subject: bool = False
    msg_ttl: bool = False

    def normalised(self) -> StreamLimits:
        """Copy with 0 / < -1 mapped to -1 (nats-server's normalisation)."""
        return StreamLimits(
            max_msgs=_unlimited(self.max_msgs),
            max_bytes=_unlimited(self.max_bytes),
            max_age_ns=max(0, self.max_age_ns),
            max_msgs_per_subject=_unlimited(self.max_msgs_per_subject),
            max_msg_size=_unlimited(self.max_msg_size),
            discard=self.discard,
            discard_new_per_subject=self.discard_new_per_subject,
            msg_ttl=self.msg_ttl,
        )


def msg_size(subject: str, headers: bytes, payload: bytes, accounting: Accounting) -> int:
    """Accounted size of one message, as nats-server counts it.

    Args:
        subject: Subject (its UTF-8 length is counted; NATS subjects are ASCII).
        headers: Header block.
        payload: Body.
        accounting: File or memory formula.
    """
    return msg_size_raw(len(subject), len(headers), len(payload), accounting)


def msg_size_raw(slen: int, hlen: int, plen: int, accounting: Accounting) -> int:
    """``msg_size`` from lengths."""
    if accounting is Accounting.MEMORY:
        return slen + hlen + plen + 16
    if hlen == 0:
        return 22 + slen + plen + 8
    return 22 + slen + 4 + hlen + plen + 8


def check_append(
    limits: StreamLimits,
    *,
    msgs: int,
    bytes_: int,
    hdr_len: int,
    payload_len: int,
    new_size: int,
    subject_msgs: int,
    subject_oldest_size: int | None,
) -> type[LimitExceeded] | None:
    """Decide whether an append is rejected.

    Args:
        limits: Normalised limits.
        msgs: Live messages now.
        bytes_: Accounted bytes now.
        hdr_len: Length of the new headers.
        payload_len: Length of the new payload.
        new_size: Accounted size of the new message.
        subject_msgs: Live messages on the new message's subject now.
        subject_oldest_size: Accounted size of that subject's oldest message
            (only needed when the subject is at its limit), else ``None``.

    Returns:
        The error class to raise, or ``None`` if the append may proceed.
    """
    if limits.max_msg_size >= 0 and hdr_len + payload_len > limits.max_msg_size:
        return MaxMsgSize
    if limits.discard is not Discard.NEW:
        return None
    maxp = limits.max_msgs_per_subject
    at_subject_limit = maxp > 0 and subject_msgs >= maxp
    if at_subject_limit and limits.discard_new_per_subject:
        return MaxMsgsPerSubject
    if limits.max_msgs > 0 and msgs >= limits.max_msgs and not at_subject_limit:
        return MaxMsgs
    if limits.max_bytes > 0 and bytes_ + new_size > limits.max_bytes:
        if not at_subject_limit:
            return MaxBytes
        if subject_oldest_size is None or subject_oldest_size < new_size:
            return MaxBytes
    return None


def over_subject_limit(limits: StreamLimits, subject_msgs: int) -> bool:
    """Must the subject's oldest message go (either discard policy)?"""
    return limits.max_msgs_per_subject > 0 and subject_msgs > limits.max_msgs_per_subject


def over_limits(limits: StreamLimits, msgs: int, bytes_: int) -> bool:
    """Must the stream's oldest message go (``discard: old`` only)?"""
    if limits.discard is not Discard.OLD:
        return False
    if limits.max_msgs > 0 and msgs > limits.max_msgs:
        return True
    return limits.max_bytes > 0 and bytes_ > limits.max_bytes


def expired(limits: StreamLimits, ts_ns: int, now_ns: int) -> bool:
    """Has a message with timestamp ``ts_ns`` reached ``max_age`` at ``now_ns``?"""
    return limits.max_age_ns > 0 and ts_ns <= now_ns - limits.max_age_ns


def next_expiry(limits: StreamLimits, first_ts_ns: int | None) -> int | None:
    """When the message with ``first_ts_ns`` expires (None if never/no message)."""
    if limits.max_age_ns <= 0 or first_ts_ns is None:
        return None
    return first_ts_ns + limits.max_age_ns
