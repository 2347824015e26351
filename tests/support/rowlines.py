"""The row lines (``###``) ``binlake dump --positional`` prints beside those of an independent decoder
(``mariadb-binlog -vv``, MySQL's ``mysqlbinlog -vv``), and the differences between them we intend,
each with its reason: anything else is a decoder difference."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV = {**os.environ, "TZ": "UTC"}


def run(cmd: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, capture_output=True, env=ENV, timeout=120)


def row_lines(out: bytes) -> list[bytes]:
    return [line for line in out.split(b"\n") if line.startswith(b"###")]


def ours(path: str | Path, *options: str) -> bytes:
    """``binlake dump --positional`` of one file, in this process (checksums not verified: damaged
    files too)."""
    from tests.render.pinned import run_cli

    return run_cli(["dump", "--positional", "--no-verify-checksum", *options, str(path)])[1]


# ---- mariadb-binlog ------------------------------------------------------------------------------

_VALUE = re.compile(rb"^(###   @\d+=)(.*?)( /\* .*)$")


def normalise(theirs: bytes, ours: bytes) -> str | None:
    """None when two row lines agree; else why they differ (an unexplained reason fails the test).

    Known, intended differences:
    - signedness from MySQL 8 metadata: we print the unsigned value and ``UNSIGNED`` in the type;
      mariadb-binlog ignores the metadata and prints ``-x (unsigned)``.
    - BINARY(n) columns (binary collation known from metadata): we restore the trailing zero bytes
      the server strips, as SELECT returns them; mariadb-binlog prints the stored bytes.
    - YEAR 0: stored as byte 0 and meaning 0000; mariadb-binlog adds 1900 to it (anchor case 8).
    """
    if theirs == ours:
        return None
    if (
        theirs.endswith(b"=1900 /* YEAR meta=0 nullable=1 is_null=0 */")
        and ours.replace(b"=0000 ", b"=1900 ") == theirs
    ):
        return None
    if b" UNSIGNED meta=" in ours:
        ours_plain = ours.replace(b" UNSIGNED meta=", b" meta=")
        m_t, m_o = _VALUE.match(theirs), _VALUE.match(ours_plain)
        if m_t and m_o and m_t.group(3) == m_o.group(3):
            tv, ov = m_t.group(2), m_o.group(2)
            if tv == ov or tv.endswith(b" (" + ov + b")"):
                return None
    m_t, m_o = _VALUE.match(theirs), _VALUE.match(ours)
    if m_t and m_o and b"STRING(" in m_o.group(3) and m_t.group(3) == m_o.group(3):
        if m_o.group(2).startswith(m_t.group(2)[:-1]) and set(
            m_o.group(2)[len(m_t.group(2)) - 1 : -1].split(b"\\x00")
        ) <= {b""}:
            return None
    return "differs"


# ---- mysqlbinlog (MySQL 9) -----------------------------------------------------------------------

# mysqlbinlog 9 escapes these in quoted values; every other byte below 0x20 as \xHH
_MYSQL_ESCAPES = {b"b": 8, b"t": 9, b"n": 10, b"f": 12, b"r": 13, b"'": 39, b"\\": 92}
_MYSQL_ESCAPE = re.compile(rb"\\(x[0-9a-f]{2}|.)", re.S)
_OUR_ESCAPE = re.compile(rb"[\x00-\x1f]")
# a value, then the type comment: the last " /* " of the line
_LINE = re.compile(rb"^(###   @\d+=)(.*) (/\* [^*]*\*/)$", re.S)
_PARTITION = re.compile(
    rb"^### Extra row info for partitioning: (?:partition: (\d+)|source_partition: (\d+) target_partition: (\d+))$"
)
# mysqlbinlog has no printer for GEOMETRY (type 255): it prints this and abandons the event
GEOMETRY_UNPRINTABLE = b"!! Don't know how to handle column type=255 "
_VECTOR = re.compile(rb"VECTOR\((\d+)\) ")


def mysql_unescape(quoted: bytes) -> bytes:
    """The bytes of a value mysqlbinlog 9 printed between quotes (``\\'``, ``\\\\``, ``\\n``…)."""

    def one(m: re.Match[bytes]) -> bytes:
        e = m.group(1)
        if e[:1] == b"x" and len(e) == 3:
            return bytes([int(e[1:], 16)])
        if e in _MYSQL_ESCAPES:
            return bytes([_MYSQL_ESCAPES[e]])
        raise ValueError(f"unknown mysqlbinlog escape \\{e!r}")

    return _MYSQL_ESCAPE.sub(one, quoted)


def our_escape(raw: bytes) -> bytes:
    """Bytes as binlake (and mariadb-binlog) quote them: below 0x20 as ``\\xHH``, the rest as is.
    Not injective (the four bytes ``\\x0a`` print as a newline does), so theirs is brought to our
    form, never ours to theirs."""
    return _OUR_ESCAPE.sub(lambda m: b"\\x%02x" % m.group(0)[0], raw)


def _sql_string(text: bytes, pos: int, escaped: bool) -> tuple[bytes, int]:
    """A quoted string at ``pos`` (mysqlbinlog's escapes when ``escaped``; ours are unescaped
    paths); its bytes and the position after it."""
    assert text[pos : pos + 1] == b"'", text[pos:]
    i = pos + 1
    while text[i : i + 1] != b"'":
        i += 2 if escaped and text[i : i + 1] == b"\\" else 1
        if i >= len(text):
            raise ValueError(f"unterminated string in {text!r}")
    body = text[pos + 1 : i]
    return (mysql_unescape(body) if escaped else body), i + 1


_DECODE = json.JSONDecoder(parse_float=str, parse_int=str)  # numbers compared as text


def _json_value(text: bytes, pos: int, theirs: bool) -> tuple[Any, int]:
    """A partial-update value: mysqlbinlog writes a JSON string as an SQL string and an array or
    object as ``CAST('…' AS JSON)``; we write JSON text."""
    if theirs and text[pos : pos + 1] == b"'":
        raw, pos = _sql_string(text, pos, True)
        return raw.decode(), pos
    if theirs and text.startswith(b"CAST(", pos):
        raw, pos = _sql_string(text, pos + 5, True)
        assert text.startswith(b" AS JSON)", pos), text[pos:]
        return _DECODE.decode(raw.decode()), pos + 9
    s = text.decode("utf-8", "surrogateescape")
    prefix = len(text[:pos].decode("utf-8", "surrogateescape"))
    value, end = _DECODE.raw_decode(s, prefix)
    return value, len(s[:end].encode("utf-8", "surrogateescape"))


_CALL = re.compile(rb"\s*JSON_(REPLACE|INSERT|REMOVE)\(")
_COLUMN = re.compile(rb"\s*@\d+")
_COMMA = re.compile(rb"\s*,\s*")
_CLOSE = re.compile(rb"\s*\)")


def json_diffs(text: bytes, theirs: bool) -> list[tuple[str, bytes, Any]]:
    """(operation, path, value) in the order applied, from nested ``JSON_op(…)`` calls (mysqlbinlog
    groups a run of one operation into one call; we write one call per diff)."""

    def expr(pos: int) -> tuple[list[tuple[str, bytes, Any]], int]:
        if m := _COLUMN.match(text, pos):
            return [], m.end()
        m = _CALL.match(text, pos)
        if m is None:
            raise ValueError(f"not a partial JSON update: {text[pos:]!r}")
        op = m.group(1).decode()
        diffs, pos = expr(m.end())
        while c := _COMMA.match(text, pos):
            path, pos = _sql_string(text, c.end(), theirs)
            value = None
            if op != "REMOVE":
                c = _COMMA.match(text, pos)
                assert c, text[pos:]
                value, pos = _json_value(text, c.end(), theirs)
            diffs.append((op, path, value))
        close = _CLOSE.match(text, pos)
        assert close, text[pos:]
        return diffs, close.end()

    diffs, end = expr(0)
    assert end == len(text), text[end:]
    return diffs


def normalise_mysql(theirs: bytes, ours: bytes) -> str | None:
    """None when a row line of mysqlbinlog 9 and ours agree; else why not. Intended differences:

    - quoting: mysqlbinlog 9 writes ``\\'``, ``\\\\``, ``\\n``, ``\\t``…; we write ``'`` and ``\\``
      as they are and control bytes as ``\\xHH`` (as mariadb-binlog): its value is unescaped and
      written our way;
    - a JSON document that is a string (or opaque) scalar: mysqlbinlog prints its content unquoted;
      we print JSON text, as SELECT returns it;
    - a partial JSON update: mysqlbinlog spreads it over lines, groups a run of one operation in one
      call and writes values as SQL (``'text'``, ``CAST('[…]' AS JSON)``); we write one call per
      diff with JSON text values: the diffs are compared (numbers as text);
    - VECTOR: mysqlbinlog prints ``%.5e`` and ``VECTOR(dimension)``; we print each float32's
      shortest exact text and ``VECTOR``: ours, printed with ``%.5e``, must be theirs;
    - then the mariadb-binlog differences (``normalise``): signedness, BINARY padding, YEAR 0.
    """
    m_t, m_o = _LINE.match(theirs), _LINE.match(ours)
    if not (m_t and m_o and m_t.group(1) == m_o.group(1)):
        return None if theirs == ours else "differs"
    # no shortcut on equal lines: its \n is a newline, ours two characters
    tv, tc, ov, oc = m_t.group(2), m_t.group(3), m_o.group(2), m_o.group(3)
    if tc.startswith(b"/* VECTOR("):
        return _vector(tv, tc, ov, oc)
    if tc.startswith(b"/* JSON ") and tc == oc:
        if tv.startswith(b"JSON_") and ov.startswith(b"JSON_"):
            return None if json_diffs(tv, True) == json_diffs(ov, False) else "partial JSON differs"
        if tv[:1] == b"'" and ov[:2] == b"'\"" and ov[-2:] == b"\"'":
            raw = mysql_unescape(tv[1:-1])
            return None if raw.decode() == json.loads(ov[1:-1].decode()) else "JSON string differs"
    if tv[:1] == b"'" and tv[-1:] == b"'" and len(tv) > 1:
        theirs = m_t.group(1) + b"'" + our_escape(mysql_unescape(tv[1:-1])) + b"' " + tc
    return normalise(theirs, ours)


def _vector(tv: bytes, tc: bytes, ov: bytes, oc: bytes) -> str | None:
    m = _VECTOR.match(tc, 3)
    assert m
    if tc.replace(m.group(0), b"VECTOR ", 1) != oc:
        return "type comment differs"
    if tv == ov == b"NULL":
        return None
    if not (ov[:1] == b"[" and ov[-1:] == b"]"):
        return "not a vector"
    mine = [b"%.5e" % float(x) for x in ov[1:-1].split(b",")]
    if len(mine) != int(m.group(1)):
        return "dimension differs"
    return None if b"[" + b",".join(mine) + b"]" == tv else "values differ at mysqlbinlog's precision"


def row_blocks(out: bytes) -> list[list[bytes]]:
    """The row lines of each statement: runs of consecutive ``###`` lines, a run after a rows event
    without STMT_END_F joined to the next (mysqlbinlog prints a statement's events together at its
    end; we print each event's rows after its header)."""
    blocks: list[list[bytes]] = []
    run_: list[bytes] = []
    header = b""
    open_statement = False
    for line in out.split(b"\n"):
        if line.startswith(b"###"):
            run_.append(line)
            continue
        if run_:
            if open_statement:
                blocks[-1] += run_
            else:
                blocks.append(run_)
            open_statement = b"_rows" in header.lower() and b"STMT_END_F" not in header
            run_ = []
        if line.startswith(b"#") and not line.startswith(b"# at "):
            header = line
    if run_:
        if open_statement:
            blocks[-1] += run_
        else:
            blocks.append(run_)
    return blocks


@dataclass
class Comparison:
    """mysqlbinlog's row lines beside ours, event by event."""

    compared: int = 0  # row lines found equal (after normalisation)
    unprintable: int = 0  # our lines of events mysqlbinlog abandoned at a GEOMETRY column
    partitions: list[tuple[int | None, int]] = field(default_factory=list)  # (source, target) by event
    bad: list[tuple[bytes, bytes, str]] = field(default_factory=list)


def _their_block(block: list[bytes]) -> tuple[list[bytes], list[tuple[int | None, int]]]:
    """A mysqlbinlog statement's row lines with its events' partition lines taken out and the
    continuation lines of a partial JSON update joined to their value line."""
    lines: list[bytes] = []
    parts: list[tuple[int | None, int]] = []
    for line in block:
        if m := _PARTITION.match(line):
            parts.append((None, int(m.group(1))) if m.group(1) else (int(m.group(2)), int(m.group(3))))
        elif line.startswith(b"###      ") and lines:
            lines[-1] += b" " + line[9:]
        else:
            lines.append(line)
    return lines, parts


def compare_mysql(theirs_out: bytes, ours_out: bytes) -> Comparison:
    """Every rows event's lines, mysqlbinlog's and ours, in order. Where mysqlbinlog meets a GEOMETRY
    column it prints that it cannot and stops the event: our lines before it are compared, ours from
    it on are counted as ``unprintable``."""
    theirs_blocks, ours_blocks = row_blocks(theirs_out), row_blocks(ours_out)
    result = Comparison()
    if len(theirs_blocks) != len(ours_blocks):
        result.bad.append((b"", b"", f"{len(ours_blocks)} rows events, mysqlbinlog {len(theirs_blocks)}"))
        return result
    for tb, ob in zip(theirs_blocks, ours_blocks, strict=True):
        lines, parts = _their_block(tb)
        result.partitions += parts
        cut = next((i for i, line in enumerate(lines) if GEOMETRY_UNPRINTABLE in line), None)
        if cut is not None:
            at = lines[cut].split(b"=", 1)[0] + b"="
            if len(ob) <= cut or not ob[cut].startswith(at) or b"/* GEOMETRY " not in ob[cut]:
                result.bad.append((lines[cut], ob[cut] if len(ob) > cut else b"", "not a GEOMETRY column"))
            result.unprintable += len(ob) - cut
            lines, ob = lines[:cut], ob[:cut]
        if len(lines) != len(ob):
            result.bad.append((b"\n".join(lines), b"\n".join(ob), "row line counts differ"))
            continue
        for t, o in zip(lines, ob, strict=True):
            why = normalise_mysql(t, o)
            if why:
                result.bad.append((t, o, why))
            else:
                result.compared += 1
    return result


def our_partitions(path: str | Path) -> list[tuple[int | None, int]]:
    """(source, target) partition of each rows event that carries one, from ``binlake dump --format
    json`` (the text dump, like mariadb-binlog, does not print it)."""
    from tests.render.pinned import run_cli

    out = run_cli(["dump", "--format", "json", "--no-verify-checksum", str(path)])[1]
    parts = []
    for line in out.splitlines():
        body = json.loads(line).get("body") or {}
        if "partition_id" in body:
            parts.append((body.get("source_partition_id"), body["partition_id"]))
    return parts
