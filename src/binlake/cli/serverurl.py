"""A server given as a URL on the command line: ``mysql://USER@HOST:PORT[/DB,…]`` (also ``mariadb://``),
as ``binlake sync`` and ``binlake changes`` take it in place of binlog files.

The URL carries no password (``ps`` would show it): it comes from ``$MYSQL_PWD`` or the client option
files, as for ``binlake mirror``. Query parameters every command takes: ``socket``, ``ssl-mode``,
``ssl-ca``, ``ssl-cert``, ``ssl-key``; a command names the others it takes.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from binlake.cli.common import UsageError
from binlake.credentials import CredentialsError, client_options, resolve_password
from binlake.replication.client import ServerAddress

SCHEMES = ("mysql://", "mariadb://")
CONNECTION_PARAMETERS = frozenset({"socket", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key"})


def is_server_url(source: str) -> bool:
    """A server URL rather than binlog files."""
    return source.startswith(SCHEMES)


def _query(text: str) -> dict[str, str]:
    """``k=v&…`` with percent-escapes decoded (a ``+`` stays a ``+``: it may be in a socket path);
    a parameter given twice is refused (which one would win is a guess, e.g. two ssl-modes)."""
    query: dict[str, str] = {}
    for part in filter(None, text.split("&")):
        key, eq, value = part.partition("=")
        key = unquote(key)
        if not eq:
            raise UsageError(f"URL parameter {key!r} has no value (write {key}=VALUE)")
        if key in query:
            raise UsageError(f"URL parameter {key!r} is given twice")
        query[key] = unquote(value)
    return query


def server_from_url(
    url: str, parameters: frozenset[str] = frozenset()
) -> tuple[ServerAddress, list[str], dict[str, str]]:
    """The server, the databases the URL's path names (none: every user database), and the
    values of the command's own ``parameters`` the URL gives."""
    u = urlsplit(url)
    if u.password is not None:
        raise UsageError(
            "the server URL holds a password (visible in ps): give it with $MYSQL_PWD or an option file"
        )
    if u.fragment or url.endswith("#"):
        raise UsageError(f"{url!r}: '#' ends a URL's path: write a database name's # as %23")
    query = _query(u.query)
    known = CONNECTION_PARAMETERS | parameters
    if set(query) - known:
        raise UsageError(
            f"unknown URL parameter(s) {', '.join(sorted(set(query) - known))}: {', '.join(sorted(known))}"
        )
    try:
        opts = client_options(None)
        password = resolve_password(None, options=opts)
        server = ServerAddress(
            host=u.hostname or "127.0.0.1",
            port=u.port or 3306,
            user=unquote(u.username) if u.username else opts.get("user") or "root",
            password=password,
            unix_socket=query.get("socket"),
            ssl_ca=query.get("ssl-ca"),
            ssl_cert=query.get("ssl-cert"),
            ssl_key=query.get("ssl-key"),
            ssl_mode=query.get("ssl-mode"),
        )
    except (CredentialsError, ValueError) as e:
        raise UsageError(str(e)) from None
    databases = [unquote(d) for d in u.path.lstrip("/").split(",") if d]
    return server, databases, {k: v for k, v in query.items() if k in parameters}
