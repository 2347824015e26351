"""The ``binlake`` command: one module per command group (reading, changes, position, sync,
replication, merge, serve, generate); ``common`` holds what they share."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from binlake import __version__
from binlake.cli.common import Command, OneLineParser, UsageError, engine_error_line, run

# The commands in the order ``binlake --help`` lists them: (command names, module, function adding them).
# A command line naming one imports only its module (replication's TLS, sync's console and the rest
# are not start-up time of ``dump``); ``--help`` and anything else build the whole parser.
_COMMANDS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("dump",), "reading", "add_dump"),
    (("sql",), "reading", "add_sql"),
    (("stats",), "reading", "add_stats"),
    (("changes",), "changes", "add_changes"),
    (("index",), "position", "add_index"),
    (("generate",), "generate", "add_generate"),
    (("simulate-shards",), "generate", "add_simulate"),
    (("sync",), "sync", "add_sync"),
    (("offsets",), "sync", "add_offsets"),
    (("export",), "sync", "add_export"),
    (("schema",), "position", "add_schema"),
    (("find-position",), "position", "add_find_position"),
    (("mirror",), "replication", "add_mirror"),
    (("tail",), "replication", "add_tail"),
    (("merge",), "merge", "add_merge"),
    (("serve",), "serve", "add_serve"),
    (("demo",), "generate", "add_demo"),
)


def _adder(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"binlake.cli.{module}"), name)


def __getattr__(name: str) -> Any:
    if name == "COMMANDS":  # every command's ``add_*`` (imports every command module)
        return tuple(_adder(module, fn) for _, module, fn in _COMMANDS)
    raise AttributeError(name)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or only of the one ``argv`` names first (the same parser for
    that command line: its options, usage and errors)."""
    p = OneLineParser(prog="binlake", description="Exact, ordered change data from MySQL-family binlogs.")
    p.add_argument("--version", action="version", version=f"binlake {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    first = argv[0] if argv else None
    only = [c for c in _COMMANDS if first in c[0]]
    for _, module, fn in only or _COMMANDS:
        _adder(module, fn)(sub)
    return p


def parse(argv: Sequence[str] | None = None) -> tuple[Command[Any], Any]:
    """The command ``argv`` names and its frozen options (usage mistakes exit 2, in one line)."""
    args = build_parser(argv).parse_args(argv)
    command: Command[Any] = args.handler
    return command, command.options.from_args(args)


def main(argv: Sequence[str] | None = None) -> int:
    """``binlake ARGV``: the exit status (errors are one line on stderr, see ``common.run``)."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="surrogateescape")  # string values print as their stored bytes
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return run(args.handler, args)


__all__ = ["COMMANDS", "Command", "UsageError", "build_parser", "engine_error_line", "main", "parse"]
