"""The DDL pass reads only what can change a schema: it drops each BEGIN and every TABLE_MAP it has
met since the last DDL before decoding them (``reader.KnownEvents``, in C ``_fastenv.hop``). That must change nothing: at every
transaction boundary of real files and of a generated series with DDL, the history it hands out and
the warnings it gives equal those of a pass that decodes every QUERY and TABLE_MAP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake import native
from binlake.position import transaction_ends
from binlake.schema.ddlpass import DdlPass
from tests.conftest import corpus_index


class Unfiltered(DdlPass):
    drop_known = False


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def compiled(request: pytest.FixtureRequest) -> Any:
    """The BEGINs and known maps hopped over in C, or dropped by ``KnownEvents`` in Python."""
    native.use_compiled(request.param)
    yield request.param
    native.use_compiled(not native.PURE_FORCED)


def histories(cls: type[DdlPass], files: list[str]) -> tuple[list[Any], list[str]]:
    warned: list[str] = []
    ddl = cls(warn=warned.append)
    out = []
    for f in files:
        for end in [4, *transaction_ends(f)]:
            out.append(ddl.at(files, f, end).to_json())
    return out, warned


WITH_DDL = [
    r
    for r in corpus_index()["records"]
    if r.get("events") and not r.get("problems") and not r.get("crc_bad_events") and r.get("first_event_type") == 15
    and r["hist"].get("2:QUERY", 0) > 2 and r["hist"].get("19:TABLE_MAP", 0) and r["size"] < 400_000
]  # fmt: skip


@pytest.mark.parametrize("record", WITH_DDL, ids=lambda r: r["path"])
def test_corpus_files(corpus: Path, record: dict[str, Any], compiled: bool) -> None:
    files = [str(corpus / record["path"])]
    assert histories(DdlPass, files) == histories(Unfiltered, files)


def test_a_generated_series_with_ddl_and_table_maps_named_by_it(tmp_path: Path, compiled: bool) -> None:
    """MySQL 5.7's table maps carry no names (they come from the DDL); the generator adds, drops
    and renames columns and renames tables between transactions that map the same tables again
    and again."""
    from binlake.generate import generate

    out = tmp_path / "series"
    generate(out, flavor="mysql57", target_bytes=1_500_000, max_file_size=600_000, seed=7, ddl_every=40)
    files = sorted(str(p) for p in out.glob("binlog.0*"))
    got, want = histories(DdlPass, files), histories(Unfiltered, files)
    assert len(files) > 1 and len({repr(h) for h in got[0]}) > 10  # the schema changed along the way
    assert got == want
