"""The ``binlake`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence

from binlake import __version__
from binlake.errors import BinlogError
from binlake.events.base import Event
from binlake.reader import BinlogReader


def _events(args: argparse.Namespace) -> Iterator[Event]:
    for path in args.files:
        yield from BinlogReader(
            path,
            verify_checksum=args.verify_checksum,
            start_position=args.start_position,
            stop_position=args.stop_position,
            require_fde=args.require_fde,
        )


def cmd_dump(args: argparse.Namespace) -> int:
    from binlake.render.jsonl import render_jsonl
    from binlake.render.text import render_text

    out = sys.stdout
    lines = (
        render_jsonl(_events(args))
        if args.format == "json"
        else render_text(_events(args), verbosity=args.verbose, positional=args.positional)
    )
    for line in lines:
        out.write(line)
        out.write("\n")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from binlake.demo import run_demo

    return run_demo(args.workdir)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="binlake", description="Exact, ordered change data from MySQL-family binlogs."
    )
    p.add_argument("--version", action="version", version=f"binlake {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("dump", help="decode binlog files to mysqlbinlog-style text or JSON lines")
    d.add_argument("files", nargs="+", help="binlog or relay log files, in order")
    d.add_argument("--format", choices=("text", "json"), default="text")
    d.add_argument("--start-position", type=int, help="first event offset (the format event is always read)")
    d.add_argument("--stop-position", type=int, help="stop before the event at or after this offset")
    d.add_argument(
        "--verify-checksum",
        dest="verify_checksum",
        action="store_true",
        default=True,
        help="verify every event's CRC32 (default)",
    )
    d.add_argument("--no-verify-checksum", dest="verify_checksum", action="store_false")
    d.add_argument(
        "--no-require-fde",
        dest="require_fde",
        action="store_false",
        default=True,
        help="read a fragment without a FORMAT_DESCRIPTION event as MySQL 5.x v4 events",
    )
    d.add_argument(
        "--positional",
        action="store_true",
        help="name columns @1, @2… even when the binlog carries names (as mysqlbinlog does)",
    )
    d.add_argument(
        "-v",
        "--verbose",
        type=int,
        default=2,
        choices=(1, 2),
        help="2 (default) adds the /* TYPE meta nullable is_null */ comments of mysqlbinlog -vv",
    )
    d.set_defaults(func=cmd_dump)

    m = sub.add_parser("demo", help="write a sample binlog with a private MariaDB and decode it")
    m.add_argument("--workdir", default="out/demo", help="where the sample server and outputs go")
    m.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="surrogateescape")  # string values print as their stored bytes
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BinlogError as e:
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


if __name__ == "__main__":
    sys.exit(main())
