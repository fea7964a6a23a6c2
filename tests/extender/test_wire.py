"""The extender's large bodies: the NodeNames memo parses exactly as a full parse, the priority template encodes
exactly the HostPriorityList."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from operators.extender.args import BadArgs, parse_args
from operators.extender.wire import NameListMemo, PriorityTemplate
from tests.fuzz.strategies import json_values

NAMES = ["n-1", "n-2", "n-3"]
POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"}}


def go_body(args: dict[str, Any]) -> bytes:
    """ExtenderArgs as kube-scheduler encodes them: Go's field order, no spaces."""
    return orjson.dumps({"Pod": args.get("Pod"), "Nodes": args.get("Nodes"), "NodeNames": args.get("NodeNames")})


def learned(names: list[str]) -> NameListMemo:
    memo = NameListMemo()
    parse_args(go_body({"Pod": POD, "NodeNames": names}), memo)
    assert memo.names == names
    return memo


def outcome(body: bytes, memo: NameListMemo) -> Any:
    try:
        return parse_args(body, memo)
    except BadArgs as error:
        return f"BadArgs: {error}"


def test_the_same_list_is_not_parsed_again() -> None:
    memo = NameListMemo()
    first = parse_args(go_body({"Pod": POD, "NodeNames": NAMES}), memo)[1]
    other_pod = {"metadata": {"name": "q", "namespace": "team-1", "labels": {"app": "x"}}}
    pod, names, items = parse_args(go_body({"Pod": other_pod, "NodeNames": list(NAMES)}), memo)
    assert names is first and items is None  # the very list object of the first body
    assert (pod.name, pod.namespace, pod.labels) == ("q", "team-1", {"app": "x"})
    changed = parse_args(go_body({"Pod": POD, "NodeNames": ["n-1", "n-2", "n-4"]}), memo)[1]
    assert changed == ["n-1", "n-2", "n-4"] and changed is not first
    assert parse_args(go_body({"Pod": POD, "NodeNames": ["n-3"]}), memo)[1] == ["n-3"]  # a suffix of the list


def test_a_list_encoded_otherwise_is_parsed_each_time() -> None:
    memo = NameListMemo()
    spaced = json.dumps({"Pod": POD, "NodeNames": NAMES}).encode()  # ", " and ": ": not as Go writes it
    first = parse_args(spaced, memo)[1]
    again = parse_args(spaced, memo)[1]
    assert first == again == NAMES and again is not first and memo.names is None


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"Pod":' + orjson.dumps(POD), NAMES),  # what kube-scheduler sends
        (b'{"Pod":' + orjson.dumps(POD) + b',"NodeNames":["zz"]', NAMES),  # a duplicate key: the last one wins
        (b'{"Pod":' + orjson.dumps(POD) + b',"Nodes":{"items":[]}', NAMES),  # NodeNames win over Nodes
        (b"{", "BadArgs: not JSON"),  # "{," is not an object
        (b'{"Pod":{"metadata":{"name":"x"}', "BadArgs: not JSON"),  # the list would close the pod's metadata
        (b'["Pod"', "BadArgs: not JSON"),
        (b'{"Pod":"x"', "BadArgs: ExtenderArgs.Pod must be a Pod object"),
        (b'{"Pod":{"metadata":{}}', "BadArgs: ExtenderArgs.Pod: "),
    ],
)
def test_a_body_ending_with_the_held_list(head: bytes, expected: Any) -> None:
    body = head + b',"NodeNames":' + orjson.dumps(NAMES) + b"}"
    got = outcome(body, learned(NAMES))
    assert got == outcome(body, NameListMemo())  # what a parse of the whole body says
    if isinstance(expected, str):
        assert isinstance(got, str) and got.startswith(expected)
    else:
        assert got[1] == expected


def compact(value: Any) -> bytes:
    """``value`` as JSON without spaces, an object without its closing brace (the held list closes it)."""
    text = json.dumps(value, separators=(",", ":")).encode()
    return text[:-1] if isinstance(value, dict) else text


heads = st.one_of(
    json_values.map(compact),
    st.fixed_dictionaries({"Pod": json_values}, optional={"Nodes": json_values, "NodeNames": json_values}).map(compact),
    st.fixed_dictionaries({"Pod": st.just(POD)}, optional={"NodeNames": json_values}).map(compact),
    st.binary(max_size=40),
    st.sampled_from([b"", b"{", b"{ ", b'{"Pod":{}', b'{"Pod":{"metadata":{"name":"x"}}', b'{"Pod":{"metadata":{"n":']),
)
tails = st.sampled_from([b"", b"}", b'"}', b"]}", b" }", b"}}"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(heads, tails)
@example(b'{"Pod":{"metadata":{"name":"x"}}', b"}")
@example(b'{"Pod":{"metadata":{"name":"x"},"a":', b"}}")
def test_any_body_parses_as_a_full_parse_does(head: bytes, tail: bytes) -> None:
    """Whatever surrounds the held list, the memo changes nothing but the time taken."""
    body = head + b',"NodeNames":' + orjson.dumps(NAMES) + tail
    assert outcome(body, learned(NAMES)) == outcome(body, NameListMemo())


def test_the_priority_template_is_the_host_priority_list() -> None:
    names = ["n-1", 'odd"name', "ü-node"]
    answer = PriorityTemplate(names).encode(np.array([10, 0, 7], dtype=np.int64))
    assert answer == b'[{"Score":10,"Host":"n-1"},{"Score": 0,"Host":"odd\\"name"},{"Score": 7,"Host":"\xc3\xbc-node"}]'
    assert json.loads(answer) == [
        {"Score": 10, "Host": "n-1"},
        {"Score": 0, "Host": 'odd"name'},
        {"Score": 7, "Host": "ü-node"},
    ]
    assert PriorityTemplate([]).encode(np.array([], dtype=np.int64)) == b"[]"


def test_the_template_is_reused_unchanged() -> None:
    template = PriorityTemplate(["a", "b"])
    assert json.loads(template.encode(np.array([3, 10]))) == [{"Score": 3, "Host": "a"}, {"Score": 10, "Host": "b"}]
    assert json.loads(template.encode(np.array([1, 2]))) == [{"Score": 1, "Host": "a"}, {"Score": 2, "Host": "b"}]
