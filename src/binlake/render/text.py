"""mysqlbinlog-style text (``--base64-output=decode-rows -vv``), so a DBA can diff the two.

Times print in UTC (mysqlbinlog uses the client's zone: run it with ``TZ=UTC`` to compare).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from binlake.dialects.mysql import comment_text, quote_ident
from binlake.events import control, gtid, payload, query, rows, table_map, vendor
from binlake.events.base import Event, FormatDescription, UnknownEvent
from binlake.events.types import EventType
from binlake.render.rowtext import ImageTextCache
from binlake.render.values import text_value, type_comment
from binlake.values.columns import ColumnDef

DELIM = "/*!*/;"


def _table_label(tm: table_map.TableMap) -> str:
    """A table in dump text's comment lines (``###`` heads, Table_map): quoted as mariadb-binlog
    quotes it (a backquote doubled), control characters escaped (``comment_text``)."""
    return comment_text(f"{quote_ident(tm.database)}.{quote_ident(tm.table)}")


@functools.lru_cache(maxsize=4096)
def _stamp(ts: int) -> str:
    t = dt.datetime.fromtimestamp(ts, dt.UTC)
    return f"{t:%y%m%d} {t.hour:2d}:{t:%M:%S}"


def _header_line(ev: Event, summary: str) -> str:
    crc = f" CRC32 0x{ev.checksum:08x}" if ev.checksum is not None else ""
    h = ev.header
    return f"#{_stamp(h.timestamp)} server id {h.server_id}  end_log_pos {h.log_pos}{crc} \t{summary}"


def _label(col: ColumnDef, positional: bool) -> str:
    return f"@{col.index + 1}" if positional or col.name is None else f"`{col.name}`"


def _image_lines(image: list[Any], cols: list[ColumnDef], verbosity: int, positional: bool) -> Iterator[str]:
    for col, value in zip(cols, image, strict=True):
        if value is rows.ABSENT:
            continue
        line = f"###   {_label(col, positional)}={text_value(value, col)}"
        if verbosity >= 2:
            null = 1 if value is None else 0
            line += f" /* {type_comment(col)} meta={col.meta} nullable={int(col.nullable)} is_null={null} */"
        yield line


def reference_rows_lines(body: rows.Rows, verbosity: int = 2, positional: bool = False) -> Iterator[str]:
    """The per-value path (one call per value): the reference the per-layout formatter equals."""
    tm = body.table
    if tm is None or body.undecoded_reason:
        yield _undecoded_line(body)
        return
    cols = tm.columns
    for before, after in body.rows:
        heads = _heads(body.operation, _table_label(tm))
        for head, image in zip(heads, _images(body.operation, before, after), strict=True):
            yield from head
            yield from _image_lines(image, cols, verbosity, positional)  # type: ignore[arg-type]


_FORMATTERS = ImageTextCache()


def rows_lines(body: rows.Rows, verbosity: int = 2, positional: bool = False) -> Iterator[str]:
    """The row lines of a rows event, every image by its layout's generated formatter."""
    yield from _rows_text(body, verbosity, positional)


def _rows_text(body: rows.Rows, verbosity: int, positional: bool) -> list[str]:
    tm = body.table
    if tm is None or body.undecoded_reason:
        return [_undecoded_line(body)]
    image_text = _FORMATTERS.get(tm, verbosity, positional)
    out: list[str] = []
    append = out.append
    heads = _heads(body.operation, _table_label(tm))
    rows_text = getattr(image_text, "rows", None)
    if rows_text is not None:  # the compiled formatter: the same loop in C
        which = _WHICH.get(body.operation, 2)
        rows_text(body.rows, which, list(heads[0]), list(heads[1]) if which == 2 else [], out)
        return out
    if body.operation == "insert":
        (h_after,) = heads
        for _, after in body.rows:
            out += h_after
            image_text(after, out)  # type: ignore[arg-type]
    elif body.operation == "delete":
        (h_before,) = heads
        for before, _ in body.rows:
            out += h_before
            image_text(before, out)  # type: ignore[arg-type]
    else:
        h_before, h_after = heads
        for before, after in body.rows:
            out += h_before
            image_text(before, out)  # type: ignore[arg-type]
            append(h_after[0])
            image_text(after, out)  # type: ignore[arg-type]
    return out


_WHICH = {"delete": 0, "insert": 1}  # the image a row's text shows (an update: both, 2)


def _undecoded_line(body: rows.Rows) -> str:
    return f"# rows not decoded: {body.undecoded_reason} ({len(body.raw_rows or b'')} bytes kept)"


def _heads(operation: str, name: str) -> tuple[tuple[str, ...], ...]:
    """The lines before each image of a row: (before's, after's) for an update."""
    if operation == "insert":
        return ((f"### INSERT INTO {name}", "### SET"),)
    if operation == "delete":
        return ((f"### DELETE FROM {name}", "### WHERE"),)
    return ((f"### UPDATE {name}", "### WHERE"), ("### SET",))


def _images(operation: str, before: Any, after: Any) -> tuple[Any, ...]:
    if operation == "insert":
        return (after,)
    if operation == "delete":
        return (before,)
    return (before, after)


_MARIA_GTID_MARKS = (
    (gtid.MARIA_FL_DDL, " ddl"),
    (gtid.MARIA_FL_TRANSACTIONAL, " trans"),
    (gtid.MARIA_FL_WAITED, " waited"),
)

_ROWS_NAMES = {"insert": "Write_rows", "update": "Update_rows", "delete": "Delete_rows"}


def _describe(ev: Event) -> tuple[str, list[str]]:
    """(summary after the header line, following lines) for one event."""
    b = ev.body
    if isinstance(b, (FormatDescription, control.StartV3)):
        created = f" created {_stamp(b.create_timestamp)}" if b.create_timestamp else ""
        return (f"Start: binlog v {b.binlog_version}, server v {b.server_version}{created}", [])
    if isinstance(b, query.Query):
        lines = []
        if b.database:
            lines.append(f"use `{b.database}`{DELIM}")
        lines.append(f"SET TIMESTAMP={ev.header.timestamp}{DELIM}")
        lines += [b.query, DELIM]
        return (f"Query\tthread_id={b.thread_id}\texec_time={b.exec_time}\terror_code={b.error_code}", lines)
    if isinstance(b, table_map.TableMap):
        return (f"Table_map: {_table_label(b)} mapped to number {b.table_id}", [])
    if isinstance(b, rows.Rows):
        flags = " flags: STMT_END_F" if b.end_of_statement else ""
        return (f"{_ROWS_NAMES[b.operation]}: table id {b.table_id}{flags}", [])
    if isinstance(b, control.Xid):
        return (f"Xid = {b.xid}", [f"COMMIT{DELIM}"])
    if isinstance(b, gtid.Gtid):
        parts = [f"last_committed={b.last_committed}", f"sequence_number={b.sequence_number}"]
        for attr in ("original_commit_timestamp", "immediate_commit_timestamp", "transaction_length"):
            if getattr(b, attr) is not None:
                parts.append(
                    f"{attr.replace('commit_timestamp', 'committed_timestamp') if attr.startswith('original') else attr}={getattr(b, attr)}"
                )
        head = "Anonymous_GTID" if b.anonymous else "GTID"
        nxt = "ANONYMOUS" if b.anonymous else b.gtid
        return (head + "\t" + "\t".join(parts), [f"SET @@SESSION.GTID_NEXT= '{nxt}'{DELIM}"])
    if isinstance(b, gtid.PreviousGtids):
        return ("Previous-GTIDs", [f"# {line}" for line in (str(b) or "[empty]").split("\n")])
    if isinstance(b, gtid.MariaGtid):
        marks = "".join(text for flag, text in _MARIA_GTID_MARKS if b.flags & flag)
        cid = f" cid={b.commit_id}" if b.commit_id is not None else ""
        lines = [f"/*!100001 SET @@session.gtid_domain_id={b.domain_id}*/{DELIM}"]
        if not b.standalone:
            lines.append(f"START TRANSACTION{DELIM}")
        return (f"GTID {b.gtid}{cid}{marks}", lines)
    if isinstance(b, gtid.MariaGtidList):
        return (f"Gtid list [{b}]", [])
    if isinstance(b, gtid.MariaBinlogCheckpoint):
        return (f"Binlog checkpoint {b.file}", [])
    if isinstance(b, control.Rotate):
        return (f"Rotate to {b.next_file}  pos: {b.position}", [])
    if isinstance(b, control.Stop):
        return ("Stop", [])
    if isinstance(b, control.Intvar):
        return ("Intvar", [f"SET {b.kind_name}={b.value}{DELIM}"])
    if isinstance(b, control.Rand):
        return ("Rand", [f"SET @@RAND_SEED1={b.seed1}, @@RAND_SEED2={b.seed2}{DELIM}"])
    if isinstance(b, control.UserVar):
        value = "NULL" if b.is_null else f"X'{(b.value or b'').hex()}'"
        return ("User_var", [f"SET @`{b.name}`:={value}{DELIM}"])
    if isinstance(b, control.RowsQuery):
        name = "Annotate_rows:" if ev.type_code == EventType.MARIA_ANNOTATE_ROWS else "Rows_query"
        return (name, [f"#Q> {line}" for line in b.query.split("\n")])
    if isinstance(b, control.XaPrepare):
        return (f"XA PREPARE X'{b.gtrid.hex()}',X'{b.bqual.hex()}',{b.format_id}", [])
    if isinstance(b, payload.TransactionPayload):
        ctype = {0: "ZSTD", 255: "NONE"}.get(b.compression_type, str(b.compression_type))
        return (
            f"Transaction_Payload\tpayload_size={b.payload_size}\tcompression_type={ctype}\tuncompressed_size={b.uncompressed_size}",
            ["## Start of compressed events!"],
        )
    if isinstance(b, control.Heartbeat):
        return (f"Heartbeat: {b.log_file} {b.log_position}", [])
    if isinstance(b, control.Incident):
        return (f"Incident: {control.INCIDENT_TYPES.get(b.incident, b.incident)}", [f"# {b.message}"])
    if isinstance(b, vendor.PolarxSequence):
        return (f"Sequence\t{vendor.SEQUENCE_TYPES.get(b.sequence_type, b.sequence_type)}={b.sequence}", [])
    if isinstance(b, vendor.PolarxGcn):
        return (f"Gcn\tflag={b.flag}\tgcn={b.gcn}", [])
    if isinstance(b, vendor.StartEncryption):
        return (f"Start_encryption\tscheme={b.scheme}\tkey_version={b.key_version}", [])
    if isinstance(b, UnknownEvent):
        return (f"Unknown event type {ev.type_code} ({len(b.raw)} bytes kept)", [])
    return (ev.type_name.title(), [])


def _rows_bytes(body: rows.Rows, verbosity: int, positional: bool) -> bytearray | None:
    """The row lines of a rows event with their newlines, encoded, written by the compiled formatter
    without a ``str`` per line; None where it does not (no table map, the pure path, a name or a
    value that does not encode: ``_rows_text`` then says what happens)."""
    tm = body.table
    if tm is None or body.undecoded_reason:
        return None
    rows_bytes = getattr(_FORMATTERS.get(tm, verbosity, positional), "rows_bytes", None)
    if rows_bytes is None:
        return None
    heads = _heads(body.operation, _table_label(tm))
    which = _WHICH.get(body.operation, 2)
    out = bytearray()
    try:
        head = "".join(line + "\n" for line in heads[0]).encode("utf-8", "surrogateescape")
        second = (
            "".join(line + "\n" for line in heads[1]).encode("utf-8", "surrogateescape")
            if which == 2
            else b""
        )
        return out if rows_bytes(body.rows, which, head, second, out) else None
    except UnicodeEncodeError:
        return None


def _event_lines(
    events: Iterable[Event], verbosity: int, positional: bool, rows_bytes: bool = False
) -> Iterator[list[Any]]:
    """The lines of each event (and the end of a transaction payload's events), a list per event;
    with ``rows_bytes``, a rows event's row lines may be one last item of bytes (``_rows_bytes``)."""
    in_payload = False
    for ev in events:
        if in_payload and ev.inner_index is None:
            yield ["## End of compressed events!"]
            in_payload = False
        summary, lines = _describe(ev)
        out = [f"# at {ev.offset}", _header_line(ev, summary)]
        out += [line for line in lines if line]
        body = ev.body
        if isinstance(body, rows.Rows):
            raw = _rows_bytes(body, verbosity, positional) if rows_bytes else None
            if raw is not None:
                out.append(raw)
            else:
                out += _rows_text(body, verbosity, positional)
        elif isinstance(body, payload.TransactionPayload):
            in_payload = True
        yield out
    if in_payload:
        yield ["## End of compressed events!"]


def render_text(events: Iterable[Event], *, verbosity: int = 2, positional: bool = False) -> Iterator[str]:
    """Lines of mysqlbinlog-style text for a stream of events."""
    for lines in _event_lines(events, verbosity, positional):
        yield from lines


def render_text_blocks(
    events: Iterable[Event], *, verbosity: int = 2, positional: bool = False
) -> Iterator[str]:
    """``render_text``'s lines, those of one event joined by newlines into one string (the output
    path writes a newline after each: the same bytes, one item per event instead of per line)."""
    join = "\n".join
    for lines in _event_lines(events, verbosity, positional):
        yield join(lines)


def render_text_bytes(
    events: Iterable[Event], *, verbosity: int = 2, positional: bool = False
) -> Iterator[bytes | bytearray]:
    """The bytes the output path writes of ``render_text_blocks``: each event's lines with their
    newlines, UTF-8 with surrogate escapes (as stored), rows' lines written as bytes by the compiled
    formatter. An item is all or part of an event's text."""
    join = "\n".join
    for lines in _event_lines(events, verbosity, positional, rows_bytes=True):
        last = lines[-1]
        if last.__class__ is bytearray:
            yield (join(lines[:-1]) + "\n").encode("utf-8", "surrogateescape")
            yield last
        else:
            yield (join(lines) + "\n").encode("utf-8", "surrogateescape")


RowLines = Callable[[rows.Rows], Iterator[str]]
