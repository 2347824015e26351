"""Target names from untrusted source names: injective, reversible, never outside the target."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from binlake.dialects import delta, mysql, postgres
from binlake.targetnames import (
    NameBook,
    NameCollisionError,
    dropped_name,
    escape_reserved,
    fit,
    inside,
    path_name,
    renaming_name,
    replaced_name,
    source_of,
    unescape_reserved,
    utf8_len,
)

# MySQL names: up to 64 characters of the BMP (NUL excluded), anything else allowed
names = st.text(st.characters(max_codepoint=0xFFFF, blacklist_characters="\0"), min_size=1, max_size=64)
any_text = st.text(min_size=1, max_size=80)  # astral characters and NUL too


@given(names, names, names, names)
def test_path_names_are_injective(db1: str, t1: str, db2: str, t2: str) -> None:
    if (db1, t1) != (db2, t2):
        assert path_name(db1, t1) != path_name(db2, t2)


@given(any_text, any_text)
def test_path_names_stay_inside_and_read_back(db: str, table: str) -> None:
    name = path_name(db, table)
    assert utf8_len(name) <= 200
    assert "/" not in name and "\\" not in name and "\0" not in name and ".." not in name
    assert not name.startswith(".") and " " not in name
    assert inside(Path("/target"), name).parent == Path("/target")
    if "~" not in name:  # not shortened: the name alone gives the source table back
        assert source_of(name) == (db, table)


def test_known_escapes_and_the_examples_of_the_issue() -> None:
    assert path_name("shop", "orders") == "shop.orders"  # plain names read as before
    assert path_name("a.b", "c") == "a@002eb.c" != path_name("a", "b.c") == "a.b@002ec"
    assert path_name("../../y", "x") == "@002e@002e@002f@002e@002e@002fy.x"
    assert source_of("a@002eb.c") == ("a.b", "c")
    assert source_of("a.b.c") is None and source_of("x@002Z.y") is None  # not ours: no guess
    assert path_name("a", "b@002ec") != path_name("a", "b.c")  # an '@' is escaped itself


@given(names, names)
def test_reserved_prefix_keeps_source_names_apart_from_binlakes(a: str, b: str) -> None:
    assert (escape_reserved(a) == escape_reserved(b)) == (a == b)
    assert unescape_reserved(escape_reserved(a)) == a
    system = {"_binlake_order_key", "_binlake_deleted", "_binlake_gtid", "_binlake_commit_ts", "_binlake_op"}
    derived = {renaming_name(0), dropped_name(b, 1, 4), replaced_name(b, 7)}
    assert escape_reserved(a) not in system | derived


def test_fit_is_stable_and_distinct() -> None:
    a, b = "t" * 63 + "1", "t" * 63 + "2"
    assert postgres.ident(a) != postgres.ident(b)  # PostgreSQL would cut both to 63 bytes
    assert utf8_len(postgres.ident("é" * 64)) <= 63
    assert postgres.ident(a) == postgres.ident(a) and postgres.ident("short") == "short"
    assert len(mysql.ident("x" * 70)) == 64 and mysql.ident("x" * 64) == "x" * 64
    assert fit("abc", 3) == "abc"


def test_quoting_per_dialect() -> None:
    hostile = "k` = s.`k` OR TRUE --"
    assert mysql.quote_ident(hostile) == "`k`` = s.``k`` OR TRUE --`"
    assert delta.keys_equal([hostile]) == "t.`k`` = s.``k`` OR TRUE --` = s.`k`` = s.``k`` OR TRUE --`"
    assert postgres.quote_ident('a"b') == '"a""b"'
    assert mysql.quote_str("a\\'b") == "'a\\\\\\'b'"
    assert postgres.schema_name("pg_catalog") == "_binlake_pg_catalog"
    assert postgres.schema_name("_binlake_pg_catalog") == "_binlake__binlake_pg_catalog"
    assert postgres.schema_name("shop") == "shop"


def test_name_book_refuses_a_second_source(tmp_path: Path) -> None:
    book = NameBook.open(tmp_path / "names.json")
    book.claim("x~0123", "db", "a")
    book.claim("x~0123", "db", "a")  # the same source again: fine
    with pytest.raises(NameCollisionError):
        NameBook.open(tmp_path / "names.json").claim("x~0123", "db", "b")
    assert NameBook.open(tmp_path / "names.json").source("x~0123") == ("db", "a")
    with pytest.raises(NameCollisionError):
        inside(tmp_path, "../x")


@given(st.text(alphabet=st.sampled_from(["a", "\\", "'", "\0", "\n", "\r", "\x1a", "\udcff", "é", '"', "`"])))
def test_mysql_string_literals_escape_exactly_their_six_characters(text: str) -> None:
    """``quote_str`` (a translate table) escapes as its table says, every other character as it is."""
    escapes = {"\\": "\\\\", "'": "\\'", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}
    assert mysql.quote_str(text) == "'" + "".join(escapes.get(ch, ch) for ch in text) + "'"
