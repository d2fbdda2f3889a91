"""Bulk parsing of reply-less PUBs of one size to changing subjects.

Theory of operation: a publisher rotating over many subjects (one message
each, no reply, one payload size) would cost the parser's fast path one line
match, two slices and a handful of checks per message.  ``mixed_bulk`` gives
two patterns for such ops written in the canonical form (single spaces, this
exact size token): ``extent`` matches a whole stretch of complete ops at
once, and ``item.findall`` over exactly that stretch yields each op's subject
and payload -- two regex calls per window instead of Python work per message.
A subject holds no space or tab, so both patterns split the stretch the same
way from its start; anything else (a reply, another size, tabs, an
incomplete op) ends the stretch and takes the ordinary path.  Used by
``ProtocolConnection._fast_runs``.
"""

from __future__ import annotations

import re

#: reply-less PUBs of one payload size to changing subjects are taken in bulk
#: (two regex calls per window of ``MIXED_WINDOW`` bytes, see ``mixed_bulk``)
#: when their size token is at most this long (the patterns are cached per token)
MIXED_BULK_SIZE_DIGITS_MAX = 5
MIXED_WINDOW = 65536
_MIXED_BULK_MAX = 64
_mixed_bulk_cache: dict[tuple[bytes, int], tuple[re.Pattern[bytes], re.Pattern[bytes]]] = {}


def mixed_bulk(size_tok: bytes, longest: int) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """``(extent, item)`` patterns for ``PUB <subject> <size_tok>\r\n<payload>\r\n``
    ops written with single spaces, no reply, this exact size token and a
    subject of at most ``longest`` bytes: ``extent`` matches a stretch of them
    (all complete), ``item`` (with ``findall``) yields each one's subject and
    payload.  Both parse from the stretch's start the same way (a subject holds
    no space), so ``findall`` over exactly the stretch sees every op once."""
    key = (size_tok, longest)
    pats = _mixed_bulk_cache.get(key)
    if pats is None:
        if len(_mixed_bulk_cache) >= _MIXED_BULK_MAX:
            _mixed_bulk_cache.clear()
        size = int(size_tok)
        one = rb"PUB ([^ \t\r\n]{1,%d}) %b\r\n((?s:.{%d}))\r\n" % (longest, size_tok, size)
        extent = rb"(?:PUB [^ \t\r\n]{1,%d} %b\r\n(?s:.{%d})\r\n)+" % (longest, size_tok, size)
        pats = _mixed_bulk_cache[key] = (re.compile(extent), re.compile(one))
    return pats


#: a run of PUBs to one subject, each with its own reply (JetStream publishes,
#: requests), is taken in bulk once this many bytes follow the run's first op
REPLY_BULK_MIN_BYTES = 512
_reply_bulk_cache: dict[bytes, tuple[re.Pattern[bytes], re.Pattern[bytes]]] = {}


def reply_bulk(size_tok: bytes) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """``(extent, item)`` patterns for ``PUB <subject> <reply> <size_tok>\\r\\n<payload>\\r\\n``
    ops written with single spaces, this exact size token, all to one subject
    (each with its own reply: a JetStream publisher's window, a requester):
    ``extent`` matches a stretch of complete ones (its group 1 is the
    subject, the same in every op of the stretch), ``item`` (with
    ``findall`` over exactly that stretch) yields each one's reply and
    payload.  A subject or reply holds no space, so both split the stretch
    alike.  The caller bounds the line length (the longest reply)."""
    pats = _reply_bulk_cache.get(size_tok)
    if pats is None:
        if len(_reply_bulk_cache) >= _MIXED_BULK_MAX:
            _reply_bulk_cache.clear()
        size = int(size_tok)
        tail = rb" %b\r\n(?s:.{%d})\r\n" % (size_tok, size)
        extent = rb"PUB (?P<s>[^ \t\r\n]+) [^ \t\r\n]+%b(?:PUB (?P=s) [^ \t\r\n]+%b)*" % (
            tail,
            tail,
        )
        one = rb"PUB [^ \t\r\n]+ ([^ \t\r\n]+) %b\r\n((?s:.{%d}))\r\n" % (size_tok, size)
        pats = _reply_bulk_cache[size_tok] = (re.compile(extent), re.compile(one))
    return pats
