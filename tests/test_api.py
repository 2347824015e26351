"""The public Python API (``import binlake``): what it imports, transactions and position search
over any source, checked against the generator's truth, and the README's example run as written."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import binlake
from binlake.generate import generate

README = Path(__file__).resolve().parents[1] / "README.md"
# What ``import binlake`` must not load: Spark and its JVM bridge, Arrow and the sinks, sockets and
# TLS, the MySQL client library, and binlake's own layers that use them (and the CLI).
HEAVY_ROOTS = {"pyspark", "py4j", "pyarrow", "deltalake", "socket", "_socket", "ssl", "_ssl", "pymysql"}
HEAVY_OURS = ("binlake.spark", "binlake.replication.client", "binlake.cli", "binlake.globalbinlog")


def modules_after(code: str) -> set[str]:
    """The modules loaded in a fresh interpreter after running ``code``."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY_ROOTS or m.startswith(HEAVY_OURS)}


def test_import_binlake_imports_no_spark_and_no_sockets() -> None:
    loaded = modules_after("import binlake")
    assert "binlake.api" in loaded
    assert heavy(loaded) == set()


def test_the_replica_client_is_imported_on_first_use() -> None:
    loaded = modules_after(
        "import binlake\nassert binlake.ReplicaClient.__module__ == 'binlake.replication.client'"
    )
    assert {"binlake.replication.client", "ssl"} <= loaded
    assert not {m for m in loaded if m.split(".")[0] in ("pyspark", "py4j", "deltalake")}


def test_every_public_name_resolves() -> None:
    missing = [name for name in binlake.__all__ if getattr(binlake, name, None) is None]
    assert missing == []
    assert set(binlake.__all__) <= set(dir(binlake))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        binlake.nope  # noqa: B018


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A MySQL 8 series of several files (exact commit timestamps) and every committed transaction."""
    result = generate(
        tmp_path_factory.mktemp("api") / "bin", seed=2, target_bytes=400_000, max_file_size=100_000
    )
    truth = [json.loads(line) for line in (result.truth_dir / "transactions.jsonl").read_text().splitlines()]
    return result, truth


def summary(transactions: Any) -> list[dict[str, Any]]:
    """Transactions as the generator's truth records them."""
    return [
        {
            "gtid": t.gtid,
            "commit_us": t.commit_time_us,
            "kind": t.kind,
            "rows": t.rows,
            "file": t.source,
            "offset": t.start,
        }
        for t in transactions
    ]


def test_transactions_of_every_kind_of_source_match_the_truth(series: Any) -> None:
    result, truth = series
    assert len(result.files) > 2
    directory = result.files[0].parent
    assert summary(binlake.transactions(directory)) == truth
    assert summary(binlake.transactions(str(directory / "binlog.index"))) == truth
    assert summary(binlake.transactions(result.files)) == truth
    assert summary(binlake.transactions(binlake.BinlogSeries.open(*result.files))) == truth
    one_file = summary(binlake.transactions(result.files[1]))
    assert one_file == [t for t in truth if t["file"] == str(result.files[1])]


def test_transactions_keep_their_events_when_asked(series: Any) -> None:
    result, _ = series
    first = next(t for t in binlake.transactions(result.files[0]) if t.rows)
    assert first.events and first.events[0].offset == first.start
    bare = next(t for t in binlake.transactions(result.files[0], keep_events=False) if t.rows)
    assert bare.events == [] and bare.gtid == first.gtid


def test_position_search_by_gtids_and_by_time(series: Any) -> None:
    result, truth = series
    directory = result.files[0].parent
    uuid = truth[0]["gtid"].split(":")[0]
    k = 150
    want = truth[k]  # the truth holds committed transactions only: the first not executed
    executed = {int(t["gtid"].split(":")[1]) for t in truth[:k]}
    text = f"{uuid}:1-{max(executed)}"
    for gtids in (text, binlake.GtidSet.parse(text)):
        found = binlake.find_position(directory, gtids=gtids)
        assert (found.position.file, found.position.offset) == (want["file"], want["offset"])
        assert found.transaction is not None and found.transaction.gtid == want["gtid"]
    after = list(binlake.transactions(directory, start=found.position))
    assert summary(after) == truth[k:]

    when = dt.datetime.fromtimestamp(want["commit_us"] / 1e6, dt.UTC)
    for at in (when, when.replace(tzinfo=None), when.strftime("%Y-%m-%d %H:%M:%S.%f")):
        found = binlake.find_position(directory, at)
        assert found.transaction is not None and found.transaction.gtid == want["gtid"]
    with pytest.raises(ValueError, match="one of them"):
        binlake.find_position(directory)
    # a date that does not exist: the error names the text and why
    with pytest.raises(ValueError, match=r"'2023-02-30 10:00:00' is not a date/time .*day is out of range"):
        binlake.find_position(directory, "2023-02-30 10:00:00")


def test_a_missing_file_or_a_directory_is_a_binlog_error(tmp_path: Path) -> None:
    with pytest.raises(binlake.SeriesError) as e:
        list(binlake.transactions([tmp_path / "binlog.000001"]))
    assert isinstance(e.value, binlake.BinlogError)
    # one file's events: a missing file and a directory are the same kind of error, named
    with pytest.raises(binlake.SeriesError, match=r"binlog\.000001: no such binlog file"):
        list(binlake.read_events(tmp_path / "binlog.000001"))
    with pytest.raises(binlake.SeriesError, match=r"a directory, not a binlog file .*transactions"):
        binlake.read_events(tmp_path)


def test_the_readme_example_runs(tmp_path: Path) -> None:
    section = README.read_text().split("## Python API", 1)[1].split("\n## ", 1)[0]
    shell = re.search(r"```bash\n(.*?)```", section, re.S)
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert shell and code
    argv = shell.group(1).split()
    assert argv[:2] == ["binlake", "generate"]
    subprocess.run(
        [sys.executable, "-m", "binlake", *argv[1:]], cwd=tmp_path, check=True, capture_output=True
    )
    out = subprocess.run(
        [sys.executable, "-c", code.group(1)], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    rows = int(lines[0].rsplit(" ", 2)[1])  # the first transaction's rows, then one line per change
    assert rows > 0 and len(lines) == 3 + rows, out
    assert all(line.split()[0] in ("insert", "update", "delete") for line in lines[1 : 1 + rows]), out
    assert "executed before:" in lines[1 + rows], out


def test_row_changes_of_the_public_api(series: Any) -> None:
    """``binlake.row_changes``: one typed change per row of every rows event, in order-key order."""
    from binlake.events.rows import Rows

    result, _ = series
    txns = list(binlake.transactions(result.files[0]))
    changes = [c for t in txns for c in binlake.row_changes(t)]
    rows = sum(len(e.body.rows) for t in txns for e in t.events if isinstance(e.body, Rows))
    assert rows > 0 and len([c for c in changes if c.op in ("insert", "update", "delete")]) == rows
    keys = [c.order_key.encode() for c in changes]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert isinstance(changes[0], binlake.RowChange) and changes[0].op is binlake.Op(changes[0].op)


def test_row_changes_of_a_transaction_read_without_its_events_is_refused(series: Any) -> None:
    """Newcomer: the README's example reads ``rest`` with ``keep_events=False``; handing one of those
    transactions to ``binlake.row_changes`` yielded no change at all, silently, though its ``rows``
    says it changed rows. It should say why (the events were not kept) instead of an empty answer."""
    result, _ = series
    bare = next(t for t in binlake.transactions(result.files[0], keep_events=False) if t.rows)
    assert bare.rows > 0 and bare.events == []
    with pytest.raises(ValueError, match="keep_events"):
        list(binlake.row_changes(bare))


def test_arguments_of_the_wrong_kind_are_named(series: Any) -> None:
    """Newcomer 55: ``row_changes("dir")``, ``find_position(src, 12345)`` and ``transactions(src,
    start=99999)`` failed with AttributeErrors from inside; each now says what it takes."""
    result, _ = series
    with pytest.raises(TypeError, match="row_changes takes a Transaction .*not str"):
        list(binlake.row_changes("series"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="when: a datetime or its text .*not int"):
        binlake.find_position(result.files[0], 12345)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"start: a Position \(find_position"):
        binlake.transactions(result.files[0], start=99999)  # type: ignore[arg-type]
