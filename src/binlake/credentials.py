"""Where passwords come from, and keeping them out of argv, logs, errors and files.

No sockets and no Spark here: the replica CLI (``binlake mirror``/``tail``) and the JDBC sinks both
use it.

MySQL-style connection settings (``resolve_password``, ``client_options``) follow the MySQL client's
documented precedence, "options on the command line take precedence over values specified in option
files and environment variables, and values in option files take precedence over values in
environment variables":

1. the command line: ``-p``/``--password`` without a value prompts (only when stdin is a terminal),
   ``--password=VALUE`` is taken as given (visible in ``ps``: avoid);
2. the option file: ``--defaults-file FILE`` if given, else ``~/.my.cnf`` (none with
   ``--no-defaults``), groups ``[client]`` then ``[binlake]`` (a later group wins, as a program's own
   group does for the MySQL tools); ``password`` without a value prompts like ``-p``;
3. the ``MYSQL_PWD`` environment variable;
4. otherwise no password.

Unlike the MySQL client, the system-wide files (``/etc/my.cnf``, ``/etc/mysql/my.cnf``) and the
obfuscated ``~/.mylogin.cnf`` are not read: they configure the local server, not a replica's login.
Like it, a world-writable option file is ignored (anyone could point the client elsewhere).
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

CLIENT_GROUPS = ("client", "binlake")
ASK = "\0ask"  # a password value meaning "prompt for it" (``-p`` without a value)
MASK = "***"


class CredentialsError(ValueError):
    """A password or option file could not be had; the message is one line and never holds a secret."""


# -- option files ----------------------------------------------------------------------------

_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "r": "\r", "\\": "\\", "s": " "}


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), value)


def _value(raw: str) -> str:
    """An option's value as MySQL reads it: quotes keep ``#`` and spaces, ``#`` starts a comment
    otherwise, escapes (``\\n``, ``\\s``, ``\\\\``…) are decoded."""
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        while end > 0 and raw[end - 1] == "\\":
            end = raw.find(raw[0], end + 1)
        if end > 0:
            return _unescape(raw[1:end])
    return _unescape(raw.split("#", 1)[0].rstrip())


def _option_lines(path: Path, depth: int = 0) -> Iterable[tuple[str | None, str, str | None]]:
    """(group, key, value) of every option line in the file and the files it includes."""
    if depth > 10:
        raise CredentialsError(f"{path}: !include nested too deep")
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise CredentialsError(f"cannot read the option file {path}: {e.strerror}") from None
    if mode & stat.S_IWOTH:
        log.warning("ignoring the world-writable option file %s", path)
        return
    group: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("!include "):
            yield from _option_lines(path.parent / line[9:].strip(), depth + 1)
        elif line.startswith("!includedir "):
            folder = path.parent / line[12:].strip()
            for inc in sorted(folder.glob("*.cnf")) if folder.is_dir() else ():
                yield from _option_lines(inc, depth + 1)
        elif line.startswith("["):
            if not line.endswith("]"):
                raise CredentialsError(f"{path}, line {number}: a group name must end with ']'")
            group = line[1:-1].strip().lower()
        else:
            key, eq, raw = line.partition("=")
            key = key.strip().lower().replace("_", "-")
            key = key.removeprefix("loose-")
            yield group, key, (_value(raw) if eq else None)


def read_option_file(
    path: str | os.PathLike[str], groups: Iterable[str] = CLIENT_GROUPS
) -> dict[str, str | None]:
    """The options of ``groups`` in a MySQL option file (``my.cnf`` syntax, ``!include`` and
    ``!includedir`` followed). Keys use dashes (``ssl_ca`` and ``loose-ssl-ca`` read as ``ssl-ca``); a
    key without ``=`` maps to None. A later group in ``groups`` wins over an earlier one, and within a
    group the last line wins, as in MySQL. A missing or unreadable file is a ``CredentialsError``."""
    order = {g.lower(): i for i, g in enumerate(groups)}
    found: dict[str, tuple[int, str | None]] = {}
    for group, key, value in _option_lines(Path(path)):
        rank = order.get(group or "")
        if rank is not None and rank >= found.get(key, (-1, None))[0]:
            found[key] = (rank, value)
    return {k: v for k, (_, v) in found.items()}


def client_options(
    defaults_file: str | os.PathLike[str] | None = None,
    *,
    no_defaults: bool = False,
    home: str | os.PathLike[str] | None = None,
) -> dict[str, str | None]:
    """The ``[client]``/``[binlake]`` options that apply: ``defaults_file`` alone when given (it must
    exist), else ``~/.my.cnf`` when it exists, else none; ``no_defaults`` reads no file."""
    if no_defaults:
        return {}
    if defaults_file is not None:
        return read_option_file(defaults_file)
    mine = Path(home if home is not None else Path.home()) / ".my.cnf"
    return read_option_file(mine) if mine.is_file() else {}


# -- passwords -------------------------------------------------------------------------------


def prompt_password(
    what: str = "Enter password: ",
    *,
    interactive: Callable[[], bool] | None = None,
    ask: Callable[[str], str] = getpass.getpass,
) -> str:
    """Ask on the terminal, without echo. Without a terminal on stdin (a pipe, cron, CI) this fails
    at once instead of hanging or reading the password from the data stream."""
    is_tty = interactive() if interactive is not None else sys.stdin is not None and sys.stdin.isatty()
    if not is_tty:
        raise CredentialsError(
            "-p asks for the password, but stdin is not a terminal: "
            "give it with MYSQL_PWD or an option file (--defaults-file)"
        )
    return ask(what)


def resolve_password(
    command_line: str | None = None,
    *,
    options: Mapping[str, str | None] | None = None,
    environ: Mapping[str, str] | None = None,
    prompt: Callable[[], str] = prompt_password,
) -> str:
    """The password by the MySQL client's precedence (see the module docstring): ``command_line``
    (``ASK`` to prompt), then ``options["password"]`` of the option file (None: given without a value,
    prompt), then ``$MYSQL_PWD``; "" when none gives one."""
    if command_line is not None:
        return prompt() if command_line == ASK else command_line
    if options and "password" in options:
        value = options["password"]
        return prompt() if value is None else value
    env = os.environ if environ is None else environ
    return env.get("MYSQL_PWD", "")


def secret_from(
    env: str | None = None,
    file: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """A secret named by an environment variable or held in a file (a Docker/Kubernetes secret), so
    that it never sits in a URL, argv or a config that gets logged.

    ``env``: the variable's name (it must be set; an empty value is an empty secret). ``file``: its
    contents less one trailing newline. Naming both is an error (which one would win is a guess);
    naming neither gives None. Errors name the variable or file, never the value."""
    if env is not None and file is not None:
        raise CredentialsError("give the secret by an environment variable or by a file, not both")
    if env is not None:
        values = os.environ if environ is None else environ
        if env not in values:
            raise CredentialsError(f"the environment variable {env} is not set")
        return values[env]
    if file is not None:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as e:
            raise CredentialsError(f"cannot read the secret file {file}: {e.strerror}") from None
        return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
    return None


# -- redaction -------------------------------------------------------------------------------

_SECRET_KEY = r"[\w.-]*(?:password|passwd|pwd|secret|token)[\w.-]*"
_PATTERNS = (
    # scheme://user:password@host (userinfo; the password runs to the last @ before the path)
    (re.compile(r"(://[^/:@\s]*:)[^/\s]*(?=@)"), rf"\1{MASK}"),
    # Oracle thin: jdbc:oracle:thin:user/password@host
    (re.compile(r"(:thin:[^/@:\s]*/)[^@\s]*(?=@)", re.I), rf"\1{MASK}"),
    # 'password': 'x'  /  "password" = "x"  (dicts, JSON, quoted options)
    (re.compile(rf"""(["']?{_SECRET_KEY}["']?\s*[:=]\s*)(["'])(?:\\.|(?!\2).)*\2""", re.I), rf"\1\2{MASK}\2"),
    # password=x in query strings, JDBC properties (?a=1&password=x;...) and free text
    (re.compile(rf"((?:^|[\s?&;,(]){_SECRET_KEY}=)[^&;,\s)\"']*", re.I), rf"\1{MASK}"),
)


def redact(text: str) -> str:
    """``text`` with every password-like value replaced by ``***``: URL userinfo passwords
    (``user:pw@``, Oracle's ``user/pw@``), and values of keys containing password, passwd, pwd,
    secret or token, whether ``key=value`` (query strings, ``;``-separated JDBC properties, free text)
    or quoted (``'password': 'x'``). Names, hosts and other parameters stay readable. For logs and
    error messages; a value with unquoted spaces is masked up to the first space only."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redacted_url(url: str) -> str:
    """A connection URL fit for a log line or an error: ``redact`` of one URL, e.g.
    ``jdbc:postgresql://u:pw@h/db?password=pw&ssl=true`` → ``jdbc:postgresql://u:***@h/db?password=***&ssl=true``."""
    return redact(url)
