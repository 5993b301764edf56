"""JSON framing: `decode` keeps integers exact at any size, `encode` writes them back exactly.

orjson reads an integer outside [-2**63, 2**64) as a float; an `id` of 2**70 used to come back
as `-32600` with `id: null`. Each case goes through the bytes a transport receives.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from helpers import build_lab, request

from labkit.server import RequestContext
from labkit.transports.stdio import StdioTransport
from labkit.wire import decode, encode

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
