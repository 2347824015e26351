"""What every command shares: the one-line usage errors (``OneLineParser``, ``UsageError``), the
argument types, the selection and schema-history options, and the engine errors said in one line."""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

from binlake.filters import OPERATIONS, Selection, parse_datetime
from binlake.gtid import AnyGtidSet, GtidSet, GtidSetError, MariaGtidPos


class OneLineParser(argparse.ArgumentParser):
    """Usage mistakes in one line, exit 2 (argparse prints the whole usage first: a dozen lines for
    dump, burying the one that says what is wrong)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class UsageError(Exception):
    """Options that cannot work together, said in one line (exit 2, as for bad input)."""


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


def _position(text: str) -> int:
    """A byte offset in a binlog file (argparse type)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte offset (a whole number)")
    return int(text)


def _datetime(text: str) -> object:
    try:
        return parse_datetime(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date/time (YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM])"
        ) from None


def _gtid_set(text: str) -> AnyGtidSet:
    try:
        return AnyGtidSet.parse(text)
    except GtidSetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _gtid_any(text: str) -> GtidSet | MariaGtidPos:
    try:
        return MariaGtidPos.parse(text) if text.strip() and ":" not in text else GtidSet.parse(text)
    except GtidSetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_schema(p: argparse.ArgumentParser) -> None:
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


def _add_selection(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (by commit time, GTID, schema, table, operation)")
    g.add_argument(
        "--start-datetime",
        type=_datetime,
        help="transactions committed at or after this time (UTC unless an offset is given)",
    )
    g.add_argument("--stop-datetime", type=_datetime, help="transactions committed before this time")
    g.add_argument(
        "--include-gtids",
        type=_gtid_set,
        help="only these GTIDs: a MySQL GTID set (uuid:1-5:7) and/or MariaDB GTIDs (0-1-595) "
        "and ranges (domain-server-lo-hi: 0-1-590-595), comma-separated",
    )
    g.add_argument("--exclude-gtids", type=_gtid_set, help="not these GTIDs (as --include-gtids)")
    g.add_argument("--database", action="append", help="only this schema (glob; repeatable)")
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
