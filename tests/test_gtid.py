"""GTID set algebra against a brute-force model (sets of (uuid, tag, n))."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.gtid import GtidAccumulator, GtidSet, GtidSetError, MariaGtidPos

UUIDS = ["3e11fa47-71ca-11e1-9e33-c80aa9429562", "93e95066-a2f4-11ec-9b69-9657f0ae95e2"]
TAGS = ["", "mytag"]

gtids = st.sets(st.tuples(st.sampled_from(UUIDS), st.sampled_from(TAGS), st.integers(1, 40)), max_size=40)


def build(model: set[tuple[str, str, int]]) -> GtidSet:
    d: dict = {}
    for sid, tag, n in model:
        d.setdefault((sid, tag), []).append((n, n))
    return GtidSet.from_dict(d)


@settings(max_examples=300)
@given(a=gtids, b=gtids)
def test_algebra_matches_sets(a: set, b: set) -> None:
    x, y = build(a), build(b)
    assert set(x | y) == a | b
    assert set(x & y) == a & b
    assert set(x - y) == a - b
    assert x.issubset(y) == (a <= b)
    assert len(x) == len(a)
    assert GtidSet.parse(str(x)) == x  # printing and parsing round-trips
    acc = GtidAccumulator()
    for sid, tag, n in sorted(a, key=lambda t: t[2]):
        acc.add(sid, n, tag)
    assert acc.freeze() == x


def test_parse_and_print_mysql_forms() -> None:
    s = GtidSet.parse(
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7:6,\n 93e95066-a2f4-11ec-9b69-9657f0ae95e2:mytag:1-3"
    )
    assert (
        str(s) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7,\n93e95066-a2f4-11ec-9b69-9657f0ae95e2:mytag:1-3"
    )
    assert (
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:4" in s and "93e95066-a2f4-11ec-9b69-9657f0ae95e2:mytag:2" in s
    )
    assert "93e95066-a2f4-11ec-9b69-9657f0ae95e2:2" not in s
    mixed = GtidSet.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2:mytag:5")
    assert len(mixed) == 3 and str(mixed) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2:mytag:5"
    assert not GtidSet.parse("") and len(GtidSet.parse("")) == 0
    for bad in (
        "nonsense:1",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:0",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:5-3",
    ):
        with pytest.raises(GtidSetError):
            GtidSet.parse(bad)


def test_mariadb_positions() -> None:
    p = MariaGtidPos.parse("0-1-100,1-2-7")
    assert (
        str(p) == "0-1-100,1-2-7" and p.contains(0, 100) and not p.contains(0, 101) and not p.contains(5, 1)
    )
    assert str(p.advance(0, 3, 101)) == "0-3-101,1-2-7"
    assert str(p.union(MariaGtidPos.parse("1-2-9,2-1-1"))) == "0-1-100,1-2-9,2-1-1"
    with pytest.raises(GtidSetError):
        MariaGtidPos.parse("0-1-1,0-2-2")


def test_mariadb_gtid_sets_parse_and_print() -> None:
    from binlake.gtid import AnyGtidSet, MariaGtidSet

    s = MariaGtidSet.parse("0-1-5, 0-1-6-9,1-2-3,0-1-20-20")
    assert str(s) == "0-1-5-9,0-1-20,1-2-3"
    assert s.contains(0, 1, 7) and not s.contains(0, 2, 7) and not s.contains(0, 1, 10)
    both = AnyGtidSet.parse("0-1-595,3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3")
    assert both.contains_gtid("0-1-595") and both.contains_gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562:2")
    assert not both.contains_gtid("0-1-594") and not both.contains_gtid(
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:4"
    )
    assert AnyGtidSet.parse(str(both)) == both
    for bad in ("0-1", "0-1-2-3-4", "0-1-x", "0-1-9-3", "", "0--1-2"):
        with pytest.raises(GtidSetError):
            AnyGtidSet.parse(bad)


def test_a_server_uuid_alone_is_told_what_it_lacks() -> None:
    """A UUID without ':' was read as a MariaDB item and refused as 'not a MariaDB GTID' only,
    which sends a MySQL user the wrong way."""
    from binlake.gtid import AnyGtidSet, parse_executed

    uuid = "10440e47-3885-11eb-ac5b-0242ac110002"
    for parse in (parse_executed, AnyGtidSet.parse):
        with pytest.raises(GtidSetError, match=f"needs its transactions, as in {uuid}:1-100"):
            parse(uuid)
    with pytest.raises(GtidSetError) as e:
        parse_executed("nonsense")
    assert "UUID" not in str(e.value)
    # text that is neither flavour is told both forms (newcomer 55: told only MariaDB's, a MySQL
    # user was sent the wrong way); MariaDB's form gone wrong keeps its own message
    assert "neither a MySQL GTID set (uuid:1-5) nor a MariaDB GTID position (0-1-595)" in str(e.value)
    with pytest.raises(GtidSetError, match=r"^'0-1' is not a MariaDB GTID"):
        parse_executed("0-1")
