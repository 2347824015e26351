"""``binlake serve``: a binlog directory (a global binlog ``binlake merge`` writes, a mirror, a
server's own directory) served over the MySQL replication protocol."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import dataclass

from binlake.cli.common import Command, Options, UsageError, size_arg
from binlake.credentials import CredentialsError, secret_from
from binlake.stopping import interrupt_on

PASSWORD_ENV = "BINLAKE_SERVE_PASSWORD"
LOOPBACK = ("127.0.0.1", "::1", "localhost")

PASSWORD_HELP = f"""\
Replicas log in with mysql_native_password as --user. The password comes from --password-file, or
the environment variable --password-env names (default ${PASSWORD_ENV}); never from the command
line, where ps shows it. --no-password lets the user in without one (loopback only). There is no
TLS: bind to another address only on a network you trust."""


@dataclass(frozen=True)
class ServeOptions(Options):
    directory: str
    bind: str = "127.0.0.1"
    port: int = 3306
    user: str = "repl"
    password_file: str | None = None
    password_env: str | None = None
    no_password: bool = False
    server_id: int = 1
    server_version: str | None = None
    max_packet: int = 1 << 20
    max_connections: int = 64


def password_of(o: ServeOptions) -> str:
    if o.no_password:
        if o.password_file or o.password_env:
            raise UsageError("--no-password contradicts --password-file/--password-env")
        if o.bind not in LOOPBACK:
            raise UsageError(f"--no-password serves loopback only, not {o.bind}")
        return ""
    try:
        env = o.password_env if o.password_env or o.password_file else PASSWORD_ENV
        secret = secret_from(env if not o.password_file else None, o.password_file)
    except CredentialsError as e:
        raise UsageError(
            f"{e}: binlake serve needs the replicas' password (--password-file, ${PASSWORD_ENV}, "
            "--password-env, or --no-password)"
        ) from None
    if not secret:
        raise UsageError("the password is empty: give one, or --no-password to serve without")
    return secret


def cmd_serve(o: ServeOptions) -> int:
    from binlake.serve.directory import BinlogDirectory
    from binlake.serve.server import BinlogServer, Limits
    from binlake.serve.session import ServeConfig

    password = password_of(o)
    files = BinlogDirectory(o.directory).files()  # a directory that is not a series fails here
    config = ServeConfig(o.user, password, o.server_id, o.server_version, o.max_packet)
    server = BinlogServer(o.directory, config, o.bind, o.port, Limits(max_connections=o.max_connections))
    host, port = server.address
    print(
        f"binlake serve: {o.directory} ({len(files)} file(s)) on {host}:{port} for user {o.user}",
        flush=True,
    )
    if o.bind not in LOOPBACK:
        print(
            "binlake serve: no TLS: the binlogs cross the network in clear text", file=sys.stderr, flush=True
        )
    try:
        with interrupt_on(signal.SIGTERM):
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown(wait=1.0)
    return 0


def add_serve(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "serve",
        help="serve a binlog directory over the MySQL replication protocol (replicas, mariadb-binlog -R)",
        description=PASSWORD_HELP,
    )
    p.add_argument("directory", help="the binlog directory (or its index file), followed as it grows")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("-P", "--port", type=int, default=3306, help="TCP port (default 3306; 0: any free port)")
    p.add_argument("-u", "--user", default="repl", help="the user replicas log in as (default repl)")
    p.add_argument("--password-file", metavar="FILE", help="the password, in this file")
    p.add_argument(
        "--password-env", metavar="VAR", help=f"the password, in this variable (default {PASSWORD_ENV})"
    )
    p.add_argument("--no-password", action="store_true", help="no password (loopback only)")
    p.add_argument("--server-id", type=int, default=1, help="server id reported and put in made-up events")
    p.add_argument("--server-version", help="version reported (default: the newest file's, marked -binlake)")
    p.add_argument("--max-packet", type=size_arg, default="1MiB", help="largest packet a client may send")
    p.add_argument("--max-connections", type=int, default=64, help="connections served at once")
    p.set_defaults(handler=Command(ServeOptions, cmd_serve))
