"""What every command shares: the one-line usage errors (``OneLineParser``, ``UsageError``), a
command as a parser of frozen options plus the function that runs them (``Command``), the argument
types, the selection and schema-history options, and every error said in one line (``run``)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import re
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Self, TypeVar

from binlake.errors import BinlogError
from binlake.filters import OPERATIONS, Selection, parse_datetime
from binlake.gtid import AnyGtidSet, GtidSet, GtidSetError, MariaGtidPos, parse_executed
from binlake.sizes import parse_size

if TYPE_CHECKING:
    from binlake.schema import SchemaHistory, SchemaTracker

Opts = TypeVar("Opts", bound="Options")


class OneLineParser(argparse.ArgumentParser):
    """Usage mistakes in one line, exit 2 (argparse prints the whole usage first: a dozen lines for
    dump, burying the one that says what is wrong)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class UsageError(Exception):
    """Options that cannot work together, said in one line (exit 2, as for bad input)."""


class Options:
    """Base of a command's frozen options (a frozen dataclass). ``from_args`` is the boundary: each
    field comes from the parsed argument of its name (lists as tuples), a field typed as options (or
    a ``Selection``) from the same arguments, a field the command's parser lacks from its default."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        types = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            kind = types[f.name]
            if kind is Selection:
                values[f.name] = selection_from(args)
            elif isinstance(kind, type) and issubclass(kind, Options):
                values[f.name] = kind.from_args(args)
            elif hasattr(args, f.name):
                value = getattr(args, f.name)
                values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


@dataclass(frozen=True)
class Command(Generic[Opts]):
    """A command past argparse: its frozen ``options`` (built from the parsed arguments, the only
    place a Namespace is read) and ``run``, which does the work on them."""

    options: type[Opts]
    run: Callable[[Opts], int]


def selection_from(args: argparse.Namespace) -> Selection:
    return Selection(
        start_time=args.start_datetime,
        stop_time=args.stop_datetime,
        include_gtids=args.include_gtids,
        exclude_gtids=args.exclude_gtids,
        databases=args.database or [],
        tables=args.table or [],
        operations=args.type or [],
    )


@dataclass(frozen=True)
class SchemaOptions(Options):
    """``--schema``, ``--schema-mismatch``, ``--save-schema``: the schema history a run keeps."""

    seed: str | None = None
    mismatch: str | None = None
    save: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SchemaOptions:
        return cls(args.schema, args.schema_mismatch, args.save_schema)

    def tracker(self) -> SchemaTracker:
        """The schema history the run keeps: from the seed (a DDL script or a saved history), else
        empty; DDL in the binlog updates it either way. Without a seed a mismatch falls back to @N."""
        from binlake.schema import SchemaHistory, SchemaTracker

        history = open_seed(self.seed) if self.seed else SchemaHistory()
        return SchemaTracker(history, on_mismatch=self.mismatch or ("error" if self.seed else "positional"))


def open_seed(seed: str) -> SchemaHistory:
    """The ``--schema`` seed, refused when a statement of it is not understood: the table it
    defines would be missing, and rows of it read as @N (or stop the run) far from the cause."""
    from binlake.schema import SchemaHistory

    history = SchemaHistory.open(seed)
    bad = [n for n in history.not_understood if n.position[0] == "<seed>"]
    if bad:
        first = " ".join(bad[0].sql.split())[:100]
        raise UsageError(
            f"--schema {seed}: {len(bad)} statement(s) not understood; first: {bad[0].reason}: {first}"
        )
    return history


def position_arg(text: str) -> int:
    """A byte offset in a binlog file (argparse type)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte offset (a whole number)")
    return int(text)


def datetime_arg(text: str) -> dt.datetime:
    try:
        return parse_datetime(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def gtid_set_arg(text: str) -> AnyGtidSet:
    try:
        return AnyGtidSet.parse(text)
    except GtidSetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def gtid_any_arg(text: str) -> GtidSet | MariaGtidPos:
    try:
        return parse_executed(text)
    except GtidSetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def size_arg(text: str) -> int:
    """``parse_size`` as an argparse type: a bad size is a usage error that says what a size is."""
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_schema_history(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("schema history (column names and types for binlogs without metadata)")
    g.add_argument(
        "--schema",
        help="seed: a DDL script (mysqldump --no-data, SHOW CREATE TABLE) or a saved history .json",
    )
    g.add_argument(
        "--schema-mismatch",
        choices=("error", "positional"),
        help="a table whose layout disagrees with the history: stop (default with --schema) or print @N",
    )
    g.add_argument("--save-schema", help="write the history, with the DDL met, to this .json at the end")


def add_selection(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (by commit time, GTID, schema, table, operation)")
    g.add_argument(
        "--start-datetime",
        type=datetime_arg,
        help="transactions committed at or after this time (UTC unless an offset is given)",
    )
    g.add_argument("--stop-datetime", type=datetime_arg, help="transactions committed before this time")
    g.add_argument(
        "--include-gtids",
        type=gtid_set_arg,
        help="only these GTIDs: a MySQL GTID set (uuid:1-5:7) and/or MariaDB GTIDs (0-1-595) "
        "and ranges (domain-server-lo-hi: 0-1-590-595), comma-separated",
    )
    g.add_argument("--exclude-gtids", type=gtid_set_arg, help="not these GTIDs (as --include-gtids)")
    g.add_argument("--database", "--databases", action="append", help="only this schema (glob; repeatable)")
    g.add_argument("--table", action="append", help="only this table, 'tbl' or 'db.tbl' (glob; repeatable)")
    g.add_argument("--type", action="append", choices=OPERATIONS, help="only these changes (repeatable)")


def engine_error(e: BaseException) -> bool:
    """An error of an engine sync drives (Spark through py4j, delta-rs): its message carries a Java
    or Rust stack, or a Python worker's traceback, none of which the user should have to read."""
    if type(e).__module__.split(".")[0] in ("pyspark", "py4j"):
        return True
    delta = sys.modules.get("deltalake.exceptions")
    return delta is not None and isinstance(e, delta.DeltaError)


_RAISED = re.compile(r"^((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)): (\S.*)$", re.M)


def engine_error_line(e: BaseException) -> str:
    """The cause of an engine error in one line: the binlake error a worker raised (it names the file
    and offset), else the innermost Python error in the message, else the message's first line."""
    text = str(e)
    raised = _RAISED.findall(text)
    ours = [m for m in raised if m[0].startswith("binlake.")]
    if ours or raised:
        name, message = (ours or raised)[-1]
        return message if name.startswith("binlake.") else f"{name.rsplit('.', 1)[-1]}: {message}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
    return f"{type(e).__name__}: {first}"


def run(command: Command[Any], args: argparse.Namespace) -> int:
    """The command on its options, every error it can meet said in one line on stderr: exit 2 for a
    usage mistake or bad input, 0 when the reader of the output went away, 130 on Ctrl-C."""
    try:
        return int(command.run(command.options.from_args(args)))
    except (BinlogError, UsageError) as e:
        return error_line(str(e))
    except BrokenPipeError:
        return 0
    except OSError as e:
        return error_line(f"{e.filename or ''}: {e.strerror or e}")
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if not engine_error(e):
            raise
        return error_line(engine_error_line(e))


def note(message: str) -> None:
    """``binlake: MESSAGE`` on stderr, after what the command printed so far (it goes on)."""
    sys.stdout.flush()
    print(f"binlake: {message}", file=sys.stderr, flush=True)


def error_line(message: str) -> int:
    """``binlake: error: MESSAGE`` on stderr, after what the command printed so far; exit status 2."""
    sys.stdout.flush()
    print(f"binlake: error: {message}", file=sys.stderr)
    return 2


GLOB = "*?["  # a source holding one of these is a glob


def expand(sources: Iterable[str]) -> tuple[str, ...]:
    """Files in order: a directory, index file or glob as its series, a file as itself."""
    from binlake.series import series_files

    out: list[str] = []
    for s in sources:
        p = Path(s)
        if p.is_dir() or p.suffix == ".index" or any(ch in s for ch in GLOB):
            files = series_files(s)
            if not files:
                raise UsageError(f"no binlog files in {s}")
            out += [str(f) for f in files]
        else:
            out.append(s)
    return tuple(out)
