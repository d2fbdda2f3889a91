"""Router: run delivery produces exactly the bytes of one MSG per message."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from node.boundedcache import Admission
from node.outbound import Outbound
from node.protocol.wire import msg_bytes
from node.router import Router
from node.session import Subscription
from node.sublist import Sublist


class FakeClient(Outbound):
    internal = False
    deliver_filter = None
    resp_perms = None
    headers = True
    echo = True
    no_responders = False

    def __init__(self) -> None:
        self._init_outbound(1 << 30)
        self.closing = None
        self.out_bytes = 0
        self.in_msgs = 0
        self.in_bytes = 0

    def _overflow(self) -> None:
        raise AssertionError("overflow")

    def enqueue(self, data: bytes, msg_bytes: int = 0) -> None:
        self.out_bytes += msg_bytes
        self._push(data, msg=True)

    def written(self) -> bytes:
        return self._take()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"s", b"t"]),
            st.one_of(st.none(), st.just(b"R.1")),
            st.sampled_from([b"", b"a", b"abc", b"abc"]),
        ),
        max_size=30,
    )
)
def test_runs_match_per_message_delivery(msgs: list[tuple[bytes, bytes | None, bytes]]) -> None:
    router = Router(Sublist(), random.Random(1))
    sub_c = FakeClient()
    pub_c = FakeClient()
    sub_s = Subscription(sub_c, b"s", None, b"7")
    sub_t = Subscription(sub_c, b"t", None, b"8")
    router.sublist.insert(sub_s)
    router.sublist.insert(sub_t)
    pub, pub_run, _ = router.fast_publisher(pub_c)
    expected = b""
    # group consecutive same-subject messages into runs, as the parser does
    i = 0
    while i < len(msgs):
        j = i
        while j < len(msgs) and msgs[j][0] == msgs[i][0]:
            j += 1
        run = msgs[i:j]
        subject = run[0][0]
        if len(run) == 1:
            pub(subject, run[0][1], run[0][2])
        else:
            pub_run(subject, [r for _, r, _ in run], [p for _, _, p in run])
        for s, r, p in run:
            expected += msg_bytes(s, b"7" if s == b"s" else b"8", r, p)
        i = j
    router.flush()
    assert sub_c.written() == expected
    assert sub_c.out_msgs == len(msgs)
    assert pub_c.in_msgs == len(msgs)
    assert sub_s.delivered + sub_t.delivered == len(msgs)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), st.sampled_from([b"", b"x" * 9])
        ),
        max_size=40,
    ),
    st.lists(st.integers(1, 12), min_size=1, max_size=6),
)
def test_mixed_batches_match_per_message_publish(
    msgs: list[tuple[bytes, bytes]], cuts: list[int]
) -> None:
    """``fast_mixed`` (ops gathered per connection, one join) writes exactly
    what ``publish`` per message would, per client and in order."""
    outs = []
    for mode in ("mixed", "publish"):
        router = Router(Sublist(), random.Random(1))
        c1, c2, pub_c = FakeClient(), FakeClient(), FakeClient()
        router.sublist.insert(Subscription(c1, b"a", None, b"1"))
        router.sublist.insert(Subscription(c1, b"b", None, b"2"))
        router.sublist.insert(Subscription(c2, b"b", None, b"3"))  # two targets
        router.sublist.insert(Subscription(c2, b"d", None, b"4"))
        router.sublist.insert(Subscription(c1, b"e", None, b"5"))
        mixed = router.fast_mixed(pub_c)
        i = 0
        k = 0
        while i < len(msgs):
            chunk = msgs[i : i + cuts[k % len(cuts)]]
            if mode == "mixed":
                mixed([s for s, _ in chunk], [p for _, p in chunk])
            else:
                for s, p in chunk:
                    router.publish(pub_c, s, None, None, p)
            i += len(chunk)
            k += 1
            router.flush()
        outs.append((c1.written(), c2.written(), c1.out_msgs, c2.out_msgs, router.out_msgs))
    assert outs[0] == outs[1]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 15), max_size=60),
    st.lists(st.integers(1, 12), min_size=1, max_size=6),
    st.integers(1, 6),
)
def test_mixed_over_full_caches_matches_uncached_publish(
    picks: list[int], cuts: list[int], bound: int
) -> None:
    """More subjects than the plan and match caches hold (``bound`` entries,
    so ``Admission`` refuses and evicts), answers to requests seen among them
    (reply inboxes), a queue group and two targets on one subject: ``fast_mixed``
    writes exactly what ``publish`` per message writes on a router whose
    sublist caches nothing (the plain matcher), per client and in order."""
    outs = []
    for mode in ("mixed", "publish"):
        if mode == "mixed":
            router = Router(Sublist(cache_entries_max=bound), random.Random(1))
            router._plans_admit = Admission(bound, random.Random(2))
        else:
            router = Router(Sublist(cache_enabled=False), random.Random(1))
        c1, c2, c3, req_c, pub_c = (FakeClient() for _ in range(5))
        subs = [
            Subscription(c1, b"r.*", None, b"1"),
            Subscription(c2, b"r.3", None, b"2"),  # two targets
            Subscription(c3, b"r.5", b"q", b"3"),  # a queue group
            Subscription(req_c, b"_INBOX.x.*", None, b"4"),
            Subscription(pub_c, b"svc", None, b"5"),
        ]
        for sub in subs:
            router.sublist.insert(sub)
        # requests whose answers come among the messages (inboxes 12..15)
        for i in range(12, 16):
            router.publish(req_c, b"svc", b"_INBOX.x.%d" % i, None, b"req")
        router.flush()
        subjects = [b"_INBOX.x.%d" % p if p >= 12 else b"r.%d" % p for p in picks]
        mixed = router.fast_mixed(pub_c)
        i = k = 0
        while i < len(subjects):
            chunk = subjects[i : i + cuts[k % len(cuts)]]
            if mode == "mixed":
                mixed(chunk, [b"p%d" % (i + j) for j in range(len(chunk))])
            else:
                for j, s in enumerate(chunk):
                    router.publish(pub_c, s, None, None, b"p%d" % (i + j))
            i += len(chunk)
            k += 1
            router.flush()
        clients = (c1, c2, c3, req_c, pub_c)
        outs.append(
            (
                tuple(c.written() for c in clients),
                tuple(c.out_msgs for c in clients),
                router.out_msgs,
                [sub.delivered for sub in subs],
            )
        )
        if mode == "mixed":
            assert len(router._plans) <= bound
            assert router.sublist.cache_size() <= bound
    assert outs[0] == outs[1]


def test_mixed_batch_appends_once_per_connection() -> None:
    """Counting test: a batch of messages to many subjects, each with one plain
    subscriber on the same connection, costs one append to that connection's
    buffer (one join), however many messages it holds."""
    for n in (10, 1000):
        router = Router(Sublist(), random.Random(1))
        c, pub_c = FakeClient(), FakeClient()
        router.sublist.insert(Subscription(c, b"rot.>", None, b"1"))
        subjects = [b"rot.%d" % i for i in range(n)]
        for s in subjects:  # the first message of each subject makes its plan
            router.publish(pub_c, s, None, None, b"warm")
        router.flush()
        c.written()
        mixed = router.fast_mixed(pub_c)
        mixed(subjects, [b"p%d" % i for i in range(n)])
        assert len(c._out) == 1
        router.flush()
        assert c.written() == b"".join(
            msg_bytes(s, b"1", None, b"p%d" % i) for i, s in enumerate(subjects)
        )


class FakeInternal:
    internal = True
    deliver_filter = None
    resp_perms = None
    headers = True
    echo = True

    def __init__(self) -> None:
        self.got: list[tuple[bytes, bytes | None, bytes | None, bytes]] = []

    def deliver_internal(self, sub, subject, reply, headers, payload, src=None) -> None:  # type: ignore[no-untyped-def]
        self.got.append((subject, reply, headers, payload))


def test_header_publishes_to_internal_interest_skip_the_match_until_interest_changes() -> None:
    """A stream's capture of publishes with headers: after the first, delivered
    from the noted internal targets; a new subscriber (gen bumped, as
    ``Server.add_sub`` does) gets the next one too."""
    router = Router(Sublist(), random.Random(1))
    cap = FakeInternal()
    router.sublist.insert(Subscription(cap, b"js.x", None, b"1"))  # type: ignore[arg-type]
    router.gen += 1
    h = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
    for i in range(3):
        assert router.publish(None, b"js.x", b"_INBOX.%d" % i, h, b"p") == 1
    assert cap.got == [(b"js.x", b"_INBOX.%d" % i, h, b"p") for i in range(3)]
    assert router._internal_targets(b"js.x") is not None
    ext = FakeClient()
    router.sublist.insert(Subscription(ext, b"js.x", None, b"2"))
    router.gen += 1
    assert router.publish(None, b"js.x", None, h, b"q") == 2
    assert cap.got[-1] == (b"js.x", None, h, b"q")
    assert ext.written() == b"HMSG js.x 2 %d %d\r\n%bq\r\n" % (len(h), len(h) + 1, h)


def test_mixed_answers_to_inbox_families_reuse_one_match_per_family() -> None:
    """Answers to two requesters' inbox families, interleaved in one batch, and
    a family whose match is not shared (an inbox with its own literal subscriber
    beside the wildcard): ``fast_mixed`` writes what ``publish`` per message
    writes on an uncached router, and matches a shared family once per run of
    its answers instead of once per answer (counting test)."""
    outs = []
    calls = []
    for mode in ("mixed", "publish"):
        sublist = Sublist() if mode == "mixed" else Sublist(cache_enabled=False)
        router = Router(sublist, random.Random(1))
        req_a, req_b, req_c, tap, pub_c = (FakeClient() for _ in range(5))
        subs = [
            Subscription(req_a, b"_INBOX.a.*", None, b"1"),
            Subscription(req_b, b"_INBOX.b.*", None, b"2"),
            Subscription(req_c, b"_INBOX.c.*", None, b"3"),
            Subscription(tap, b"_INBOX.c.7", None, b"4"),  # a literal child: no family
            Subscription(pub_c, b"svc", None, b"5"),
        ]
        for sub in subs:
            router.sublist.insert(sub)
        answers = [b"_INBOX.a.%d" % i for i in range(6)]
        answers += [b"_INBOX.b.%d" % i for i in range(3)]
        answers += [b"_INBOX.a.%d" % i for i in range(6, 9)]
        answers += [b"_INBOX.c.%d" % i for i in (5, 6, 7, 8)]
        for subject in answers:  # the requests, so each answer is one seen
            req = req_a if b".a." in subject else req_b if b".b." in subject else req_c
            router.publish(req, b"svc", subject, None, b"req")
        router.flush()
        pub_c.written()
        once_target = router._once_target
        n_calls = [0]

        def counted(src: object, subject: bytes, f=once_target, n=n_calls) -> object:
            n[0] += 1
            return f(src, subject)

        router._once_target = counted  # type: ignore[method-assign]
        payloads = [b"p%d" % i for i in range(len(answers))]
        if mode == "mixed":
            router.fast_mixed(pub_c)(answers, payloads)
        else:
            for s, p in zip(answers, payloads, strict=True):
                router.publish(pub_c, s, None, None, p)
        router.flush()
        calls.append(n_calls[0])
        clients = (req_a, req_b, req_c, tap, pub_c)
        outs.append(
            (
                tuple(c.written() for c in clients),
                tuple(c.out_msgs for c in clients),
                router.out_msgs,
                [sub.delivered for sub in subs],
            )
        )
    assert outs[0] == outs[1]
    assert outs[0][1][:4] == (9, 3, 4, 1)
    # one match per run of a shared family (a, b, a), one per answer of c's (no family)
    assert calls[0] == 3 + 4


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("pub"), st.lists(st.integers(0, 40), min_size=1, max_size=12)),
            st.tuples(st.just("sub"), st.integers(0, 6)),
            st.tuples(st.just("unsub"), st.integers(0, 6)),
        ),
        max_size=25,
    )
)
def test_subject_families_match_per_message_publish_as_interest_changes(
    ops: list[tuple[str, object]],
) -> None:
    """New subjects of one family (``f.<n>``, ``g.h.<n>``: the first message of
    each builds its plan from the family's, without a match) are delivered
    exactly as ``publish`` delivers them on a router whose sublist caches
    nothing, while subscriptions come and go (a literal on the last token, a
    queue group, a second wildcard, a subscription on the family's level)."""
    patterns = [
        (b"f.*", None),
        (b"f.>", None),
        (b"f.7", None),  # a literal where the last token goes: no longer alike
        (b"f.*", b"q"),  # a queue group
        (b"g.*.3", None),
        (b"g.h.*", None),
        (b"f", None),
    ]

    def subject(n: int) -> bytes:
        return (b"f.%d" if n < 25 else b"g.h.%d") % n

    outs = []
    for mode in ("mixed", "publish"):
        router = Router(
            Sublist() if mode == "mixed" else Sublist(cache_enabled=False), random.Random(1)
        )
        c1, c2, pub_c = FakeClient(), FakeClient(), FakeClient()
        base = [Subscription(c1, b"f.*", None, b"1"), Subscription(c1, b"g.h.*", None, b"2")]
        for sub in base:
            router.sublist.insert(sub)
            router.gen += 1
        extra: dict[int, Subscription] = {}
        mixed = router.fast_mixed(pub_c)
        k = 0
        for op, arg in ops:
            if op == "pub":
                assert isinstance(arg, list)
                subjects = [subject(n) for n in arg]
                payloads = [b"p%d" % (k + j) for j in range(len(subjects))]
                k += len(subjects)
                if mode == "mixed":
                    mixed(subjects, payloads)
                else:
                    for s, p in zip(subjects, payloads, strict=True):
                        router.publish(pub_c, s, None, None, p)
                router.flush()
            elif op == "sub" and arg not in extra:
                assert isinstance(arg, int)
                pat, queue = patterns[arg]
                extra[arg] = Subscription(c2, pat, queue, b"%d" % (10 + arg))
                router.sublist.insert(extra[arg])
                router.gen += 1
            elif op == "unsub" and arg in extra:
                router.sublist.remove(extra.pop(arg))  # type: ignore[call-overload]
                router.gen += 1
        outs.append((c1.written(), c2.written(), c1.out_msgs, c2.out_msgs, router.out_msgs))
    assert outs[0] == outs[1]


def test_new_subjects_of_a_family_take_no_match() -> None:
    """Counting test: with one ``orders.>`` subscriber, the first message of
    each new subject ``orders.<id>`` after the first builds its plan from the
    family's (no sublist match), whatever the number of subjects; a literal
    subscription on the family's last token makes them match again."""
    router = Router(Sublist(), random.Random(1))
    c, pub_c = FakeClient(), FakeClient()
    router.sublist.insert(Subscription(c, b"orders.>", None, b"1"))
    mixed = router.fast_mixed(pub_c)
    mixed([b"orders.0"], [b"first"])
    before = router.sublist.matches
    subjects = [b"orders.%d" % i for i in range(1, 2001)]
    mixed(subjects, [b"x"] * len(subjects))
    assert router.sublist.matches == before
    router.flush()
    assert c.out_msgs == 2001
    router.sublist.insert(Subscription(c, b"orders.5000", None, b"2"))
    router.gen += 1
    mixed([b"orders.5001", b"orders.5002"], [b"y", b"y"])
    assert router.sublist.matches == before + 2
