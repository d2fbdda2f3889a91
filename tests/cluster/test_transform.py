"""cluster.transform: subject transforms as nats-server 2.15.1 applies them.

The pinned cases were observed on the reference server (a stream with that
``subject_transform``, one publish, the stored subject read back).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.transform import SubjectTransform, TransformError, fnv1a32

OBSERVED = [
    ("in.*.*", "out.$2.{{wildcard(1)}}", "in.a.b", "out.b.a"),
    ("a.*.*", "b.{{wildcard(2)}}.{{Wildcard(1)}}", "a.x.y", "b.y.x"),
    ("a.*", "b.{{splitFromLeft(1,2)}}", "a.abcdef", "b.ab.cdef"),
    ("a.*", "b.{{SplitFromRight(1,2)}}", "a.abcdef", "b.abcd.ef"),
    ("a.*", "b.{{sliceFromLeft(1,2)}}", "a.abcde", "b.ab.cd.e"),
    ("a.*", "b.{{sliceFromRight(1,2)}}", "a.abcde", "b.a.bc.de"),
    ("a.*", "b.{{split(1,-)}}", "a.x--y-z", "b.x.y.z"),
    ("a.*", "b.{{split(1,-)}}", "a.--x", "b..x"),
    ("a.*", "b.{{left(1,2)}}", "a.abcde", "b.ab"),
    ("a.*", "b.{{right(1,2)}}", "a.abcde", "b.de"),
    ("a.*", "b.{{left(1,9)}}", "a.abc", "b.abc"),
    ("a.*.>", "b.{{partition(5,1)}}.>", "a.key.t1.t2", "b.3.t1.t2"),
    ("a.>", "b.{{partition(4)}}.>", "a.k.z", "b.3.k.z"),
    ("a.b", "c.{{partition(7)}}", "a.b", "c.5"),
    ("a.*.*", "p.{{partition(10,1,2)}}", "a.xx.yy", "p.1"),
    ("a.*", "b.$1.$1", "a.q", "b.q.q"),
    ("a.*", "b.{{ wildcard( 1 ) }}", "a.q", "b.q"),
    ("p.*", "q.{{partition(3,1)}}.{{wildcard(1)}}", "p.a", "q.1.a"),
    ("p.*", "q.{{partition(3,1)}}.{{wildcard(1)}}", "p.c", "q.2.c"),
    ("p.*", "q.{{partition(3,1)}}.{{wildcard(1)}}", "p.foo", "q.0.foo"),
    ("", "s.>", "r.x.y", "s.r.x.y"),
]


@pytest.mark.parametrize(("src", "dest", "subject", "want"), OBSERVED)
def test_observed_on_reference(src: str, dest: str, subject: str, want: str) -> None:
    t = SubjectTransform.compile(src, dest)
    assert t is not None
    assert t.match(subject) == want


def test_no_dest_is_no_transform() -> None:
    assert SubjectTransform.compile("a.*", "") is None


def test_subject_outside_src_is_not_transformed() -> None:
    t = SubjectTransform.compile("in.*.*", "out.$2.$1")
    assert t is not None
    assert t.match("in.a.b.c") is None
    assert t.match("other.a.b") is None
    assert t.match("in.*.b") is None  # not a literal subject


def test_identity() -> None:
    t = SubjectTransform.compile(">", ">")
    assert t is not None and t.match("x.y") == "x.y"


@pytest.mark.parametrize(
    ("src", "dest", "reason"),
    [
        ("a.*", "b.*", "invalid subject"),
        ("a.>", "b", "invalid subject"),
        ("a.*", "b.>", "invalid subject"),
        ("a..b", "c", "invalid subject"),
        ("a.>.b", "c.>", "invalid subject"),
        (
            "a.*",
            "b.{{wildcard(2)}}",
            "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]",
        ),
        ("a.*", "b.$3", "invalid mapping destination: wildcard index out of range in $3: [3]"),
        (
            "a.b",
            "c.{{wildcard(1)}}",
            "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}",
        ),
        ("a.*", "b.{{nope(1)}}", "invalid mapping destination: unknown function in {{nope(1)}}"),
        (
            "a.*",
            "b.{{wildcard()}}",
            "invalid mapping destination: not enough arguments passed to the function"
            " in {{wildcard()}}",
        ),
        (
            "a.*",
            "b.{{wildcard(1,2)}}",
            "invalid mapping destination: too many arguments passed to the function"
            " in {{wildcard(1,2)}}",
        ),
        (
            "a.*",
            "b.{{left(1)}}",
            "invalid mapping destination: not enough arguments passed to the function"
            " in {{left(1)}}",
        ),
        (
            "a.*",
            "b.{{left(x,1)}}",
            "invalid mapping destination: function argument is invalid or in the wrong format"
            " in {{left(x,1)}}",
        ),
        (
            "a.*",
            "b.{{split(1,a b)}}",
            "invalid mapping destination: function argument is invalid or in the wrong format"
            " in {{split(1,a b)}}",
        ),
    ],
)
def test_invalid(src: str, dest: str, reason: str) -> None:
    with pytest.raises(TransformError) as exc:
        SubjectTransform.compile(src, dest)
    assert str(exc.value) == reason


def test_dollar_non_number_is_a_literal() -> None:
    t = SubjectTransform.compile("a.*", "b.$x.$1")
    assert t is not None and t.match("a.q") == "b.$x.q"


def test_random_uses_the_given_rng() -> None:
    t = SubjectTransform.compile("a.*", "b.{{random(5)}}")
    assert t is not None
    got = {t.match("a.x", random.Random(seed)) for seed in range(50)}
    assert got <= {f"b.{i}" for i in range(5)} and len(got) > 1
    assert t.match("a.x", random.Random(7)) == t.match("a.x", random.Random(7))


def test_fnv1a32_known_values() -> None:
    assert fnv1a32(b"") == 0x811C9DC5
    assert fnv1a32(b"a") == 0xE40C292C
    assert fnv1a32(b"foobar") == 0xBF9CF968


TOKEN = st.text(alphabet="abcxyz-_019", min_size=1, max_size=6)


@given(st.lists(TOKEN, min_size=1, max_size=5), st.integers(1, 64))
def test_partition_in_range_and_stable(tokens: list[str], n: int) -> None:
    src = "k." + ".".join("*" for _ in tokens)
    t = SubjectTransform.compile(src, f"p.{{{{partition({n},1)}}}}")
    assert t is not None
    out = t.match("k." + ".".join(tokens))
    assert out is not None
    assert 0 <= int(out.split(".")[1]) < n
    assert out == t.match("k." + ".".join(tokens))


@given(st.lists(TOKEN, min_size=2, max_size=6), st.randoms(use_true_random=False))
def test_wildcard_permutation_round_trips(tokens: list[str], rnd: random.Random) -> None:
    n = len(tokens)
    perm = list(range(1, n + 1))
    rnd.shuffle(perm)
    fwd = SubjectTransform.compile("s." + ".".join("*" * n), "d." + ".".join(f"${i}" for i in perm))
    inverse = [perm.index(i) + 1 for i in range(1, n + 1)]
    back = SubjectTransform.compile(
        "d." + ".".join("*" * n), "s." + ".".join(f"{{{{wildcard({i})}}}}" for i in inverse)
    )
    assert fwd is not None and back is not None
    subject = "s." + ".".join(tokens)
    mapped = fwd.match(subject)
    assert mapped is not None
    assert back.match(mapped) == subject


@given(st.text(max_size=20), st.text(max_size=30))
def test_compile_only_raises_transform_error(src: str, dest: str) -> None:
    try:
        t = SubjectTransform.compile(src, dest)
    except TransformError:
        return
    if t is not None:
        t.match("a.b.c")
