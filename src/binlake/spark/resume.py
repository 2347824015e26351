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
# Delta commits that change no row: a table with only these (and syncs') since a record still holds
MAINTENANCE = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END"})
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

    def holds(self, source: str) -> dict[str, Any]:
        """What a record of ``source`` keeps of the target now (JSON values), for ``changed``."""
        ...

    def changed(self, source: str, held: dict[str, Any]) -> str:
        """Why the target no longer holds what ``holds`` gave then (``held``): a part gone, back
        before its version, or changed by others than binlake (empty: it still does)."""
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

    def holds(self, source: str) -> dict[str, Any]:
        """Per Delta table: its batch version (app transaction) and its log version."""
        from deltalake import DeltaTable

        from binlake.spark.sinks.delta import APP_ID, delta_tables
        from binlake.targetnames import inside

        out: dict[str, Any] = {}
        for name in delta_tables(self.state):
            table = DeltaTable(str(inside(self.state, name)))
            out[name] = [table.transaction_version(APP_ID), table.version()]
        return out

    def changed(self, source: str, held: dict[str, Any]) -> str:
        """A table gone, back before its batch version, or with a commit since that is not a sync's
        (a RESTORE, a write of someone else's: rows a whole read would bring back)."""
        from deltalake import DeltaTable

        from binlake.spark.sinks.delta import APP_ID, delta_tables
        from binlake.targetnames import inside

        there = set(delta_tables(self.state))
        for name, (batch, log) in sorted(held.items()):
            if name not in there:
                return f"table {name} is not in the target any more"
            table = DeltaTable(str(inside(self.state, name)))
            now = table.transaction_version(APP_ID)
            if batch is not None and (now is None or now < batch) or table.version() < log:
                return f"table {name} is back before the last sync's position (reset or restored)"
            for commit in table.history(table.version() - log) if table.version() > log else []:
                if "binlake.position" not in commit and commit.get("operation") not in MAINTENANCE:
                    return (
                        f"table {name} was changed by another writer since the last sync "
                        f"({commit.get('operation')} at version {commit.get('version')})"
                    )
        return ""


@contextmanager
def records_of(sink: Any, spark: Any) -> Iterator[Records | None]:
    """The records of ``sink``'s target, open while the block runs (None: it keeps none)."""
    opened = getattr(sink, "records", None)
    if opened is None:
        yield None
        return
    with opened(spark) as records:
        yield records


def read_of(sink: Any, spark: Any, source: str, options: dict[str, str]) -> Resume:
    """``resumed`` for a sync of ``source`` into ``sink``: its records opened and read here. A
    target whose records cannot be read (a database not reachable now) is read whole, with a note:
    the sync itself then says what is wrong with the target, or refuses the batch first."""
    try:
        with records_of(sink, spark) as records:
            return resumed(records, source, options)
    except Exception as e:  # noqa: BLE001 - a record only saves reading: any failure reads all
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        return Resume(dict(options), None, f"read the whole series: the target's records do not read ({why})")


def record_of(sink: Any, spark: Any, source: str, options: dict[str, str], report: SyncReport) -> None:
    """``record`` the batch ``report`` tells of in ``sink``'s records (after the sink applied it)."""
    with records_of(sink, spark) as records:
        record(records, source, options, report)


@dataclass(frozen=True)
class ResumePoint:
    """A recorded batch end: its last transaction (``file``, ``offset``), the batch's version, and
    what the target held then (``Records.holds``)."""

    file: str
    offset: int
    version: int
    holds: dict[str, Any]
    identity: str  # ``_identity`` of the file at the offset: another file of that name differs
    before: list[str]  # the series' files before ``file`` then: one arriving since is read whole

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
        why = records.changed(source, point.holds) or _file_changed(source, point)
    if point is None or why:
        return Resume(dict(options), None, f"read the whole series: {why}")
    note = f"resumed at {point.shown}, the last transaction the last sync of this source applied"
    return Resume({**options, "startPosition": point.shown}, point, note)


def record(records: Records | None, source: str, options: dict[str, str], report: SyncReport) -> None:
    """Record the end of the batch ``report`` tells of, once its sink applied it (nothing for a
    batch without a position: empty, or not a stretch of the binlog)."""
    if records is None or not report.file or str(options.get("nodes", "")).lower() == "true":
        return
    files = _files(source)
    data = {
        "format": FORMAT,
        **read_key(source, options),
        "file": report.file,
        "offset": report.txn_position,
        "version": report.version,
        "identity": _identity(files, report.file, report.txn_position),
        "before": _before(files, report.file),
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
        point = ResumePoint(
            str(data["file"]),
            int(data["offset"]),
            int(data["version"]),
            dict(data["holds"]),
            str(data["identity"]),
            [str(f) for f in data["before"]],
        )
        if point.offset < 4:
            raise ValueError(f"offset {point.offset} is before any event")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return None, f"the record {name} does not read ({e})"
    return point, ""


def _file_changed(source: str, point: ResumePoint) -> str:
    """Why the source no longer holds the file ``point`` is in as it was, or holds a file before it
    that was not there then (empty: it holds them as they were)."""
    files = _files(source)
    identity = _identity(files, point.file, point.offset)
    if not identity:
        return f"{point.file}:{point.offset}, where the last sync ended, is not in the source any more"
    if identity != point.identity:
        return f"{point.file} is another file than the last sync read (the server's binlogs were reset?)"
    arrived = sorted(set(_before(files, point.file)) - set(point.before))
    if arrived:
        return f"{arrived[0]}, before {point.file} in the series, arrived since the last sync"
    return ""


# a file's first event header (after the magic) without its flags (a server clears its in-use flag
# when it closes the file): its creation time, server id and length
FIRST = slice(4, 4 + 17)
EVENT_HEADER = 19  # and the header of the event at the record's offset: bytes a file keeps


def _identity(files: list[str], name: str, offset: int) -> str:
    """A digest of file ``name`` of a series' ``files``: its first event header, and the header of the event
    at ``offset`` ("": not there (once), or shorter than that)."""
    found = [f for f in files if os.path.basename(f) == name]
    if len(found) != 1:
        return ""
    try:
        with open(found[0], "rb") as f:
            first = f.read(FIRST.stop)[FIRST]
            f.seek(offset)
            at = f.read(EVENT_HEADER)
    except OSError:
        return ""
    if len(first) != FIRST.stop - FIRST.start or len(at) != EVENT_HEADER:
        return ""
    return hashlib.sha256(first + at).hexdigest()


def _before(files: list[str], name: str) -> list[str]:
    """The names of the series' ``files`` before ``name``."""
    names = [os.path.basename(f) for f in files]
    return names[: names.index(name)] if name in names else names


def _files(source: str) -> list[str]:
    """The files ``source`` names now (none: a source that does not resolve)."""
    from binlake.errors import BinlogError
    from binlake.spark.source import resolve_files

    try:
        return resolve_files(source)
    except (BinlogError, OSError):
        return []

