"""``binlake mirror`` and ``binlake tail``: the replica client on the command line."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from binlake.cli.common import Command, Options, note
from binlake.credentials import ASK, CredentialsError, client_options, resolve_password
from binlake.events.base import Event
from binlake.replication.client import (
    FilePosition,
    GtidStart,
    Reconnected,
    ReplicaClient,
    ServerAddress,
    SslMode,
    Start,
)
from binlake.replication.mirror import Mirror
from binlake.replication.stream import StreamEvent
from binlake.stopping import interrupt_on

PASSWORD_HELP = """\
The password comes from, first found wins (the MySQL client's order): -p/--password, the option file
(--defaults-file FILE, else ~/.my.cnf; groups [client] then [binlake]), then $MYSQL_PWD. The option
file may also give user, host, port, socket, ssl-mode, ssl-ca, ssl-cert and ssl-key; the command line
wins over it."""

TLS_HELP = """\
--ssl-mode as in the MySQL client. DISABLED: never TLS. PREFERRED (the default without --ssl-ca): TLS
when the server offers it, else plain; never over a Unix socket. REQUIRED: TLS or fail, no certificate
check. VERIFY_CA (the default with --ssl-ca): TLS, and the server's certificate must be signed by
--ssl-ca. VERIFY_IDENTITY: VERIFY_CA, and the certificate must name --host. A CA given with REQUIRED
or PREFERRED is checked too."""


def add_server_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument("--host", help="server host (default 127.0.0.1)")
    g.add_argument("-P", "--port", type=int, help="server TCP port (default 3306)")
    g.add_argument("-u", "--user", help="replication user (default root)")
    g.add_argument("-S", "--socket", help="connect through this Unix socket instead of host:port")
    pw = p.add_argument_group("password and option file", PASSWORD_HELP)
    pw.add_argument(
        "-p",
        "--password",
        nargs="?",
        const=ASK,
        help="-p alone prompts (on a terminal only); a value given here shows in ps",
    )
    pw.add_argument("--defaults-file", metavar="FILE", help="this option file instead of ~/.my.cnf")
    pw.add_argument("--no-defaults", action="store_true", help="read no option file")
    tls = p.add_argument_group("TLS", TLS_HELP)
    tls.add_argument(
        "--ssl-mode",
        type=str.upper,
        choices=[m.value for m in SslMode],
        metavar="MODE",
        help="DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY",
    )
    tls.add_argument("--ssl-ca", metavar="FILE", help="the CA that signed the server's certificate")
    tls.add_argument("--ssl-cert", metavar="FILE", help="client certificate")
    tls.add_argument("--ssl-key", metavar="FILE", help="client key")
    tls.add_argument("--no-ssl", action="store_true", help="the same as --ssl-mode DISABLED")
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


@dataclass(frozen=True)
class ServerOptions(Options):
    """The server, the password's sources, TLS, and where to start: what mirror and tail share.
    ``command`` names the command in the error lines."""

    command: str
    host: str | None = None
    port: int | None = None
    user: str | None = None
    socket: str | None = None
    password: str | None = None  # ASK: prompt
    defaults_file: str | None = None
    no_defaults: bool = False
    ssl_mode: str | None = None
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    no_ssl: bool = False
    server_id: int | None = None
    heartbeat: float = 5.0
    start_file: str | None = None
    start_position: int = 4
    gtid: str | None = None
    blocking: bool = True


def server_from(o: ServerOptions) -> ServerAddress:
    """The address from the command line over the option file (``binlake.credentials`` says which
    file and the password's precedence). A --host or --port on the command line means TCP: an
    option file's socket is then not used."""
    try:
        opts = client_options(o.defaults_file, no_defaults=o.no_defaults)
        if o.password not in (None, ASK):
            note(
                "a password on the command line is seen by other users (ps): use -p, an option file or $MYSQL_PWD"
            )
        password = resolve_password(o.password, options=opts)
    except CredentialsError as e:
        raise SystemExit(f"binlake {o.command}: {e}") from None
    tcp = o.host is not None or o.port is not None
    mode = "DISABLED" if o.no_ssl else o.ssl_mode or opts.get("ssl-mode")
    if o.no_ssl and o.ssl_mode not in (None, "DISABLED"):
        raise SystemExit(f"binlake {o.command}: --no-ssl contradicts --ssl-mode {o.ssl_mode}")
    try:
        return ServerAddress(
            host=o.host or opts.get("host") or "127.0.0.1",
            port=int(o.port or opts.get("port") or 3306),
            user=o.user or opts.get("user") or "root",
            password=password,
            unix_socket=o.socket or (None if tcp else opts.get("socket")),
            ssl_ca=o.ssl_ca or opts.get("ssl-ca"),
            ssl_cert=o.ssl_cert or opts.get("ssl-cert"),
            ssl_key=o.ssl_key or opts.get("ssl-key"),
            ssl_mode=mode,
        )
    except ValueError as e:  # an unknown ssl-mode or port in the option file
        raise SystemExit(f"binlake {o.command}: {e}") from None


def start_from(o: ServerOptions, default: str) -> Start:
    if o.gtid:
        return GtidStart(o.gtid)
    if o.start_file:
        return FilePosition(o.start_file, o.start_position)
    return default


def client_from(o: ServerOptions, start: Start) -> ReplicaClient:
    client = ReplicaClient(server_from(o), start, heartbeat=o.heartbeat, blocking=o.blocking)
    if o.server_id:
        client.server_id = o.server_id
    return client


@dataclass(frozen=True)
class MirrorOptions(Options):
    server: ServerOptions
    to: str


def cmd_mirror(o: MirrorOptions) -> int:
    mirror = Mirror(o.to)
    resume = mirror.resume_point()
    if resume is not None and (o.server.start_file or o.server.gtid):
        note(f"{o.to} already holds a mirror: continuing it at {resume.file}:{resume.position}")
    start: Start = resume if resume is not None else start_from(o.server, "oldest")
    if isinstance(start, GtidStart):
        raise SystemExit("binlake mirror: --gtid cannot mirror byte for byte; give --start-file")
    if isinstance(start, FilePosition) and resume is None and start.position != 4:
        note(f"a mirror copies whole files: starting at the beginning of {start.file}")
        start = FilePosition(start.file, 4)
    client = client_from(o.server, start)
    events = 0
    stopped = False
    try:
        with interrupt_on(signal.SIGTERM):  # a service manager's stop ends it like Ctrl-C
            for item in received(client):
                if mirror.write(item):
                    events += 1
    except KeyboardInterrupt:
        stopped = True  # what is written stays: a restart cuts back to the last whole transaction
    finally:
        mirror.close()
    how = " (stopped)" if stopped else ""
    note(f"mirrored {events} events, {mirror.bytes_written} bytes into {o.to}{how}")
    return 0


def received(client: ReplicaClient) -> Iterator[StreamEvent]:
    """What the server sends, a reconnect said on stderr (the client resumes where no transaction
    is open: nothing lost, nothing repeated)."""
    for item in client.events():
        if isinstance(item, Reconnected):
            note(f"reconnected after {item.reason}; continuing at {item.resume}")
        else:
            yield item


def _tail_events(client: ReplicaClient) -> Iterator[Event]:
    for item in received(client):
        if item.in_file:
            yield from item.events


@dataclass(frozen=True)
class TailOptions(Options):
    server: ServerOptions
    format: str = "text"


def cmd_tail(o: TailOptions) -> int:
    from binlake.render.jsonl import render_jsonl
    from binlake.render.text import render_text

    client = client_from(o.server, start_from(o.server, "current"))
    events = _tail_events(client)
    lines = render_jsonl(events) if o.format == "json" else render_text(events, verbosity=2)
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return 0


def add_mirror(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    m = sub.add_parser(
        "mirror",
        help="copy a server's binlogs into a directory byte for byte, as a replica, and keep following",
    )
    add_server_options(m)
    m.add_argument("--to", required=True, help="directory of the mirror (continued if it exists)")
    m.set_defaults(handler=Command(MirrorOptions, cmd_mirror))


def add_tail(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    t = sub.add_parser("tail", help="print a server's binlog events live, as a replica")
    add_server_options(t)
    t.add_argument("--format", choices=("text", "json"), default="text")
    t.set_defaults(handler=Command(TailOptions, cmd_tail))
