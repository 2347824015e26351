"""What replicas ask before a dump, answered from the served directory: a table of statements
(pattern -> answer) and a table of the server variables it reports. Anything else is an error
packet, as a server answers a statement it does not support; SET is accepted, and the user
variables a replica sets (``@master_binlog_checksum``, ``@mariadb_slave_capability``,
``@master_heartbeat_period``) are kept for its dump."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from binlake.errors import BinlogError
from binlake.serve.directory import BinlogDirectory

ER_UNKNOWN_SYSTEM_VARIABLE = 1193
ER_NOT_SUPPORTED_YET = 1235
ER_NO_BINARY_LOGGING = 1381
ER_ERROR_ON_READ = 1024
SERVER_NAME = "binlake serve"


@dataclass(frozen=True, slots=True)
class Rows:
    """A result set: column names and rows of text values (None is NULL)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str | int | None, ...], ...]


@dataclass(frozen=True, slots=True)
class Done:
    """An OK packet."""


@dataclass(frozen=True, slots=True)
class Refused:
    """An ERR packet."""

    code: int
    message: str


Answer = Rows | Done | Refused


@dataclass
class QueryContext:
    """The served directory, how this server presents itself, and the connection's user variables
    (names lower-case, values as text)."""

    directory: BinlogDirectory
    server_id: int = 1
    version: str | None = None  # None: the newest file's server version, marked as binlake's
    port: int = 0
    user_vars: dict[str, str] = field(default_factory=dict)

    def server_version(self) -> str:
        if self.version:
            return self.version
        try:
            fmt = self.directory.newest_format()
        except (BinlogError, OSError):  # the directory is unreadable now: say so when asked for files
            fmt = None
        base = fmt.fde.server_version if fmt is not None and fmt.fde is not None else "5.7.44"
        base = base.split("-", 1)[0] + ("-MariaDB" if "mariadb" in base.lower() else "")
        return f"{base}-binlake"

    def server_uuid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"binlake-serve:{self.directory.path}:{self.server_id}"))

    def gtid_executed(self) -> str:
        try:
            executed = self.directory.executed_gtids()
        except (BinlogError, OSError):
            executed = None
        return str(executed) if executed is not None else ""

    def gtid_mode(self) -> str:
        """ON when the series carries MySQL GTIDs (a replica may then use MASTER_AUTO_POSITION)."""
        return "ON" if self.gtid_executed() else "OFF"

    def checksum(self) -> str:
        try:
            fmt = self.directory.newest_format()
        except (BinlogError, OSError):
            fmt = None
        return fmt.checksum_name if fmt is not None else "NONE"


# The server variables reported, by lower-case name. What a replica reads to decide how to talk.
VARIABLES: dict[str, Callable[[QueryContext], str]] = {
    "version": QueryContext.server_version,
    "version_comment": lambda c: SERVER_NAME,
    "binlog_checksum": QueryContext.checksum,
    "master_verify_checksum": lambda c: "OFF",
    "server_id": lambda c: str(c.server_id),
    "server_uuid": QueryContext.server_uuid,
    "log_bin": lambda c: "ON",
    "binlog_format": lambda c: "ROW",
    "binlog_row_image": lambda c: "FULL",
    "binlog_row_metadata": lambda c: "MINIMAL",
    "gtid_mode": QueryContext.gtid_mode,
    "enforce_gtid_consistency": QueryContext.gtid_mode,
    "gtid_executed": QueryContext.gtid_executed,
    "gtid_strict_mode": lambda c: "OFF",
    "gtid_domain_id": lambda c: "0",
    "port": lambda c: str(c.port),
    "hostname": lambda c: "binlake",
    "autocommit": lambda c: "1",
    "lower_case_table_names": lambda c: "0",
    "max_allowed_packet": lambda c: str(64 << 20),
    "net_write_timeout": lambda c: "60",
    "net_read_timeout": lambda c: "30",
    "wait_timeout": lambda c: "28800",
    "character_set_server": lambda c: "utf8mb4",
    "collation_server": lambda c: "utf8mb4_general_ci",
    "character_set_client": lambda c: "utf8mb4",
    "character_set_connection": lambda c: "utf8mb4",
    "character_set_results": lambda c: "utf8mb4",
    "time_zone": lambda c: "SYSTEM",
    "system_time_zone": lambda c: "UTC",
    "sql_mode": lambda c: "",
    "tx_isolation": lambda c: "REPEATABLE-READ",
    "transaction_isolation": lambda c: "REPEATABLE-READ",
    "rpl_semi_sync_master_enabled": lambda c: "OFF",
}

_SELECT_VARS = re.compile(r"^select\s+(?P<list>@.*?)(?:\s+limit\s+\d+)?$", re.I | re.S)
_VAR_ITEM = re.compile(
    r"^(?P<ref>@@(?:(?P<scope>global|session|local)\.)?(?P<name>[a-z_][a-z0-9_]*)|@(?P<user>[a-z_][a-z0-9_.$]*))"
    r"(?:\s+(?:as\s+)?(?P<alias>`[^`]*`|[a-z_][a-z0-9_]*))?$",
    re.I,
)
_SHOW_VARS = re.compile(
    r"^show\s+(?:(?:global|session)\s+)?variables(?:\s+(?:like|where\s+variable_name\s*=)\s*'(?P<pat>[^']*)')?$",
    re.I,
)
_SET_ITEM = re.compile(
    r"\s*(?P<lhs>@@?(?:(?:global|session|local)\.)?[a-z_][a-z0-9_.$]*|[a-z_][a-z0-9_]*)\s*(?::?=|\s)\s*"
    r"(?P<rhs>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|@@(?:global\.|session\.)?[a-z_][a-z0-9_]*|[^,]+?)"
    r"\s*(?:,|$)",
    re.I | re.S,
)


def answer(sql: str, ctx: QueryContext) -> Answer:
    """The answer to one statement."""
    text = _strip(sql)
    low = text.lower()
    for pattern, fn in STATEMENTS:
        m = pattern.match(low)
        if m:
            try:
                return fn(text, ctx)
            except (BinlogError, OSError) as e:
                return Refused(ER_ERROR_ON_READ, f"cannot read the binlog directory: {e}")
    return Refused(
        ER_NOT_SUPPORTED_YET, f"{SERVER_NAME} serves binlogs only: {_shorten(text)!r} is not supported"
    )


def _strip(sql: str) -> str:
    """The statement without comments, trailing semicolons and outer whitespace (version comments
    ``/*!40101 … */`` keep their content, as MySQL runs it)."""
    sql = re.sub(r"/\*[!M]\d*\s*(.*?)\*/", r"\1", sql, flags=re.S)
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)
    return sql.strip().rstrip(";").strip()


def _shorten(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _select_vars(text: str, ctx: QueryContext) -> Answer:
    m = _SELECT_VARS.match(text)
    assert m is not None
    names: list[str] = []
    values: list[str | int | None] = []
    for item in _split_commas(m.group("list")):
        v = _VAR_ITEM.match(item.strip())
        if v is None:
            return Refused(ER_NOT_SUPPORTED_YET, f"{SERVER_NAME} cannot evaluate {_shorten(item.strip())!r}")
        alias = v.group("alias")
        names.append(alias.strip("`") if alias else v.group("ref"))
        if v.group("user") is not None:
            values.append(ctx.user_vars.get(v.group("user").lower()))
            continue
        name = v.group("name").lower()
        fn = VARIABLES.get(name)
        if fn is None:
            return Refused(ER_UNKNOWN_SYSTEM_VARIABLE, f"Unknown system variable '{name}'")
        values.append(fn(ctx))
    return Rows(tuple(names), (tuple(values),))


def _select_version(text: str, ctx: QueryContext) -> Answer:
    return Rows((text[len("select ") :].strip(),), ((ctx.server_version(),),))


def _select_literal(text: str, ctx: QueryContext) -> Answer:
    value = text[len("select ") :].strip()
    return Rows((value,), ((value,),))


def _show_variables(text: str, ctx: QueryContext) -> Answer:
    m = _SHOW_VARS.match(text)
    assert m is not None
    pat = m.group("pat")
    like = _like(pat) if pat is not None else None
    rows = tuple(
        (name, fn(ctx)) for name, fn in sorted(VARIABLES.items()) if like is None or like.fullmatch(name)
    )
    return Rows(("Variable_name", "Value"), rows)


def _like(pattern: str) -> re.Pattern[str]:
    out = []
    escaped = False
    for ch in pattern.lower():
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.S)


def _binary_logs(text: str, ctx: QueryContext) -> Answer:
    files = ctx.directory.files()
    if not files:
        return Refused(ER_NO_BINARY_LOGGING, "You are not using binary logging")
    rows: list[tuple[str | int | None, ...]] = []
    for f in files:
        end = ctx.directory.complete_end(f)[0] if f is files[-1] else f.stat().st_size
        rows.append((f.name, end))
    return Rows(("Log_name", "File_size"), tuple(rows))


def _master_status(text: str, ctx: QueryContext) -> Answer:
    status = ctx.directory.status()
    columns = ("File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set")
    if status is None:
        return Rows(columns, ())
    return Rows(columns, ((status[0], status[1], "", "", ctx.gtid_executed()),))


def _set(text: str, ctx: QueryContext) -> Answer:
    """SET of anything is accepted; user variables are kept (a server variable read on the right
    is evaluated: ``SET @master_binlog_checksum = @@global.binlog_checksum``)."""
    rest = text[3:].strip()
    for m in _SET_ITEM.finditer(rest):
        lhs, rhs = m.group("lhs"), m.group("rhs").strip()
        if not lhs.startswith("@") or lhs.startswith("@@"):
            continue  # a session setting (NAMES, autocommit, ...): nothing to keep
        ctx.user_vars[lhs[1:].lower()] = _value(rhs, ctx)
    return Done()


def _value(rhs: str, ctx: QueryContext) -> str:
    if rhs[:1] in ("'", '"'):
        inner = rhs[1:-1]
        return re.sub(r"\\(.)", r"\1", inner.replace(rhs[0] * 2, rhs[0]))
    if rhs.startswith("@@"):
        name = rhs.split(".")[-1].lstrip("@").lower()
        fn = VARIABLES.get(name)
        return fn(ctx) if fn is not None else ""
    return rhs


def _split_commas(text: str) -> list[str]:
    return [part for part in re.split(r",(?=(?:[^'`]*['`][^'`]*['`])*[^'`]*$)", text) if part.strip()]


def _ok(text: str, ctx: QueryContext) -> Answer:
    return Done()


# Statement table: the first pattern matching the lower-cased statement answers it.
STATEMENTS: tuple[tuple[re.Pattern[str], Callable[[str, QueryContext], Answer]], ...] = (
    (re.compile(r"^select\s+@"), _select_vars),
    (re.compile(r"^select\s+(version|database|user|current_user)\(\)$"), _select_version),
    (re.compile(r"^select\s+(\d+|'[^']*')$"), _select_literal),
    (re.compile(r"^show\s+(global\s+|session\s+)?variables\b"), _show_variables),
    (re.compile(r"^show\s+(binary|master)\s+logs$"), _binary_logs),
    (re.compile(r"^show\s+(master|binary\s+log)\s+status$"), _master_status),
    (re.compile(r"^set\s"), _set),
    (re.compile(r"^(use|begin|commit|rollback)\b"), _ok),
)
