"""The ``binlake`` command: one module per command group (reading, position, sync, replication,
merge, generate); ``common`` holds what they share."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from binlake import __version__
from binlake.cli import generate, position, reading, replication, sync
from binlake.cli import merge as merge_command
from binlake.cli.common import OneLineParser, UsageError, engine_error, engine_error_line
from binlake.errors import BinlogError

# The commands in the order ``binlake --help`` lists them.
COMMANDS = (
    reading.add_dump,
    reading.add_sql,
    reading.add_stats,
    position.add_index,
    generate.add_generate,
    generate.add_simulate,
    sync.add_sync,
    sync._add_offsets,
    sync.add_export,
    position.add_schema,
    position.add_find_position,
    replication.add_mirror,
    replication.add_tail,
    merge_command.add_merge,
    generate.add_demo,
)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="binlake", description="Exact, ordered change data from MySQL-family binlogs.")
    p.add_argument("--version", action="version", version=f"binlake {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="surrogateescape")  # string values print as their stored bytes
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (BinlogError, UsageError) as e:
        sys.stdout.flush()
        print(f"binlake: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:
        sys.stdout.flush()
        print(f"binlake: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if not engine_error(e):
            raise
        sys.stdout.flush()
        print(f"binlake: error: {engine_error_line(e)}", file=sys.stderr)
        return 2
