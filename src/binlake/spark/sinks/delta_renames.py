"""Renames followed in Delta targets (see ``binlake.spark.renames`` for the plan): a table moves as
its directory, a table's column renames are one rewrite; a journal beside the tables makes it once."""

from __future__ import annotations

import json
import os
from pathlib import Path

from binlake.schema.renames import ColumnRename, TableName, TableRename
from binlake.spark.renames import Journal, RenamePlan, rename_work
from binlake.targetnames import NAME_BOOK, NameBook, inside, path_name, replaced_name

RENAME_JOURNAL = "_binlake_renames.json"


def rename_delta_targets(target: Path, plan: RenamePlan, version: int, upto: bytes) -> list[str]:
    """Rename the Delta tables and columns as the batch ``version`` (ending at order key ``upto``)
    renamed them upstream, once: a journal beside the tables says how far the targets follow and
    how far a killed run got. A table moves as its directory; a table's column renames are one
    rewrite (tagged, so a rerun sees it done)."""
    path = target / RENAME_JOURNAL
    phases, renamed = rename_work(_load_journal(path), plan, version, upto)
    for journal, steps in phases:  # an unfinished journal's steps first, then this batch's
        i = journal.done
        while i < len(steps):
            step = steps[i]
            j = i + 1
            if isinstance(step, TableRename):
                _move_table(target, step, journal.version)
            else:
                moves = [step]
                while (
                    j < len(steps) and isinstance(nxt := steps[j], ColumnRename) and nxt.table == step.table
                ):
                    moves.append(nxt)
                    j += 1
                _rename_columns(_dir(target, step.table), moves, f"{journal.version}:{i}")
            i = journal.done = j
            _save_journal(path, journal)
        if plan.keys and journal.version == version and journal.done == 0:
            _save_journal(path, journal)  # nothing to rename in the targets, but they follow up to here
    return renamed


def _load_journal(path: Path) -> Journal | None:
    """The journal (order keys as hex: ``OrderKey.encode()`` bytes)."""
    if not path.exists():
        return None
    j = json.loads(path.read_text())
    return Journal(j["version"], bytes.fromhex(j["base"]), bytes.fromhex(j["upto"]), j["done"])


def _save_journal(path: Path, journal: Journal) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    j = {
        "version": journal.version,
        "base": journal.base.hex(),
        "upto": journal.upto.hex(),
        "done": journal.done,
    }
    tmp.write_text(json.dumps(j))
    os.replace(tmp, path)


def _dir(target: Path, table: TableName) -> Path:
    return inside(target, path_name(*table))


def _move_table(target: Path, step: TableRename, version: int) -> None:
    src, dst = _dir(target, step.old), _dir(target, step.new)
    if not src.exists():
        return  # never synced, or moved before a kill
    book = NameBook.open(target / NAME_BOOK)
    if dst.exists():  # a table of that name dropped upstream: kept aside, never lost
        aside = (step.new[0], replaced_name(step.new[1], version))
        book.move(dst.name, _dir(target, aside).name, *aside)
        os.rename(dst, _dir(target, aside))
    book.move(src.name, dst.name, *step.new)  # recorded first: a kill between finds both names known
    os.rename(src, dst)


def _rename_columns(path: Path, moves: list[ColumnRename], tag: str) -> None:
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    if not (path / "_delta_log").exists():
        return
    table = DeltaTable(str(path))
    if table.history(1)[0].get("binlake.renamed") == tag:
        return  # done before a kill
    data = table.to_pyarrow_table()
    names = list(data.column_names)
    for m in moves:
        if m.old in names:
            if m.new in names:  # a column of that name dropped upstream: kept aside
                names[names.index(m.new)] = replaced_name(m.new, tag.replace(":", "_"))
            names[names.index(m.old)] = m.new
    write_deltalake(
        str(path),
        data.rename_columns(names),
        mode="overwrite",
        schema_mode="overwrite",
        commit_properties=CommitProperties(custom_metadata={"binlake.renamed": tag}),
    )
