"""``Json.text`` (the C encoder's path for plain documents) equals ``to_mysql_text``, the reference,
on every kind of value binary JSON holds: random documents through the binary encoder and back."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from typing import Any

import pytest

from binlake.values.json_binary import (
    Json,
    JsonUInt,
    decode_json_column,
    encode_json_binary,
    to_mysql_text,
)

SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    JsonUInt(2**64 - 1),
    JsonUInt(7),
    0.5,
    -0.0,
    1e16,
    1.5e300,
    2.5e-7,
    123456.789,
    "",
    "plain",
    'quote " backslash \\ slash /',
    "ctl \x00\x01\x1f\x7f tab\t nl\n",
    "é ü 漢字 😀",
    "e+ in a string",
    "\u2028\u2029",
]
OPAQUE: list[Any] = [
    Decimal("12.50"),
    dt.date(2024, 2, 29),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    dt.timedelta(hours=-5),
]


def _doc(rng: random.Random, depth: int, scalars: list[Any]) -> Any:
    roll = rng.random()
    if depth < 4 and roll < 0.25:
        return {f"k{rng.randrange(50)}é": _doc(rng, depth + 1, scalars) for _ in range(rng.randrange(6))}
    if depth < 4 and roll < 0.45:
        return [_doc(rng, depth + 1, scalars) for _ in range(rng.randrange(6))]
    if roll < 0.6:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randrange(-30, 30)
    return rng.choice(scalars)


@pytest.mark.parametrize("seed", range(20))
def test_text_equals_reference_on_random_documents(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        with_opaque = rng.random() < 0.2
        doc = _doc(rng, 0, SCALARS + (OPAQUE if with_opaque else []))
        value = decode_json_column(encode_json_binary(doc))
        assert value.text() == to_mysql_text(value.value) == str(value)


def test_plain_only_without_opaque_values() -> None:
    assert decode_json_column(encode_json_binary({"a": [1, "x", 2.5, None]})).plain
    assert not decode_json_column(encode_json_binary({"a": [Decimal("1.5")]})).plain
    assert not decode_json_column(encode_json_binary(dt.date(2020, 1, 1))).plain
    empty = decode_json_column(b"")
    assert empty == Json(None, empty=True) and empty.text() == "null"


def test_exponents_and_non_finite_take_the_reference() -> None:
    for v in (1e20, [1.0, 1e100], {"x": -1e16}, math.nan, [math.inf, -math.inf]):
        assert Json(v, plain=True).text() == to_mysql_text(v)
    assert Json(1e20, plain=True).text() == "1e20"
