"""JSON framing: `decode` keeps integers exact at any size, `encode` writes them back exactly.

orjson reads an integer outside [-2**63, 2**64) as a float; an `id` of 2**70 used to come back
as `-32600` with `id: null`. Each case goes through the bytes a transport receives.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from helpers import build_lab, request
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.errors import PARSE_ERROR, ProtocolError
from labkit.server import RequestContext
from labkit.transports.stdio import StdioTransport
from labkit.wire import (
    MAX_JSON_DEPTH,
    decode,
    encode,
    encoded_result_response,
    error_code,
    error_response,
    result_response,
)

HUGE_IDS = [2**63, 2**64 - 1, 2**64, 2**70, -(2**63) - 1, -(2**70), 10**40, -(10**40)]


@pytest.mark.parametrize("request_id", HUGE_IDS)
def test_a_huge_integer_decodes_exactly_from_bytes_and_text(request_id: int) -> None:
    text = f'{{"id": {request_id}, "n": [{request_id}]}}'
    for raw in (text, text.encode()):
        value = decode(raw)
        assert value == {"id": request_id, "n": [request_id]}
        assert type(value["id"]) is int


@pytest.mark.parametrize("request_id", HUGE_IDS)
def test_a_huge_integer_id_is_echoed_exactly(request_id: int) -> None:
    lab = build_lab()
    raw = json.dumps(request(request_id, "server/discover")).encode()
    response = lab.server.handle(decode(raw), RequestContext(principal="alice"))
    assert response is not None and "result" in response
    wire = encode(response)
    assert f'"id":{request_id},'.encode() in wire
    assert json.loads(wire)["id"] == request_id


def test_a_huge_integer_id_is_echoed_exactly_over_stdio() -> None:
    lab = build_lab()
    out = io.BytesIO()
    line = json.dumps(request(2**70, "tools/list")).encode() + b"\n"
    StdioTransport(lab.server, "alice").serve(io.BytesIO(line), out)
    response: dict[str, Any] = json.loads(out.getvalue())
    assert response["id"] == 2**70 and "result" in response


@pytest.mark.parametrize(
    "text",
    [
        '{"x": 0.12345678901234567890123}',  # a long fraction: still the same float
        '{"x": 1234567890123456789.5}',
        '{"s": "12345678901234567890123"}',  # digits inside a string: still a string
        '{"x": 9223372036854775807, "y": -9223372036854775808}',
    ],
)
def test_long_digit_runs_decode_as_the_standard_library_does(text: str) -> None:
    assert decode(text) == json.loads(text)
    assert decode(text.encode()) == json.loads(text)


# -- one rule, whichever parser reads the text ----------------------------------------------------

DIGITS = "1234567890123456789"  # a 19-digit run: the text goes to the exact-integer parser


def nested(depth: int, inner: str) -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize("inner", ["0", DIGITS], ids=["short numbers", "a 19-digit run"])
@pytest.mark.parametrize("as_bytes", [True, False], ids=["bytes", "text"])
def test_the_depth_limit_is_the_same_whatever_the_digits(inner: str, as_bytes: bool) -> None:
    for depth, accepted in ((MAX_JSON_DEPTH, True), (MAX_JSON_DEPTH + 1, False), (1025, False)):
        text = '{"a": ' + nested(depth - 1, inner) + "}"  # `depth` arrays and objects deep
        raw: bytes | str = text.encode() if as_bytes else text
        if accepted:
            value = decode(raw)["a"]
            for _ in range(depth - 1):
                (value,) = value
            assert value == int(inner)
        else:
            with pytest.raises(ProtocolError) as refused:
                decode(raw)
            assert refused.value.code == PARSE_ERROR


@pytest.mark.parametrize("inner", ["0", DIGITS], ids=["short numbers", "a 19-digit run"])
@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E999"])
def test_a_number_past_the_double_range_is_refused_whatever_the_digits(
    inner: str, number: str
) -> None:
    with pytest.raises(ProtocolError):
        decode(f'{{"x": {number}, "y": {inner}}}'.encode())
    assert decode(f'{{"x": 1.5e308, "y": {inner}}}'.encode())["x"] == 1.5e308


@pytest.mark.parametrize("inner", ["0", DIGITS], ids=["short numbers", "a 19-digit run"])
@pytest.mark.parametrize(
    "encode",
    [
        lambda t: t.encode("utf-16"),
        lambda t: t.encode("utf-16-le"),
        lambda t: t.encode("utf-32"),
        lambda t: t.encode("utf-32-be"),
        lambda t: b"\xef\xbb\xbf" + t.encode(),  # a UTF-8 byte order mark
        lambda t: t.replace('"s"', '"\udc80"').encode("utf-8", "surrogatepass"),  # not UTF-8
        lambda t: t.encode().replace(b'"s"', b'"\xff"'),
    ],
    ids=["utf-16", "utf-16-le", "utf-32", "utf-32-be", "bom", "encoded-surrogate", "stray-byte"],
)
def test_a_body_that_is_not_utf8_is_a_parse_error(
    inner: str, encode: Callable[[str], bytes]
) -> None:
    text = f'{{"jsonrpc": "2.0", "id": 1, "method": "s", "n": {inner}}}'
    with pytest.raises(ProtocolError) as refused:
        decode(encode(text))
    assert refused.value.code == PARSE_ERROR


@pytest.mark.parametrize("inner", ["0", DIGITS], ids=["short numbers", "a 19-digit run"])
def test_a_lone_surrogate_escape_is_kept_whatever_the_digits(inner: str) -> None:
    assert decode(f'{{"s": "\\ud800", "n": {inner}}}'.encode())["s"] == "\ud800"


# -- the two parsers give one answer ----------------------------------------------------------


def _rule_reads(raw: bytes) -> tuple[str, Any]:
    """The rule's answer written with the standard library alone: ("ok", value) or
    ("refused", None)."""

    def no_constant(name: str) -> Any:
        raise ValueError(name)

    def finite(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise ValueError(text)
        return value

    reference = json.JSONDecoder(parse_constant=no_constant, parse_float=finite)
    try:
        return "ok", reference.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return "refused", None


def _decoded(raw: bytes) -> tuple[str, Any]:
    try:
        return "ok", decode(raw)
    except ProtocolError as refused:
        assert refused.code == PARSE_ERROR
        return "refused", None


def _identical(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1 is not 1.0) and keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_identical(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**80), max_value=10**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)
_NUMBERS = st.from_regex(rb"\A-?(0|[1-9][0-9]{0,90})(\.[0-9]{1,40})?([eE][+-]?[0-9]{1,4})?\Z")


@settings(max_examples=500)
@given(value=_VALUES, ascii_only=st.booleans())
def test_any_json_value_decodes_as_the_standard_library_reads_it(
    value: Any, ascii_only: bool
) -> None:
    """Whichever parser answers (the usual one, or the standard library for what it cannot
    read exactly), the value is the rule's: same types, same floats, integers exact."""
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    expected = _rule_reads(raw)
    got = _decoded(raw)
    assert got[0] == expected[0], (raw, got, expected)
    assert _identical(got[1], expected[1]), (raw, got, expected)


@settings(max_examples=500)
@given(raw=st.one_of(_NUMBERS, st.binary(max_size=40)))
def test_any_number_or_bytes_is_accepted_or_refused_as_the_standard_library_says(
    raw: bytes,
) -> None:
    expected = _rule_reads(raw)
    got = _decoded(raw)
    assert got[0] == expected[0], (raw, got, expected)
    assert _identical(got[1], expected[1]), (raw, got, expected)


@pytest.mark.parametrize("digits", [19, 20, 40, 60, 200, 4300])
def test_an_integer_of_any_length_up_to_the_limit_decodes_exactly(digits: int) -> None:
    for number in (int("9" * digits), -int("9" * digits), 10 ** (digits - 1)):
        assert _identical(decode(f'{{"n": [{number}]}}'.encode()), {"n": [number]})
    with pytest.raises(ProtocolError):
        decode(b"1" * 4301)


# -- the response envelope's byte template --------------------------------------------------------

_IDS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "é", 'a"b', "\\"]),
)
_RESULTS = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.text(max_size=8),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@settings(max_examples=300)
@given(request_id=_IDS, result=st.dictionaries(st.text(max_size=4), _RESULTS, max_size=3))
def test_a_result_encoded_once_in_the_template_is_the_whole_response_decoded(
    request_id: Any, result: dict[str, Any]
) -> None:
    """The template around a result's bytes says what `encode(result_response(...))` says,
    and byte for byte wherever orjson writes the whole response (the ASCII fallback escapes
    the whole of a response, the template only the part orjson cannot write)."""
    whole = encode(result_response(request_id, result))
    joined = encoded_result_response(request_id, encode(result))
    assert decode(joined) == decode(whole) == result_response(request_id, result)
    if orjson_writes(result_response(request_id, result)):
        assert joined == whole
    assert error_code(joined) is None


def orjson_writes(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


@pytest.mark.parametrize("request_id", [None, 1, "x", 2**70])
@pytest.mark.parametrize("code", [-32600, -32602, -32001, -32603])
def test_the_error_code_reads_back_from_an_error_response(request_id: Any, code: int) -> None:
    error = ProtocolError(code, "no", {"requested": "x"})
    assert error_code(encode(error_response(request_id, error))) == code


def test_a_result_holding_the_error_members_bytes_is_no_error() -> None:
    result = {"x": {"a": 1}, "error": {"code": -32600, "message": "a tool's output"}}
    response = encode(result_response(1, result))
    assert b',"error":{"code":' in response
    assert error_code(response) is None


@settings(max_examples=300)
@given(
    request_id=st.one_of(_IDS, st.sampled_from(["a,", ',"result":', '","result":{', "\\"])),
    code=st.sampled_from([-32600, -32602, -32001, -32603]),
    data=_RESULTS,
)
def test_an_error_response_is_told_from_a_result_whatever_its_id_and_data_hold(
    request_id: Any, code: int, data: Any
) -> None:
    """The member after the id decides: an id or error data holding a result member's bytes
    (`,"result":`) leaves an error response an error, and a result whose id holds them a
    result."""
    error = ProtocolError(code, "no", {"shown": data, "result": {"x": 1}})
    response = encode(error_response(request_id, error))
    assert b',"result":' in response
    assert error_code(response) == code
    result = encode(result_response(request_id, {"r": data, "error": {"code": 1}}))
    assert b',"error":{"code":' in result
    assert error_code(result) is None
