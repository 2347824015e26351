"""``binlake mirror`` and ``binlake tail``: the replica client on the command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator

from binlake.events.base import Event
from binlake.replication.client import (
    FilePosition,
    GtidStart,
    Reconnected,
    ReplicaClient,
    ServerAddress,
    Start,
)
from binlake.replication.mirror import Mirror
from binlake.replication.stream import StreamEvent


def add_server_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=3306)
    g.add_argument("--user", default="root")
    g.add_argument(
        "--password", default=os.environ.get("MYSQL_PWD", ""), help="default: $MYSQL_PWD (safer than argv)"
    )
    g.add_argument("--socket", help="connect through this Unix socket instead of host:port")
    g.add_argument("--ssl-ca", help="verify the server's TLS certificate with this CA (turns TLS on)")
    g.add_argument("--ssl-cert", help="client certificate for TLS")
    g.add_argument("--ssl-key", help="client key for TLS")
    g.add_argument(
        "--no-ssl", action="store_true", help="never use TLS (default: whenever the server offers it)"
    )
    g.add_argument("--server-id", type=int, help="replica server id (default: random, not 0)")
    g.add_argument("--heartbeat", type=float, default=5.0, help="seconds between server heartbeats when idle")
    s = p.add_argument_group("start")
    s.add_argument("--start-file", help="binlog file to start from")
    s.add_argument("--start-position", type=int, default=4, help="offset in --start-file (an event start)")
    s.add_argument("--gtid", help="start after these GTIDs (MySQL GTID set or MariaDB GTID position)")
    p.add_argument(
        "--non-blocking",
        dest="blocking",
        action="store_false",
        help="stop at the server's current end instead of following it",
    )


def server_from(args: argparse.Namespace) -> ServerAddress:
    return ServerAddress(
        args.host,
        args.port,
        args.user,
        args.password,
        args.socket,
        ssl_ca=args.ssl_ca,
        ssl_cert=args.ssl_cert,
        ssl_key=args.ssl_key,
        ssl_disabled=args.no_ssl,
    )


def start_from(args: argparse.Namespace, default: str) -> Start:
    if args.gtid:
        return GtidStart(args.gtid)
    if args.start_file:
        return FilePosition(args.start_file, args.start_position)
    return default


def client_from(args: argparse.Namespace, start: Start) -> ReplicaClient:
    kw = {"server_id": args.server_id} if args.server_id else {}
    return ReplicaClient(server_from(args), start, heartbeat=args.heartbeat, blocking=args.blocking, **kw)


def _note(msg: str) -> None:
    sys.stdout.flush()
    print(f"binlake: {msg}", file=sys.stderr, flush=True)


def cmd_mirror(args: argparse.Namespace) -> int:
    mirror = Mirror(args.to)
    resume = mirror.resume_point()
    if resume is not None and (args.start_file or args.gtid):
        _note(f"{args.to} already holds a mirror: continuing it at {resume.file}:{resume.position}")
    start: Start = resume if resume is not None else start_from(args, "oldest")
    if isinstance(start, GtidStart):
        raise SystemExit("binlake mirror: --gtid cannot mirror byte for byte; give --start-file")
    if isinstance(start, FilePosition) and resume is None and start.position != 4:
        _note(f"a mirror copies whole files: starting at the beginning of {start.file}")
        start = FilePosition(start.file, 4)
    client = client_from(args, start)
    events = 0
    try:
        for item in client.events():
            if isinstance(item, Reconnected):
                _note(f"reconnected after {item.reason}; continuing at {item.resume}")
            elif mirror.write(item):
                events += 1
    finally:
        mirror.close()
    _note(f"mirrored {events} events, {mirror.bytes_written} bytes into {args.to}")
    return 0


def _tail_events(client: ReplicaClient) -> Iterator[Event]:
    for item in client.events():
        if isinstance(item, Reconnected):
            _note(f"reconnected after {item.reason}; continuing at {item.resume}")
        elif isinstance(item, StreamEvent) and item.in_file:
            yield from item.events


def cmd_tail(args: argparse.Namespace) -> int:
    from binlake.render.jsonl import render_jsonl
    from binlake.render.text import render_text

    client = client_from(args, start_from(args, "current"))
    events = _tail_events(client)
    lines = render_jsonl(events) if args.format == "json" else render_text(events, verbosity=2)
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    m = sub.add_parser(
        "mirror",
        help="copy a server's binlogs into a directory byte for byte, as a replica, and keep following",
    )
    add_server_options(m)
    m.add_argument("--to", required=True, help="directory of the mirror (continued if it exists)")
    m.set_defaults(func=cmd_mirror)
    t = sub.add_parser("tail", help="print a server's binlog events live, as a replica")
    add_server_options(t)
    t.add_argument("--format", choices=("text", "json"), default="text")
    t.set_defaults(func=cmd_tail)
