"""The ``binlake`` command: one module per command group (reading, changes, position, sync,
replication, merge, serve, generate); ``common`` holds what they share."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from binlake import __version__
from binlake.cli import changes, generate, merge, position, reading, replication, serve, sync
from binlake.cli.common import Command, OneLineParser, UsageError, engine_error_line, run

# The commands in the order ``binlake --help`` lists them.
COMMANDS = (
    reading.add_dump,
    reading.add_sql,
    reading.add_stats,
    changes.add_changes,
    position.add_index,
    generate.add_generate,
    generate.add_simulate,
    sync.add_sync,
    sync.add_offsets,
    sync.add_export,
    position.add_schema,
    position.add_find_position,
    replication.add_mirror,
    replication.add_tail,
    merge.add_merge,
    serve.add_serve,
    generate.add_demo,
)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="binlake", description="Exact, ordered change data from MySQL-family binlogs.")
    p.add_argument("--version", action="version", version=f"binlake {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def parse(argv: Sequence[str] | None = None) -> tuple[Command[Any], Any]:
    """The command ``argv`` names and its frozen options (usage mistakes exit 2, in one line)."""
    args = build_parser().parse_args(argv)
    command: Command[Any] = args.handler
    return command, command.options.from_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    """``binlake ARGV``: the exit status (errors are one line on stderr, see ``common.run``)."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="surrogateescape")  # string values print as their stored bytes
    args = build_parser().parse_args(argv)
    return run(args.handler, args)


__all__ = ["COMMANDS", "Command", "UsageError", "build_parser", "engine_error_line", "main", "parse"]
