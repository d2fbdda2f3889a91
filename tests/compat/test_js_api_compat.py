"""Differential: the stream management and message API against the reference nats-server.

One reference nats-server 2.15 and one trijet run for the whole module
(``tests.support.jsdiff``).  Each scenario is a list of raw requests —
stream creates, publishes (their PubAcks are compared too), STREAM.INFO /
NAMES / LIST / PURGE / UPDATE / DELETE, MSG.GET / MSG.DELETE and DIRECT.GET
— sent to both servers in order; every answer must be the same text after
the harness's normalisation (timestamps, server names and the reference's
``_nats.*`` metadata masked; key order, omitted fields, escapes, header order
and status lines compared as sent).  Bad input is part of most scenarios and
is followed by a STREAM.INFO with ``deleted_details`` and ``subjects_filter``,
so "nothing stored changed" is compared as well.  Streams are deleted on both
servers after every scenario.

Deliberate differences (not compared): ``_nats.*`` metadata (trijet does not
implement JetStream API levels).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.jsdiff import Pair, Req, start_pair
from tests.support.servers import reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

HDRS = b"NATS/1.0\r\nA: 1\r\nB: two\r\n\r\n"
LONG = "L" * 300


def create(name: str = "S", body: str | None = None) -> Req:
    return Req(f"$JS.API.STREAM.CREATE.{name}", body or f'{{"name":"{name}","subjects":["a.>"]}}')


def update(body: str, name: str = "S") -> Req:
    return Req(f"$JS.API.STREAM.UPDATE.{name}", body)


def pub(subject: str, body: str = "x", headers: bytes | None = None) -> Req:
    return Req(subject, body, headers=headers)


def info(body: str = "", name: str = "S") -> Req:
    return Req(f"$JS.API.STREAM.INFO.{name}", body)


def full_info(name: str = "S") -> Req:
    """Everything the stream holds: counts, deleted sequences, subjects."""
    return info('{"deleted_details":true,"subjects_filter":">"}', name)


def purge(body: str = "", name: str = "S") -> Req:
    return Req(f"$JS.API.STREAM.PURGE.{name}", body)


def get(body: str, name: str = "S") -> Req:
    return Req(f"$JS.API.STREAM.MSG.GET.{name}", body)


def delete_msg(body: str, name: str = "S") -> Req:
    return Req(f"$JS.API.STREAM.MSG.DELETE.{name}", body)


def dget(body: str, name: str = "S", expect: str = "one") -> Req:
    return Req(f"$JS.API.DIRECT.GET.{name}", body, expect=expect)  # type: ignore[arg-type]


def dlast(subject: str, body: str = "", name: str = "S") -> Req:
    return Req(f"$JS.API.DIRECT.GET.{name}.{subject}", body)


FILL = [
    pub("a.1"),
    pub("a.2", "yy", HDRS),
    pub("a.1", ""),
    pub("a.3", "z"),
    pub("a.1", "w"),
    pub("a.2", "v"),
]
"""Six messages on three subjects (one with headers, one empty)."""

SCENARIOS: dict[str, list[Req]] = {
    # ------------------------------------------------------------------ STREAM.INFO
    "info_bodies": [
        create(),
        *FILL,
        info(),
        info("{}"),
        info(" {} "),
        info("x"),
        info("null"),
        info("12"),
        info('{"deleted_details":false}'),
    ],
    "info_subjects_filter": [
        create(),
        *FILL,
        info('{"subjects_filter":">"}'),
        info('{"subjects_filter":"a.1"}'),
        info('{"subjects_filter":"a.*"}'),
        info('{"subjects_filter":"b"}'),
        info('{"subjects_filter":"a..b"}'),
        info('{"subjects_filter":""}'),
    ],
    "info_subjects_paging": [
        create(),
        *FILL,
        info('{"subjects_filter":">","offset":1}'),
        info('{"subjects_filter":">","offset":2}'),
        info('{"subjects_filter":">","offset":3}'),
        info('{"subjects_filter":">","offset":9}'),
        info('{"subjects_filter":">","offset":-2}'),
        info('{"offset":1}'),
    ],
    "info_deleted_details": [
        create(),
        *FILL,
        delete_msg('{"seq":2}'),
        delete_msg('{"seq":4}'),
        info('{"deleted_details":true}'),
        info(),
        full_info(),
    ],
    "info_bad_input": [
        create(),
        *FILL,
        info('{"deleted_details":"x"}'),
        info('{"subjects_filter":1}'),
        info('{"offset":"1"}'),
        info('{"offset":1.5}'),
        info('{"bogus":1}'),
        info("[1]"),
        info("{"),
        info('{"deleted_details":true} x'),
        info('{"DELETED_DETAILS":true}'),
        full_info(),
    ],
    "info_not_found": [info(name="X"), info("{", name="X"), info('{"bogus":1}', name="X")],
    # ------------------------------------------------------------------ NAMES / LIST
    "names_and_list": [
        create("B", '{"name":"B","subjects":["b.>"]}'),
        create("A", '{"name":"A","subjects":["a.>","x"]}'),
        create("C", '{"name":"C","subjects":["c"],"storage":"memory"}'),
        Req("$JS.API.STREAM.NAMES"),
        Req("$JS.API.STREAM.NAMES", "{}"),
        Req("$JS.API.STREAM.NAMES", '{"offset":1}'),
        Req("$JS.API.STREAM.NAMES", '{"offset":3}'),
        Req("$JS.API.STREAM.NAMES", '{"offset":30}'),
        Req("$JS.API.STREAM.NAMES", '{"offset":-1}'),
        Req("$JS.API.STREAM.NAMES", '{"subject":"a.1"}'),
        Req("$JS.API.STREAM.NAMES", '{"subject":">"}'),
        Req("$JS.API.STREAM.NAMES", '{"subject":"*"}'),
        Req("$JS.API.STREAM.NAMES", '{"subject":"zz"}'),
        Req("$JS.API.STREAM.NAMES", "x"),
        Req("$JS.API.STREAM.LIST"),
        Req("$JS.API.STREAM.LIST", '{"offset":2}'),
        Req("$JS.API.STREAM.LIST", '{"offset":5}'),
        Req("$JS.API.STREAM.LIST", '{"subject":"b.x"}'),
        Req("$JS.API.STREAM.LIST", '{"subject":"zz"}'),
    ],
    "names_list_empty": [
        Req("$JS.API.STREAM.NAMES"),
        Req("$JS.API.STREAM.LIST"),
        Req("$JS.API.STREAM.NAMES", '{"offset":2}'),
        Req("$JS.API.STREAM.LIST", '{"offset":2}'),
    ],
    "names_list_bad_input": [
        create(),
        Req("$JS.API.STREAM.NAMES", '{"offset":"x"}'),
        Req("$JS.API.STREAM.NAMES", '{"subject":5}'),
        Req("$JS.API.STREAM.NAMES", '{"bogus":true}'),
        Req("$JS.API.STREAM.NAMES", "[]"),
        Req("$JS.API.STREAM.NAMES", "{"),
        Req("$JS.API.STREAM.LIST", '{"offset":"x"}'),
        Req("$JS.API.STREAM.LIST", '{"subject":[]}'),
        Req("$JS.API.STREAM.LIST", '{"bogus":true}'),
        Req("$JS.API.STREAM.LIST", "{"),
        Req("$JS.API.STREAM.LIST", "null"),
    ],
    # ------------------------------------------------------------------ PURGE
    "purge_all": [create(), *FILL, purge(), full_info(), pub("a.9"), full_info()],
    "purge_empty_object": [create(), *FILL, purge("{}"), full_info()],
    "purge_filter": [
        create(),
        *FILL,
        purge('{"filter":"a.1"}'),
        full_info(),
        purge('{"filter":"a.*"}'),
        full_info(),
    ],
    "purge_filter_none_match": [
        create(),
        *FILL,
        purge('{"filter":"b"}'),
        purge('{"filter":"a..b"}'),
        full_info(),
    ],
    "purge_seq": [create(), *FILL, purge('{"seq":3}'), full_info(), purge('{"seq":3}')],
    "purge_seq_beyond_end": [create(), *FILL, purge('{"seq":100}'), full_info(), pub("a.1")],
    "purge_keep": [create(), *FILL, purge('{"keep":2}'), full_info(), purge('{"keep":5}')],
    "purge_filter_keep": [create(), *FILL, purge('{"filter":"a.1","keep":1}'), full_info()],
    "purge_filter_seq": [create(), *FILL, purge('{"filter":"a.2","seq":6}'), full_info()],
    "purge_zero_values": [
        create(),
        *FILL,
        purge('{"seq":0}'),
        purge('{"keep":0}'),
        purge('{"filter":""}'),
        full_info(),
    ],
    "purge_bad_input": [
        create(),
        *FILL,
        purge('{"seq":2,"keep":1}'),
        purge('{"seq":"x"}'),
        purge('{"keep":-1}'),
        purge('{"filter":1}'),
        purge('{"bogus":true}'),
        purge("[]"),
        purge("{"),
        full_info(),
        purge("x"),
        full_info(),
    ],
    "purge_not_found": [
        purge(name="X"),
        purge("x", name="X"),
        purge("{", name="X"),
        purge('{"seq":1,"keep":1}', name="X"),
    ],
    "purge_denied": [
        create("S", '{"name":"S","subjects":["a.>"],"deny_purge":true}'),
        *FILL,
        purge(),
        purge('{"filter":"a.1"}'),
        purge('{"seq":1,"keep":1}'),
        full_info(),
    ],
    "purge_sealed": [
        create(),
        *FILL,
        update('{"name":"S","subjects":["a.>"],"sealed":true}'),
        purge(),
        purge("x"),
        delete_msg('{"seq":1}'),
        pub("a.1"),
        full_info(),
    ],
    # ------------------------------------------------------------------ MSG.GET
    "get_by_seq": [
        create(),
        *FILL,
        get('{"seq":1}'),
        get('{"seq":2}'),
        get('{"seq":3}'),
        get('{"seq":6}'),
        get('{"seq":7}'),
        get('{"seq":2,"no_hdr":true}'),
    ],
    "get_last_and_next": [
        create(),
        *FILL,
        get('{"last_by_subj":"a.1"}'),
        get('{"last_by_subj":"a.*"}'),
        get('{"last_by_subj":">"}'),
        get('{"last_by_subj":"b"}'),
        get('{"next_by_subj":"a.2"}'),
        get('{"seq":3,"next_by_subj":"a.2"}'),
        get('{"seq":7,"next_by_subj":"a.2"}'),
        get('{"seq":2,"next_by_subj":"a.*"}'),
        get('{"seq":0,"next_by_subj":"a.3"}'),
    ],
    "get_start_time": [
        create(),
        *FILL,
        get('{"start_time":"2020-01-01T00:00:00Z"}'),
        get('{"start_time":"2200-01-01T00:00:00Z"}'),
        get('{"start_time":"2020-01-01T01:00:00.5+01:00"}'),
        get('{"start_time":"2020-01-01T00:00:00Z","next_by_subj":"a.3"}'),
        get('{"start_time":"yesterday"}'),
        get('{"start_time":"2020-13-01T00:00:00Z"}'),
        get('{"start_time":"2020-01-01"}'),
        get('{"start_time":"2020-01-01T00:00:00Zjunk"}'),
        get('{"start_time":5}'),
    ],
    "get_deleted_message": [
        create(),
        *FILL,
        delete_msg('{"seq":3}'),
        get('{"seq":3}'),
        get('{"seq":3,"next_by_subj":"a.1"}'),
        purge('{"seq":5}'),
        get('{"seq":1}'),
        get('{"last_by_subj":"a.3"}'),
    ],
    "get_bad_requests": [
        create(),
        *FILL,
        get(""),
        get("{}"),
        get(" { } "),
        get("  "),
        get("null"),
        get('{"seq":0}'),
        get('{"seq":1,"last_by_subj":"a.1"}'),
        get('{"last_by_subj":"a.1","next_by_subj":"a.1"}'),
        get('{"seq":1,"start_time":"2020-01-01T00:00:00Z"}'),
        get('{"last_by_subj":"a.1","start_time":"2020-01-01T00:00:00Z"}'),
        get('{"seq":1,"batch":2}'),
        get('{"seq":1,"max_bytes":10}'),
        get('{"multi_last":["a.1"]}'),
        get('{"last_by_subj":""}'),
        get('{"seq":1,"up_to_seq":3}'),
    ],
    "get_bad_json": [
        create(),
        *FILL,
        get('{"seq":"x"}'),
        get('{"seq":-1}'),
        get('{"seq":1.5}'),
        get('{"last_by_subj":5}'),
        get('{"no_hdr":"yes"}'),
        get('{"multi_last":"a"}'),
        get('{"x":1}'),
        get("x"),
        get("[]"),
        get("{"),
        get('{"seq":1} {"seq":2}'),
        get('{"seq":1} x'),
        get('{"SEQ":2}'),
        full_info(),
    ],
    "get_not_found": [get('{"seq":1}', "X"), get("", "X"), get("{", "X")],
    # ------------------------------------------------------------------ MSG.DELETE
    "delete_msg": [
        create(),
        *FILL,
        delete_msg('{"seq":2}'),
        delete_msg('{"seq":2}'),
        delete_msg('{"seq":1,"no_erase":true}'),
        delete_msg('{"seq":1}'),
        delete_msg('{"seq":6}'),
        delete_msg('{"seq":6}'),
        delete_msg('{"seq":99}'),
        delete_msg('{"seq":0}'),
        full_info(),
        get('{"seq":2}'),
    ],
    "delete_msg_memory": [
        create("S", '{"name":"S","subjects":["a.>"],"storage":"memory"}'),
        *FILL,
        delete_msg('{"seq":2}'),
        delete_msg('{"seq":2}'),
        delete_msg('{"seq":1}'),
        delete_msg('{"seq":1}'),
        delete_msg('{"seq":99}'),
        delete_msg('{"seq":0}'),
        full_info(),
    ],
    "delete_msg_bad_input": [
        create(),
        *FILL,
        delete_msg(""),
        delete_msg("{}"),
        delete_msg("null"),
        delete_msg('{"seq":"1"}'),
        delete_msg('{"seq":-1}'),
        delete_msg('{"seq":1,"foo":1}'),
        delete_msg('{"no_erase":1}'),
        delete_msg("x"),
        delete_msg("[]"),
        delete_msg('{"seq":1', "X"),
        delete_msg('{"seq":1}', "X"),
        full_info(),
    ],
    "delete_msg_denied": [
        create("S", '{"name":"S","subjects":["a.>"],"deny_delete":true}'),
        *FILL,
        delete_msg('{"seq":1}'),
        delete_msg('{"seq":99}'),
        delete_msg("{}"),
        full_info(),
    ],
    # ------------------------------------------------------------------ STREAM.DELETE
    "stream_delete": [
        create(),
        *FILL,
        Req("$JS.API.STREAM.DELETE.S", '{"x":1}'),
        Req("$JS.API.STREAM.DELETE.S", "x"),
        Req("$JS.API.STREAM.DELETE.S", "null"),
        Req("$JS.API.STREAM.DELETE.S", "[]"),
        full_info(),
        Req("$JS.API.STREAM.DELETE.S", " {} "),
        Req("$JS.API.STREAM.DELETE.S", ""),
        info(),
        get('{"seq":1}'),
        pub("a.1"),
        create(),
        full_info(),
        get('{"seq":1}'),
    ],
    "stream_delete_not_found": [
        Req("$JS.API.STREAM.DELETE.X"),
        Req("$JS.API.STREAM.DELETE.X", "{}"),
        Req("$JS.API.STREAM.DELETE.X", "x"),
    ],
    # ------------------------------------------------------------------ UPDATE
    "update_subjects": [
        create(),
        pub("a.1"),
        update('{"name":"S","subjects":["a.>","b.*"]}'),
        pub("b.1"),
        update('{"name":"S","subjects":["b.*"]}'),
        pub("b.2"),
        full_info(),
    ],
    "update_limits_shrink": [
        create(),
        *FILL,
        update('{"name":"S","subjects":["a.>"],"max_msgs":3}'),
        full_info(),
        update('{"name":"S","subjects":["a.>"],"max_msgs":3,"max_msgs_per_subject":1}'),
        full_info(),
        update('{"name":"S","subjects":["a.>"],"max_bytes":40}'),
        full_info(),
    ],
    "update_description_metadata": [
        create(),
        update('{"name":"S","subjects":["a.>"],"description":"d","metadata":{"k":"v"}}'),
        info(),
        update('{"name":"S","subjects":["a.>"]}'),
    ],
    "update_forbidden": [
        create(),
        update('{"name":"S","subjects":["a.>"],"storage":"memory"}'),
        update('{"name":"S","subjects":["a.>"],"retention":"workqueue"}'),
        update('{"name":"S","subjects":["a.>"],"retention":"interest"}'),
        update('{"name":"S","subjects":["a.>"],"mirror":{"name":"O"}}'),
        update('{"name":"S","subjects":["a.>"],"num_replicas":3}'),
        update('{"name":"T","subjects":["a.>"]}'),
        update('{"name":"S","subjects":["a.>"],"max_age":1}'),
        update('{"name":"S","subjects":["a.>"],"bogus":1}'),
        update("{"),
        update(""),
        info(),
    ],
    "update_sealed_and_denials": [
        create(),
        update('{"name":"S","subjects":["a.>"],"deny_delete":true,"deny_purge":true}'),
        update('{"name":"S","subjects":["a.>"]}'),
        update('{"name":"S","subjects":["a.>"],"sealed":true}'),
        update('{"name":"S","subjects":["a.>"],"sealed":false}'),
    ],
    "update_overlap_and_not_found": [
        create(),
        create("O", '{"name":"O","subjects":["o.>"]}'),
        update('{"name":"S","subjects":["a.>","o.1"]}'),
        update('{"name":"X","subjects":["x"]}', "X"),
    ],
    # ------------------------------------------------------------------ DIRECT.GET
    "direct_get_json": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        *FILL,
        dget('{"seq":1}'),
        dget('{"seq":2}'),
        dget('{"seq":3}'),
        dget('{"seq":9}'),
        dget('{"last_by_subj":"a.1"}'),
        dget('{"last_by_subj":"a.*"}'),
        dget('{"next_by_subj":"a.2","seq":3}'),
        dget('{"next_by_subj":"a.3"}'),
        dget('{"seq":2,"no_hdr":true}'),
        dget('{"start_time":"2020-01-01T00:00:00Z"}'),
    ],
    "direct_get_bad": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        *FILL,
        dget(""),
        dget("{}"),
        dget('{"seq":0}'),
        dget("null"),
        dget("x"),
        dget("[]"),
        dget('{"seq":"x"}'),
        dget('{"bogus":1}'),
        dget('{"seq":1,"last_by_subj":"a.1"}'),
        dget('{"last_by_subj":"a.1","batch":2}'),
        dget('{"last_by_subj":"a.1","next_by_subj":"a.1"}'),
        dget('{"next_by_subj":"a.1","multi_last":["a.1"]}'),
        full_info(),
    ],
    "direct_get_batch": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        *FILL,
        dget('{"seq":1,"batch":2}', expect="eob"),
        dget('{"seq":4,"batch":10}', expect="eob"),
        dget('{"next_by_subj":"a.1","batch":3}', expect="eob"),
        dget('{"seq":9,"batch":2}', expect="eob"),
        dget('{"seq":1,"batch":3,"max_bytes":3}', expect="eob"),
        dget('{"seq":1,"batch":2,"no_hdr":true}', expect="eob"),
    ],
    "direct_get_multi_last": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        *FILL,
        dget('{"multi_last":["a.*"]}', expect="eob"),
        dget('{"multi_last":["a.1","a.3"]}', expect="eob"),
        dget('{"multi_last":["a.*"],"up_to_seq":4}', expect="eob"),
        dget('{"multi_last":["a.*"],"batch":1}', expect="eob"),
        dget('{"multi_last":["b"]}', expect="eob"),
    ],
    "direct_get_last_by_subject": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        *FILL,
        dlast("a.1"),
        dlast("a.2"),
        dlast("a.*"),
        dlast("b"),
        dlast("a.1", "{}"),
        dlast("a.1", '{"seq":1}'),
        dlast("a.1", "x"),
        dlast("a.1", '{"no_hdr":true}'),
    ],
    "direct_get_not_allowed": [
        create(),
        *FILL,
        dget('{"seq":1}'),
        dlast("a.1"),
        dget('{"seq":1}', "X"),
        Req("$JS.API.DIRECT.GET"),
        Req("$JS.API.DIRECT.BOGUS", expect="none"),
        update('{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        dget('{"seq":1}'),
        update('{"name":"S","subjects":["a.>"],"allow_direct":false}'),
        dget('{"seq":1}'),
        dlast("a.1"),
    ],
    "direct_get_not_counted": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        pub("a.1"),
        Req("$JS.API.INFO"),
        dget('{"seq":1}'),
        dget('{"seq":9}'),
        dget("x"),
        get('{"seq":1}'),
        get('{"seq":9}'),
        Req("$JS.API.INFO"),
    ],
    # ------------------------------------------------------------------ odd input
    "long_names_and_filters": [
        create(),
        *FILL,
        info(name=LONG),
        purge(name=LONG),
        get('{"seq":1}', LONG),
        delete_msg('{"seq":1}', LONG),
        Req(f"$JS.API.STREAM.DELETE.{LONG}"),
        dget('{"seq":1}', LONG),
        info('{"subjects_filter":"' + "a." * 2000 + 'x"}'),
        purge('{"filter":"' + "b" * 200_000 + '"}'),
        get('{"last_by_subj":"' + "c" * 5000 + '"}'),
        full_info(),
    ],
    "odd_json": [
        create(),
        *FILL,
        get('{"seq":1e0}'),
        get('{"seq":01}'),
        get('{"seq":1,}'),
        get('{"seq":1}}'),
        get('{"seq":true}'),
        get('{"seq":18446744073709551615}'),
        get('{"seq":18446744073709551616}'),
        delete_msg('{"seq":18446744073709551615}'),
        purge('{"keep":1,"keep":2}'),
        full_info(),
    ],
    "requests_without_reply": [
        create(),
        *FILL,
        Req("$JS.API.STREAM.PURGE.S", '{"filter":"a.1"}', reply=False),
        Req("$JS.API.STREAM.MSG.DELETE.S", '{"seq":2}', reply=False),
        full_info(),
    ],
    "memory_stream_direct": [
        create("S", '{"name":"S","subjects":["a.>"],"storage":"memory","allow_direct":true}'),
        *FILL,
        dget('{"seq":2}'),
        dget('{"seq":1,"batch":3}', expect="eob"),
        get('{"seq":2}'),
        delete_msg('{"seq":3}'),
        get('{"seq":3}'),
        dget('{"seq":3}'),
        dget('{"seq":2,"batch":3}', expect="eob"),
        full_info(),
    ],
    "update_more_limits": [
        create(),
        update('{"name":"S","subjects":["a.>"],"max_msgs_per_subject":1}'),
        *FILL,
        full_info(),
        update('{"name":"S","subjects":["a.>"],"discard":"new","max_msgs":2}'),
        pub("a.7"),
        full_info(),
        update('{"name":"S","subjects":["a.>"],"allow_rollup_hdrs":true}'),
        update('{"name":"S","subjects":["a.>"],"max_age":1000000000}'),
        update('{"name":"S","subjects":["a.>"],"duplicate_window":5000000000}'),
        update('{"name":"S"}'),
        update('{"name":"S","subjects":[]}'),
    ],
    "direct_get_times_and_limits": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        *FILL,
        dget('{"multi_last":["a.*"],"up_to_time":"2020-01-01T00:00:00Z"}', expect="eob"),
        dget('{"multi_last":["a.*"],"up_to_time":"2200-01-01T00:00:00Z"}', expect="eob"),
        dget('{"multi_last":["a.*"],"seq":3}', expect="eob"),
        dget('{"seq":1,"up_to_seq":2,"up_to_time":"2200-01-01T00:00:00Z"}'),
        dget('{"start_time":"2200-01-01T00:00:00Z"}'),
        dget('{"start_time":"2200-01-01T00:00:00Z","batch":2}', expect="eob"),
        dget('{"next_by_subj":"a.1","seq":2,"batch":5,"no_hdr":true}', expect="eob"),
    ],
    "direct_get_header_shapes": [
        create("S", '{"name":"S","subjects":["a.>"],"allow_direct":true}'),
        pub("a.1", "x", b"NATS/1.0\r\n\r\n"),
        pub("a.2", "y", b"NATS/1.0\r\nK: a\r\nK: b\r\n\r\n"),
        dget('{"seq":1}'),
        dget('{"seq":2}'),
        get('{"seq":1}'),
        get('{"seq":2}'),
    ],
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    p = start_pair(Path(tmp_path_factory.mktemp("jsdiff")))
    try:
        yield p
    finally:
        p.stop()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(pair: Pair, name: str) -> None:
    steps = SCENARIOS[name]
    try:
        ref, tj = pair.exchange(steps)
    finally:
        pair.reset()
    diffs = [
        f"step {i} {s.subject} {s.payload!r}:\n  ref:    {a}\n  trijet: {b}"
        for i, (s, a, b) in enumerate(zip(steps, ref, tj, strict=True))
        if a != b
    ]
    assert not diffs, "\n".join(diffs)
