"""Feeding mirrors and sourcing streams: the trio tasks that copy from origins.

Theory of operation
-------------------
Every stream with a ``mirror`` gets one *feed*, every entry of ``sources``
one feed each.  A feed owns its position in the origin (the last origin
sequence it handled) and loops: read the next messages of the origin after
that position, propose them as one ``MirrorMsg``/``SourcedMsg`` through the
target stream's group (so a copied message is decided in apply and durable
before the position moves, like any publish), then advance.  Nothing here
writes a store.

*Origins* are read through the ``Origin`` protocol (``cluster.origins``):
``LocalOrigin`` for a stream on this server -- a source without
``external``, or whose ``external.api`` is this server's own
``$JS.<domain>.API`` -- and ``cluster.api_origin.ApiOrigin`` (made by the
``remote`` factory the facade passes in) for one in another domain; without
a factory such a feed stays idle and reports ``active`` -1.  A remote origin
that cannot be reached is retried with backoff (its error, if it answered
one, shows in StreamInfo); a lost delivery or a silent consumer restarts the
consumer from the next needed sequence (``OriginRetry``).  The headers a
copy carries are ``cluster.source_headers``'.

*Where to start* follows nats-server (``setupMirrorConsumer``,
``trySetupSourceConsumer`` and the consumer's ``selectStartingSeqNo``):

* mirror: a mirror that never held a message starts at ``opt_start_seq``,
  ``opt_start_time`` or the origin's first message, else after its own last
  sequence; if the origin has moved past that, the mirror skips to match
  (``MirrorMsg.skip_to``).  Its position is its own last sequence, so it
  resumes after a restart by construction.
* source: the position is recovered from the newest stored message whose
  ``Nats-Stream-Source`` header names this source (``<stream> <seq>
  <filter> <dest> <subject> <identity>``), and is carried across config
  updates.  Without one: ``opt_start_seq``; ``opt_start_time`` (not before
  the stream's last message time); for a stream whose first sequence is past
  1, its last message time; else everything.  The header's identity is the
  origin's (a hash of its creation time): an origin deleted and re-created
  is detected and sourced again from its start.

*Refusals*: a batch stops at the first message the target refuses (limits,
size, sealed); the feed records the error for ``StreamInfo`` and retries
from that message after a backoff.  A sourced duplicate (``Nats-Msg-Id``)
is no error: the feed moves on.

``Sourcing`` is the node's registry of feeds; ``cluster.api`` tells it
when streams start, change and go away, and asks it for the ``mirror`` and
``sources`` entries of ``StreamInfo``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from cluster.model import StreamSource
from cluster.ops import Mirrored, MirrorMsg, Publish, SourcedMsg
from cluster.origins import (
    LocalOrigin,
    Origin,
    OriginGone,
    OriginRecreated,
    OriginRetry,
    OriginUnavailable,
    StartAt,
)
from cluster.source_headers import (
    SOURCE_HEADER,
    index_parts,
    mirror_headers,
    parse_rfc3339_ns,
    source_header_maker,
    source_header_of,
    sourced_headers,
)
from cluster.stream_fsm import ApiErrorResult, PubResult
from cluster.streams import Stream
from cluster.transform import SubjectTransform
from store.api import StoredMsg
from store.errors import MsgNotFound

__all__ = [
    "SOURCE_HEADER",
    "Feed",
    "LocalOrigin",
    "Origin",
    "OriginGone",
    "OriginRecreated",
    "OriginRetry",
    "OriginUnavailable",
    "RemoteOriginFactory",
    "Sourcing",
    "StartAt",
    "recover_positions",
]

log = logging.getLogger(__name__)

BATCH_MSGS_MAX = 4096
"""Messages per proposal (``PUBLISHES_PER_ENTRY_MAX``; origins bound it by bytes too)."""
RETRY_S_MIN = 1.0
RETRY_S_MAX = 30.0
HEARTBEAT_NS = 1_000_000_000
"""nats-server's source heartbeat: a healthy link is never silent longer."""
SCAN_CHECKPOINT_MSGS = 1000
"""Messages read between checkpoints while recovering source positions."""

ERR_STREAM_NOT_FOUND = {"code": 404, "err_code": 10059, "description": "stream not found"}


# --------------------------------------------------------------------------- feeds


class Feed:
    """Copies one origin into one target stream (a mirror or one source).

    Args:
        sourcing: the node's registry.
        target: the mirror or sourcing stream.
        src: the ``mirror`` or ``sources`` entry.
        mirror: whether this feeds a mirror.
        pos: a known position (sources, across updates), 0 if none.
        identity: the origin identity belonging to ``pos``.
    """

    def __init__(
        self,
        sourcing: Sourcing,
        target: Stream,
        src: StreamSource,
        *,
        mirror: bool,
        pos: int = 0,
        identity: str = "",
    ) -> None:
        self.sourcing = sourcing
        self.target = target
        self.src = src
        self.mirror = mirror
        self.pos = pos
        self.identity = identity
        self.index = " ".join(index_parts(src))
        self.lag = 0
        self.last_ns = 0
        self.error: dict[str, Any] | None = None
        self.attached = False
        #: last origin sequence copied (StreamInfo ``seq`` of a source)
        self.copied = pos
        #: a mirror shows its filter once it has tried to reach the origin
        self.tried = False
        self.scope = trio.CancelScope()
        self._origin: Origin | None = None
        #: the origin was found re-created: start at its beginning, not by time
        self._recreated = False
        self._backoff = RETRY_S_MIN
        self._changed = trio.Event()
        self._transforms = [
            t
            for t in (SubjectTransform.compile(x.src, x.dest) for x in src.subject_transforms)
            if t is not None
        ]
        if src.subject_transforms:
            self.filters = [t.src or ">" for t in src.subject_transforms]
        else:
            self.filters = [src.filter_subject or ">"]

    # -- signals from the registry ----------------------------------------------

    def origin_changed(self) -> None:
        """The (local) origin stream started or went away."""
        if isinstance(self._origin, LocalOrigin):
            self._origin.gone()
        self._changed.set()

    # -- the task ---------------------------------------------------------------

    async def run(self) -> None:
        """Feed until cancelled."""
        with self.scope:
            while True:
                self._changed = trio.Event()
                self.tried = True
                origin = self.sourcing.open_origin(self)
                if origin is None:
                    self.attached = False
                    await self._changed.wait()
                    continue
                self._origin = origin
                pause = 0.0
                try:
                    await self._feed(origin)
                except OriginGone:
                    log.info(
                        "event=origin_gone stream=%s origin=%s", self.target.cfg.name, self.src.name
                    )
                except OriginRetry as e:
                    log.info(
                        "event=origin_retry stream=%s origin=%s reason=%s",
                        self.target.cfg.name,
                        self.src.name,
                        e,
                    )
                    pause = RETRY_S_MIN
                except OriginRecreated:
                    self._forget_origin()
                except OriginUnavailable as e:
                    if e.error is not None:
                        self.error = dict(e.error)
                    log.info(
                        "event=origin_unavailable stream=%s origin=%s reason=%s",
                        self.target.cfg.name,
                        self.src.name,
                        e,
                    )
                    pause, self._backoff = self._backoff, min(self._backoff * 2, RETRY_S_MAX)
                finally:
                    self.attached = False
                    self._origin = None
                    origin.close()
                if pause:
                    with trio.move_on_after(pause):
                        await self._changed.wait()

    def _forget_origin(self) -> None:
        """The origin was deleted and created again: source it from its start."""
        log.warning(
            "event=source_recreated stream=%s origin=%s", self.target.cfg.name, self.src.name
        )
        if not self.mirror:
            self.pos = self.copied = 0
            self.identity = ""
            self._recreated = True

    def _start_at(self, origin: Origin) -> StartAt:
        src = self.src
        st = self.target.store.state()
        if self.mirror:
            if st.msgs == 0 and st.first_seq == 0:
                if src.opt_start_seq:
                    return StartAt(seq=src.opt_start_seq)
                if src.opt_start_time:
                    return StartAt(time_ns=parse_rfc3339_ns(src.opt_start_time))
                return StartAt()
            return StartAt(seq=st.last_seq + 1)
        if self._replaced(origin):
            self._forget_origin()
        recreated = self._recreated
        if self.pos:
            return StartAt(seq=self.pos + 1)
        if src.opt_start_seq:
            return StartAt(seq=src.opt_start_seq)
        if src.opt_start_time:
            t = parse_rfc3339_ns(src.opt_start_time)
            return StartAt(time_ns=max(t, st.last_ts) if st.last_ts else t)
        if st.first_seq > 1 and st.last_ts and not recreated:
            return StartAt(time_ns=st.last_ts)
        return StartAt()

    def _replaced(self, origin: Origin) -> bool:
        """A source position that belongs to another incarnation of the origin."""
        return bool(
            not self.mirror
            and self.pos
            and self.identity
            and origin.identity
            and self.identity != origin.identity
        )

    async def _feed(self, origin: Origin) -> None:
        delivered = await origin.start(self._start_at(origin))
        if self._replaced(origin):  # a remote origin's identity is known from start on
            raise OriginRecreated(self.src.name)
        self.identity = origin.identity
        self._recreated = False
        self._backoff = RETRY_S_MIN
        self.error = None
        self.attached = True
        self.last_ns = time.time_ns()
        if self.mirror:
            last = self.target.store.state().last_seq
            if last < delivered:
                await self.target.propose(MirrorMsg((), skip_to=delivered))
            self.pos = max(delivered, last)
        else:
            self.pos = max(self.pos, delivered)
        backoff = RETRY_S_MIN
        while True:
            msgs = await origin.read(self.pos, BATCH_MSGS_MAX)
            self.last_ns = time.time_ns()
            # like nats-server, the tracked sequence moves before the store
            # answers (info never lags what is stored) and is put back on a refusal
            before = self.copied
            self.copied = msgs[-1].seq
            n_ok, err = await self._copy(msgs)
            self.copied = msgs[n_ok - 1].seq if n_ok else before
            if n_ok:
                self.pos = self.copied
            self.lag = origin.lag(self.pos) + (len(msgs) - n_ok)
            if err is None:
                self.error = None
                backoff = RETRY_S_MIN
                continue
            self.error = {
                "code": err.code,
                "err_code": err.err_code,
                "description": err.description,
            }
            log.debug(
                "event=source_refused stream=%s origin=%s seq=%d err=%s",
                self.target.cfg.name,
                self.src.name,
                msgs[n_ok].seq,
                err.description,
            )
            await trio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_S_MAX)

    async def _copy(self, msgs: list[StoredMsg]) -> tuple[int, ApiErrorResult | None]:
        """Propose ``msgs``; returns how many were handled and the refusal, if any."""
        if self.mirror:
            op: MirrorMsg | SourcedMsg = MirrorMsg(
                tuple(
                    Mirrored(
                        m.seq,
                        self._subject(m.subject),
                        mirror_headers(m.headers),
                        m.payload,
                        m.ts_ns,
                    )
                    for m in msgs
                )
            )
        else:
            now = time.time_ns()
            value = source_header_maker(self.src, self.identity)  # once per batch
            subj = self._subject if self._transforms else None
            op = SourcedMsg(
                tuple(
                    Publish.trusted(  # an origin's stored values, this server's clock
                        subj(m.subject) if subj else m.subject,
                        sourced_headers(m.headers, value(m.seq, m.subject)),
                        m.payload,
                        now,
                    )
                    for m in msgs
                )
            )
        outcome = await self.target.propose(op)
        for i, r in enumerate(outcome.results):
            if not isinstance(r, PubResult):
                assert isinstance(r, ApiErrorResult)
                return i, r
        return len(outcome.results), None

    def _subject(self, subject: str) -> str:
        for t in self._transforms:
            out = t.match(subject)
            if out is not None:
                return out
        return subject

    # -- StreamInfo ---------------------------------------------------------------

    def info(self, now_ns: int) -> dict[str, Any]:
        """The ``mirror``/``sources`` entry of StreamInfo (nats-server key order)."""
        d: dict[str, Any] = {"name": self.src.name}
        if self.src.external is not None:
            d["external"] = self.src.external.to_dict()
        d["lag"] = self.lag
        if not self.mirror and self.copied:
            d["seq"] = self.copied
        contact = self._origin.last_contact_ns if self._origin is not None else 0
        if not self.last_ns:
            d["active"] = -1
        elif self.attached and contact:
            d["active"] = max(now_ns - max(contact, self.last_ns), 0)
        elif self.attached:
            d["active"] = min(max(now_ns - self.last_ns, 0), HEARTBEAT_NS)
        else:
            d["active"] = max(now_ns - self.last_ns, 0)
        if self.error is not None:
            d["error"] = dict(self.error)
        if self.src.filter_subject and (self.tried or not self.mirror):
            d["filter_subject"] = self.src.filter_subject
        if self.src.subject_transforms:
            d["subject_transforms"] = [t.to_dict() for t in self.src.subject_transforms]
        return d


# --------------------------------------------------------------------------- registry


async def recover_positions(stream: Stream, feeds: list[Feed]) -> None:
    """Raise each source feed's position to the newest stored message whose
    ``Nats-Stream-Source`` header names it (nats-server
    ``startingSequenceForSources``); a pre-2.10 header (``<stream> <seq>``)
    counts for every source of that stream.  Walks back from the end until
    every source is found; yields every ``SCAN_CHECKPOINT_MSGS`` messages."""
    want = {f.index: f for f in feeds if not f.mirror}
    store = stream.store
    st = store.state()
    seq = st.last_seq
    n = 0
    while want and st.msgs and seq >= st.first_seq:
        n += 1
        if n % SCAN_CHECKPOINT_MSGS == 0:
            await trio.lowlevel.checkpoint()
        try:
            m = store.load(seq)
        except MsgNotFound:
            seq -= 1
            continue
        seq -= 1
        value = source_header_of(m.headers) if m.headers else None
        if not value:
            continue
        f = value.split(" ")
        if len(f) >= 4 and f[1].isdigit():
            feed = want.pop(" ".join((f[0], f[2], f[3])), None)
            if feed is not None and int(f[1]) >= feed.pos:
                feed.pos = feed.copied = int(f[1])
                feed.identity = f[5] if len(f) >= 6 else ""
        elif len(f) == 2 and f[1].isdigit():
            for key in [k for k, fd in want.items() if fd.src.name == f[0]]:
                fd = want.pop(key)
                fd.pos = fd.copied = max(fd.pos, int(f[1]))


#: remote(feed) -> the origin of a feed whose ``external.api`` is another domain's
RemoteOriginFactory = Callable[[Feed], Origin]


class Sourcing:
    """The feeds of every mirror and sourcing stream on this node.

    Args:
        streams: the node's streams by name (live view).
        nursery: where feeds run.
        domain: this server's JetStream domain ("" if none); an
            ``external.api`` of ``$JS.<domain>.API`` is this server.
        remote: makes the origin of a feed in another domain; None leaves
            such feeds idle.
    """

    def __init__(
        self,
        streams: Mapping[str, Stream],
        nursery: trio.Nursery,
        *,
        domain: str = "",
        remote: RemoteOriginFactory | None = None,
    ) -> None:
        self._streams = streams
        self._nursery = nursery
        self._remote = remote
        self._local_apis = {"$JS.API"} | ({f"$JS.{domain}.API"} if domain else set())
        self._feeds: dict[str, list[Feed]] = {}
        self._configs: dict[str, tuple[StreamSource | None, tuple[StreamSource, ...]]] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        self._warned: set[str] = set()
        #: in a cluster an origin not on this server is read over the API
        #: (``$JS.API``) like one in another domain
        self.clustered = False

    # -- lifecycle hooks (called by cluster.api) ----------------------------------

    def stream_started(self, stream: Stream) -> None:
        """A stream started (created, recovered, restored)."""
        self._origin_event(stream.cfg.name)
        self._start(stream, {})

    def stream_updated(self, stream: Stream) -> None:
        """A stream's config changed: restart its feeds if mirror/sources did."""
        cfg = stream.cfg
        name = cfg.name
        if self._configs.get(name, (None, ())) == (cfg.mirror, cfg.sources):
            return
        old = {f.index: (f.pos, f.identity) for f in self._feeds.get(name, []) if not f.mirror}
        self._stop(name)
        self._start(stream, old)

    def stream_stopped(self, name: str) -> None:
        """A replicated stream lost the lead here: its feeds stop (the new
        leader's resume from the stream's own state)."""
        self._stop(name)

    def stream_deleted(self, name: str) -> None:
        """A stream is going away: stop its feeds, tell feeds reading it."""
        self._stop(name)
        self._origin_event(name)

    def _origin_event(self, name: str) -> None:
        for feeds in self._feeds.values():
            for f in feeds:
                if f.src.name == name and not self.is_remote(f.src):
                    f.origin_changed()

    def is_remote(self, src: StreamSource) -> bool:
        """``src`` names an origin in another domain (``external.api``)."""
        return src.external is not None and src.external.api not in self._local_apis

    def _start(self, stream: Stream, known: dict[str, tuple[int, str]]) -> None:
        cfg = stream.cfg
        self._configs[cfg.name] = (cfg.mirror, cfg.sources)
        if cfg.mirror is not None:
            feeds = [Feed(self, stream, cfg.mirror, mirror=True)]
        else:
            feeds = []
            for src in cfg.sources:
                f = Feed(self, stream, src, mirror=False)
                f.pos, f.identity = known.get(f.index, (0, ""))
                f.copied = f.pos
                feeds.append(f)
        if not feeds:
            return
        self._feeds[cfg.name] = feeds
        scope = trio.CancelScope()
        self._scopes[cfg.name] = scope

        async def run() -> None:
            with scope:
                await recover_positions(stream, feeds)
                async with trio.open_nursery() as nursery:
                    for f in feeds:
                        nursery.start_soon(f.run)

        self._nursery.start_soon(run)

    def _stop(self, name: str) -> None:
        scope = self._scopes.pop(name, None)
        if scope is not None:
            scope.cancel()
        self._feeds.pop(name, None)
        self._configs.pop(name, None)

    # -- origins --------------------------------------------------------------------

    def open_origin(self, feed: Feed) -> Origin | None:
        """The origin ``feed`` reads, or None while it cannot be reached
        (missing: ``feed.error`` says so; in another domain without a
        ``remote`` factory: no error)."""
        ext = feed.src.external
        if ext is not None and self.is_remote(feed.src):
            if self._remote is not None:
                return self._remote(feed)
            key = f"{feed.target.cfg.name}/{feed.index}"
            if key not in self._warned:
                self._warned.add(key)
                log.warning(
                    "event=source_unsupported stream=%s origin=%s api=%s reason=no_messaging",
                    feed.target.cfg.name,
                    feed.src.name,
                    ext.api,
                )
            return None
        stream = self._streams.get(feed.src.name)
        if stream is None and self.clustered and self._remote is not None:
            return self._remote(feed)  # on another server of the cluster: over the API
        if stream is None:
            feed.error = dict(ERR_STREAM_NOT_FOUND)
            return None
        return LocalOrigin(self._streams, stream, feed.filters)

    # -- StreamInfo ---------------------------------------------------------------------

    def mirror_info(self, name: str) -> dict[str, Any] | None:
        """The ``mirror`` entry of stream ``name``'s info (None if not a mirror)."""
        now = time.time_ns()
        for f in self._feeds.get(name, []):
            if f.mirror:
                return f.info(now)
        return None

    def sources_info(self, name: str) -> list[dict[str, Any]]:
        """The ``sources`` entries of stream ``name``'s info, in config order."""
        now = time.time_ns()
        return [f.info(now) for f in self._feeds.get(name, []) if not f.mirror]
