"""A partial JSON update (MySQL 8 ``binlog_row_value_options=PARTIAL_JSON`` with MINIMAL images: the
after image holds edits of a document the binlog does not carry) is refused by every sink with one
typed error naming table, column and position — before anything is created in the target."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.arrowlog.images import PARTIAL_JSON_KEY
from binlake.errors import UnappliableChangeError
from binlake.spark.changelog import PARTIAL_JSON_MARK, file_changes, rows_of, to_batches

PARTIAL = "blackbeam-rust_mysql_common/json.binlog.000001"  # MySQL 8.0.22: PARTIAL_UPDATE_ROWS at 3750


@pytest.fixture
def partial_source(corpus: Path, tmp_path: Path) -> str:
    src = tmp_path / "bin"
    src.mkdir()
    shutil.copy(corpus / PARTIAL, src)
    return str(src)


def test_only_partial_updates_carry_the_mark(corpus: Path) -> None:
    """The partial updates' JSON column holds an object (its edits) where a JSON column otherwise
    holds a string, so the substring the sinks look for in ``to_json(after)`` is in their images and
    in no other: a string value holding the same characters is written escaped."""
    rows = [r for b in to_batches(file_changes(corpus / PARTIAL)) for r in rows_of(b)]
    marked = [
        r["position"]
        for r in rows
        if any(isinstance(v, dict) and PARTIAL_JSON_KEY in v for v in (r["after"] or {}).values())
    ]
    assert marked == [3750] * 6
    compact = json.dumps(next(r["after"] for r in rows if r["position"] == 3750), separators=(",", ":"))
    assert PARTIAL_JSON_MARK in compact  # as Spark's to_json writes it
    assert PARTIAL_JSON_MARK not in json.dumps(
        {"c": PARTIAL_JSON_MARK}, ensure_ascii=False, separators=(",", ":")
    )


def _assert_names_the_change(e: UnappliableChangeError) -> None:
    # the binlog carries minimal metadata; the column's name comes from its CREATE TABLE earlier in it
    assert (e.table, e.column, e.source, e.offset) == ("mysql.t", "json_col", "json.binlog.000001", 3750)
    assert "\n" not in str(e) and "mysql.t" in str(e) and "offset 3750" in str(e)


@pytest.mark.slow
@pytest.mark.parametrize("changes", ["last", "every"])
def test_delta_refuses_before_creating_anything(
    spark: Any, partial_source: str, tmp_path: Path, changes: str
) -> None:
    """Found by the batch's head from the read's ``json_edits`` (a sync's read, the last changes per
    key), or by a job of its own over the JSON columns of a read that does not say (every change)."""
    from binlake.spark.apply import sync

    target = tmp_path / "lake"
    with pytest.raises(UnappliableChangeError) as e:
        sync(spark, partial_source, target, options={"changes": changes})
    _assert_names_the_change(e.value)
    assert not target.exists()  # no table directory, no name book


@pytest.mark.slow
def test_jdbc_refuses_before_connecting(spark: Any, partial_source: str) -> None:
    """Refused before the target is even reached: port 1 has no server, so an attempt to connect
    would fail with a connection error instead."""
    from binlake.spark.apply import sync

    with pytest.raises(UnappliableChangeError) as e:
        sync(spark, partial_source, "jdbc:postgresql://127.0.0.1:1/nowhere?user=x")
    _assert_names_the_change(e.value)
