"""The compiled binary JSON reader (``binlake.values._fastjson``) gives exactly what the reference
(``json_binary.decode_json_column``) gives: random documents, the same documents with bytes changed
or cut (the same value or both a ``JsonError``), overlapping and deeply nested containers. The JSON
columns of the corpus and of generated series are compared through the rows in test_fastrows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.values import json_binary
from binlake.values.json_binary import encode_json_binary
from tests.values.test_plan import exact

fast = pytest.importorskip(
    "binlake.values._fastjson",
    reason="the compiled JSON reader is not built (no C compiler or Cython at install: pure path only)",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=200),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**20), max_value=10**20),
    st.dates(),
    st.datetimes(),
    st.timedeltas(min_value=dt.timedelta(hours=-838), max_value=dt.timedelta(hours=838)),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=30,
)


def outcome(decode: Any, data: bytes) -> Any:
    """The value (exactly), or the error's type (JsonError; an opaque DECIMAL's own ValueError)."""
    try:
        v = decode(data)
    except ValueError as e:
        return ("error", type(e).__name__)
    return (exact(v), v.empty, v.plain)


def same(data: bytes) -> None:
    assert outcome(fast.decode_json_column, data) == outcome(json_binary.decode_json_column, data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents)
def test_documents_decode_the_same(doc: Any) -> None:
    data = encode_json_binary(doc)
    same(data)
    assert outcome(fast.decode_json_column, data)[0] != "error"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, at=st.integers(0, 10_000), byte=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_damaged_documents_fail_or_decode_the_same(doc: Any, at: int, byte: int, cut: int) -> None:
    data = bytearray(encode_json_binary(doc))
    data[at % len(data)] = byte
    same(bytes(data))
    same(bytes(data[: cut % (len(data) + 1)]))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_random_bytes_fail_or_decode_the_same(data: bytes) -> None:
    same(data)


def _nested(depth: int, fanout: int = 1) -> bytes:
    """``depth`` small arrays nested, each of ``fanout`` entries all pointing at the same child
    (fanout 2: a few hundred bytes decoding to 2^depth values, which the budget refuses)."""
    inner = b"\x00\x00\x04\x00"  # the innermost: an empty small array (count 0, size 4)
    for _ in range(depth):
        head = 4 + 3 * fanout
        entries = (b"\x02" + head.to_bytes(2, "little")) * fanout
        inner = fanout.to_bytes(2, "little") + (head + len(inner)).to_bytes(2, "little") + entries + inner
    return b"\x02" + inner


@pytest.mark.parametrize("depth", [1, 10, 149, 150, 151, 400])
@pytest.mark.parametrize("fanout", [1, 2])
def test_deep_and_overlapping_documents_fail_the_same(depth: int, fanout: int) -> None:
    same(_nested(depth, fanout))


@pytest.mark.parametrize(
    "data",
    [
        b"\x0c\xff\xff\xff\xff\x7f",  # a string length of 5 bytes, far past the document
        b"\x0c\x80\x80\x80\x80\x80",  # a length of more than 5 bytes
        b"\x00\xff\xff\xff\xff",  # a small object of 65535 keys in 4 bytes
        b"\x01" + b"\xff" * 8,  # a large object of 2^32-1 keys
        b"\x0f\xf6\x03\x05\x02\x12\x34",  # an opaque DECIMAL
        b"\x0b\x00\x00",  # a DOUBLE cut short
        b"",
    ],
)
def test_hostile_documents_fail_the_same(data: bytes) -> None:
    same(data)
