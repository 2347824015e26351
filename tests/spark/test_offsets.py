"""`sync` with dump's selection options, and `offsets show|reset` on a Delta target."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from binlake.cli import main
from binlake.generate import generate
from binlake.series import BinlogSeries
from binlake.spark.sinks.delta import delta_tables
from binlake.txn import iter_transactions
from tests.spark.test_sync import synced, write_keyless_log

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generate(
        tmp_path_factory.mktemp("sel") / "bin", seed=5, target_bytes=50_000, max_file_size=20_000, ddl_every=0
    )


def sync(source: Path, target: Path, *options: str) -> None:
    assert main(["sync", str(source), "--to", f"delta:{target}", "--master", "local[2]", *options]) == 0


def prefix_copy(files: list[Path], out: Path) -> str:
    """The series cut before a transaction in the middle of its second file (bytes, not selections):
    returns that transaction's commit time."""
    txns = list(iter_transactions(BinlogSeries.open(*files).events()))
    times = [t.commit_time_us for t in txns]
    assert times == sorted(times)
    cut = next(
        t for i, t in enumerate(txns) if t.file_seq == 1 and i > 0 and times[i] > times[i - 1] and t.rows
    )
    out.mkdir()
    for f in files[: cut.file_seq]:
        shutil.copy(f, out / f.name)
    (out / files[cut.file_seq].name).write_bytes(files[cut.file_seq].read_bytes()[: cut.start])
    return dt.datetime.fromtimestamp(cut.commit_time_us / 1e6, dt.UTC).isoformat()


def test_sync_with_a_selection_equals_syncing_the_selected_part(
    spark: Any, series: Any, tmp_path: Path
) -> None:
    source = series.files[0].parent
    stop = prefix_copy(series.files, tmp_path / "prefix")
    sync(source, tmp_path / "selected", "--table", "shop.orders", "--stop-datetime", stop)
    sync(tmp_path / "prefix", tmp_path / "whole")
    whole = synced(tmp_path / "whole")
    assert delta_tables(tmp_path / "selected") == ["shop.orders"]
    assert synced(tmp_path / "selected") == {"shop.orders": whole["shop.orders"]}
    assert whole["shop.orders"] and len(delta_tables(tmp_path / "whole")) > 1


def offsets(capsys: Any, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["offsets", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_offsets_show_and_reset_round_trip(spark: Any, series: Any, tmp_path: Path, capsys: Any) -> None:
    from binlake.spark.offsets import delta_offsets

    keyed, keyless, target = str(series.files[0].parent), tmp_path / "keyless", tmp_path / "t"
    write_keyless_log(keyless)
    sync(Path(keyed), target)
    sync(keyless, target)
    before = synced(target)
    recorded = {o.table: o for o in delta_offsets(target)}
    assert {o.source for o in recorded.values()} == {keyed, str(keyless)}
    assert all(o.version and o.position for o in recorded.values())
    code, out, _ = offsets(capsys, "show", "--to", f"delta:{target}")
    assert code == 0 and recorded["d.log"].position in out and "change table, 3 rows" in out
    said = " ".join(out.split())
    assert "where the next batch sync resumes" in said and said.count("(all)") == 2

    # the keyed source alone: its tables forget, the change table keeps its position
    code, out, _ = offsets(capsys, "reset", "--to", f"delta:{target}", "--source", keyed)
    assert code == 0 and "shop.orders" in out and "d.log" not in out
    now = {o.table: o for o in delta_offsets(target)}
    assert now["d.log"].version == recorded["d.log"].version
    assert not any(o.version for name, o in now.items() if name != "d.log")
    assert synced(target) == before  # a reset changes no data
    sync(Path(keyed), target)  # re-applied (not skipped), to the same tables
    assert synced(target) == before
    assert {o.table: o.version for o in delta_offsets(target)} == {n: o.version for n, o in recorded.items()}

    # a change table holding rows: refused, nothing forgotten
    code, _, err = offsets(capsys, "reset", "--to", f"delta:{target}")
    assert code == 2 and "--empty-change-tables" in err and "d.log" in err
    assert all(o.version for o in delta_offsets(target))
    # emptied with its guard, it is refilled exactly: not doubled, not left empty
    code, out, _ = offsets(capsys, "reset", "--to", f"delta:{target}", "--empty-change-tables")
    assert code == 0 and "(emptied)" in out
    assert synced(target)["d.log"] == [] and not any(o.version for o in delta_offsets(target))
    sync(keyless, target)
    assert synced(target)["d.log"] == before["d.log"]


def test_offsets_on_postgres(spark: Any, series: Any, postgres: Any, tmp_path: Path, capsys: Any) -> None:
    """One position per source in _binlake_positions: shown, refused while a change table holds
    rows, then forgotten with the change table emptied; the next syncs apply again and refill it."""
    postgres.psql(
        "DROP SCHEMA IF EXISTS shop CASCADE; DROP SCHEMA IF EXISTS d CASCADE; DROP TABLE IF EXISTS _binlake_positions"
    )
    keyed, keyless = series.files[0].parent, tmp_path / "keyless"
    write_keyless_log(keyless)
    for source in (keyed, keyless):
        assert main(["sync", str(source), "--to", postgres.url, "--master", "local[2]"]) == 0
    code, out, _ = offsets(capsys, "show", "--to", postgres.url, "--master", "local[2]")
    assert code == 0 and str(keyless) in out and str(keyed) in out
    assert "where the next batch sync resumes" in " ".join(out.split())
    code, _, err = offsets(capsys, "reset", "--to", postgres.url, "--master", "local[2]")
    assert code == 2 and "--empty-change-tables" in err
    code, out, _ = offsets(
        capsys, "reset", "--to", postgres.url, "--master", "local[2]", "--empty-change-tables"
    )
    assert code == 0 and str(keyless) in out
    assert postgres.psql('SELECT count(*) FROM "d"."log"').strip() == "0"
    code, out, _ = offsets(capsys, "show", "--to", postgres.url, "--master", "local[2]")
    assert "no positions recorded" in out and "resumes" not in out  # the records forgotten too
    assert main(["sync", str(keyless), "--to", postgres.url, "--master", "local[2]"]) == 0
    assert postgres.psql('SELECT count(*) FROM "d"."log"').strip() == "3"
