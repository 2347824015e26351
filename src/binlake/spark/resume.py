"""Where a batch ``sync`` resumes: the last transaction of its last batch, per source and read.

After its sink applied a batch, a batch sync records that batch's last transaction (file and offset)
in the target (Delta and Parquet: under ``_binlake_resume`` beside the tables; JDBC: in table
``_binlake_resume``), one record per source and read. The next batch sync of the same source with
the same read (the selection, the schema seed: whatever decides which changes a batch holds) reads
from that transaction on (option ``startPosition``) instead of the whole series: run again with
nothing new, it reads one transaction.

That transaction is read again: its changes are at the target's position already and change nothing
(the order-key guard), so a record that lags behind the target (a crash after the sink's commits,
before the record) costs a longer read, never a lost change. A record is used only while the target
still holds what it says (``Records.holds``): every table it lists there, at or past the version it
had then; and only while the source still holds the record's file as it was. A table
removed, reset (``binlake offsets reset``, which also forgets the records) or restored to before the
batch makes the next sync read the whole series again, and the guards keep what is already there.
Where records live is the sink's (``Sink.records``): files beside Delta tables (``FileRecords``), a
table in a database (``binlake.spark.sinks.jdbc_records``); what "still holds" means too (Delta:
every table's version; JDBC: the source's batch position, which commits with the data, and the
synced tables).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from binlake.spark.plan import SyncReport

DIRECTORY = "_binlake_resume"
FORMAT = 1
# read options that change how a batch is read, not which changes it holds: a record is shared by
# reads that differ in them only (``startposition``: the record's own)
NOT_SELECTING = frozenset({"path", "splitsize", "columns", "before", "changes", "reads", "startposition"})


class Records(Protocol):
    """Where a target keeps its records (by ``record_name``) and what it holds now."""

    def read(self, name: str) -> str | None:
        """The record ``name`` (its JSON text), if there is one."""
        ...

    def write(self, name: str, source: str, text: str) -> None:
        """Replace record ``name`` (of ``source``) by ``text``, whole or not at all."""
        ...

    def forget(self, source: str | None) -> int:
        """Remove the records of ``source`` (every source's: None); how many."""
        ...

    def every(self) -> list[str]:
        """Every record's JSON text."""
        ...

    def holds(self, source: str) -> dict[str, int | None]:
        """What a record of ``source`` checks the target by: each part there now (a table, a
        position) and its version (None: none). A part a record lists must still be there, at or
        past the version it had."""
        ...


class FileRecords:
    """Records as files under ``state``'s ``_binlake_resume/`` (Delta and Parquet targets), checked
    by the version of every Delta table under ``state``."""

    def __init__(self, state: Path) -> None:
        self.folder = state / DIRECTORY
        self.state = state

    def read(self, name: str) -> str | None:
        path = self.folder / f"{name}.json"
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write(self, name: str, source: str, text: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".record-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(temporary, self.folder / f"{name}.json")  # the old record or the new, never half
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def forget(self, source: str | None) -> int:
        if not self.folder.is_dir():
            return 0
        n = 0
        for path in self.folder.glob("*.json"):
            if source is not None:
                try:
                    if json.loads(path.read_text(encoding="utf-8")).get("source") != source:
                        continue
                except (OSError, ValueError, AttributeError):
                    pass  # a record that does not read is forgotten with any source's
            path.unlink(missing_ok=True)
            n += 1
        return n

    def every(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return [p.read_text(encoding="utf-8") for p in sorted(self.folder.glob("*.json"))]

    def holds(self, source: str) -> dict[str, int | None]:
        from binlake.spark.sinks.delta import committed_version, delta_tables

        return {f"table {name}": committed_version(self.state, name) for name in delta_tables(self.state)}


@contextmanager
def records_of(sink: Any, spark: Any) -> Iterator[Records | None]:
    """The records of ``sink``'s target, open while the block runs (None: it keeps none)."""
    opened = getattr(sink, "records", None)
    if opened is None:
        yield None
        return
    with opened(spark) as records:
        yield records


@dataclass(frozen=True)
class ResumePoint:
    """A recorded batch end: its last transaction (``file``, ``offset``), the batch's version, and
    what the target held then (``Records.holds``)."""

    file: str
    offset: int
    version: int
    holds: dict[str, int | None]
    head: str  # ``_head`` of the file: another file of that name (a server's binlogs reset) differs

    @property
    def shown(self) -> str:
        return f"{self.file}:{self.offset}"


@dataclass(frozen=True)
class Resume:
    """What a batch sync reads: ``options`` (with ``startposition`` when it resumes), the record it
    resumes from (``point``), and a line for the report saying which (empty: nothing to say)."""

    options: dict[str, str]
    point: ResumePoint | None
    note: str


def read_key(source: str, options: dict[str, str]) -> dict[str, Any]:
    """What a record is kept for: the source and the read options that select its changes."""
    read = {k.lower(): str(v) for k, v in options.items() if k.lower() not in NOT_SELECTING}
    return {"source": source, "read": dict(sorted(read.items()))}


def record_name(source: str, options: dict[str, str]) -> str:
    """A record's name: a digest of ``read_key`` (names from options never reach paths or SQL)."""
    text = json.dumps(read_key(source, options), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resumed(records: Records | None, source: str, options: dict[str, str]) -> Resume:
    """The read of a batch sync of ``source`` into a target keeping ``records``: from the record
    of the last batch sync of the same source and read, when there is one the target still holds
    (module docstring). A merged read of nodes, a read given its own start, or a target without
    records reads as asked."""
    lowered = {k.lower() for k in options}
    if records is None or "startposition" in lowered or str(options.get("nodes", "")).lower() == "true":
        return Resume(dict(options), None, "")
    name = record_name(source, options)
    try:
        text = records.read(name)
    except OSError as e:
        return Resume(dict(options), None, f"read the whole series: the record {name} does not read ({e})")
    if text is None:
        return Resume(dict(options), None, "")
    point, why = _load(text, name, source, options)
    if point is not None:
        why = _changed_since(records.holds(source), point) or _file_changed(source, point)
    if point is None or why:
        return Resume(dict(options), None, f"read the whole series: {why}")
    note = f"resumed at {point.shown}, the last transaction the last sync of this source applied"
    return Resume({**options, "startPosition": point.shown}, point, note)


def record(records: Records | None, source: str, options: dict[str, str], report: SyncReport) -> None:
    """Record the end of the batch ``report`` tells of, once its sink applied it (nothing for a
    batch without a position: empty, or not a stretch of the binlog)."""
    if records is None or not report.file or str(options.get("nodes", "")).lower() == "true":
        return
    data = {
        "format": FORMAT,
        **read_key(source, options),
        "file": report.file,
        "offset": report.txn_position,
        "version": report.version,
        "head": _head(source, report.file),
        "holds": records.holds(source),
    }
    records.write(record_name(source, options), source, json.dumps(data, indent=1, sort_keys=True))


@dataclass(frozen=True)
class Recorded:
    """A record as ``offsets show`` lists it: the source, its read (``k=v`` of the selecting
    options), and where the next batch sync of them resumes (None: a record that does not read)."""

    source: str
    read: str
    at: str | None


def recorded(records: Records) -> list[Recorded]:
    """Every record of ``records``, by source and read."""
    out = []
    for text in records.every():
        try:
            data = json.loads(text)
            read = ",".join(f"{k}={v}" for k, v in dict(data["read"]).items())
            out.append(Recorded(str(data["source"]), read, f"{data['file']}:{int(data['offset'])}"))
        except (ValueError, KeyError, TypeError, AttributeError):
            out.append(Recorded("?", "?", None))
    return sorted(out, key=lambda r: (r.source, r.read))


def _load(text: str, name: str, source: str, options: dict[str, str]) -> tuple[ResumePoint | None, str]:
    """Record ``name`` (``text``) if it is one binlake wrote for this source and read; else why not."""
    try:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            return None, f"the record {name} is of another format ({data.get('format')!r})"
        key = read_key(source, options)
        if data.get("source") != key["source"] or data.get("read") != key["read"]:
            return None, f"the record {name} is of another source or read"
        holds = data["holds"]
        point = ResumePoint(
            str(data["file"]), int(data["offset"]), int(data["version"]), holds, str(data["head"])
        )
        if not all(isinstance(k, str) and isinstance(v, int | None) for k, v in holds.items()):
            raise ValueError("what it holds is not names and versions")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return None, f"the record {name} does not read ({e})"
    return point, ""


def _changed_since(now: dict[str, int | None], point: ResumePoint) -> str:
    """Why the target, holding ``now`` (``Records.holds``), no longer holds what ``point`` says
    (empty: it does)."""
    for part, version in sorted(point.holds.items()):
        if part not in now:
            return f"{part} is not in the target any more"
        at = now[part]
        if version is not None and (at is None or at < version):
            return f"{part} is back before the last sync's position (reset or restored)"
    return ""


def _file_changed(source: str, point: ResumePoint) -> str:
    """Why the source no longer holds the file ``point`` is in as it was (empty: it does)."""
    head = _head(source, point.file)
    if not head:
        return f"{point.file}, where the last sync ended, is not in the source (once) any more"
    if head != point.head:
        return f"{point.file} is another file than the last sync read (the server's binlogs were reset?)"
    return ""


# a file's first event header (after the magic): the server writes its creation time and id there
HEAD = slice(4, 4 + 19)


def _head(source: str, name: str) -> str:
    """A digest of file ``name``'s first event header in ``source`` ("": not there, or not once)."""
    from binlake.errors import BinlogError
    from binlake.spark.source import resolve_files

    try:
        found = [f for f in resolve_files(source) if os.path.basename(f) == name]
        if len(found) != 1:
            return ""
        with open(found[0], "rb") as f:
            first = f.read(HEAD.stop)[HEAD]
    except (BinlogError, OSError):
        return ""
    return hashlib.sha256(first).hexdigest() if len(first) == HEAD.stop - HEAD.start else ""
