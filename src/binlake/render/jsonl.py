"""One JSON object per event: header, origin, typed body; row events with typed column values.

``event_dict`` + ``json.dumps`` per event is the reference (``reference_jsonl``); ``render_jsonl``
writes the same bytes faster: the header by one ``%`` format, table maps' bodies encoded once per
map, row images by a formatter generated per table layout (``render.jsonrow``), other bodies through
field names looked up once per class. Tests hold the two equal on the corpus and generated series.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from binlake.events.base import Event, UnknownEvent
from binlake.events.rows import ABSENT, Rows
from binlake.events.table_map import TableMap
from binlake.render import joined
from binlake.render.jsonrow import ImageJsonCache, encode, quote
from binlake.render.values import json_value
from binlake.values.columns import ColumnDef

_AS_IS = frozenset({int, str, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _public_fields(cls: type) -> tuple[str, ...] | None:
    """The public field names of a dataclass (None for any other class), looked up once per class."""
    try:
        return _FIELDS[cls]
    except KeyError:
        names = None
        if dataclasses.is_dataclass(cls) and not issubclass(cls, type):
            names = tuple(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
        _FIELDS[cls] = names
        return names


def _plain(v: Any) -> Any:
    """A body as JSON-ready data: dataclasses as dicts of their public fields, bytes as base64."""
    cls = v.__class__
    if cls in _AS_IS:
        return v
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode()}
    names = _public_fields(cls)
    if names is not None:
        return {n: _plain(getattr(v, n)) for n in names}
    if isinstance(v, dict):
        return {
            str(k) if not isinstance(k, tuple) else ":".join(x for x in k if x): _plain(x)
            for k, x in v.items()
        }
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def image_dict(image: list[Any] | None, cols: list[ColumnDef]) -> dict[str, Any] | None:
    if image is None:
        return None
    return {c.label: json_value(v, c) for c, v in zip(cols, image, strict=True) if v is not ABSENT}


def _rows_body(b: Rows) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operation": b.operation,
        "table_id": b.table_id,
        "flags": b.flags,
        "version": b.version,
        "column_count": b.column_count,
    }
    if b.table is not None:
        out["database"], out["table"] = b.table.database, b.table.table
        if b.table.primary_key:
            out["primary_key"] = [b.table.columns[i].label for i in b.table.primary_key]
    if b.partition_id is not None:
        out["partition_id"] = b.partition_id
    if b.source_partition_id is not None:  # an UPDATE's row moved from this partition
        out["source_partition_id"] = b.source_partition_id
    if b.undecoded_reason:
        out["undecoded_reason"] = b.undecoded_reason
        out["raw_rows"] = _plain(b.raw_rows)
        return out
    cols = b.table.columns if b.table else []
    out["rows"] = [{"before": image_dict(bi, cols), "after": image_dict(ai, cols)} for bi, ai in b.rows]
    return out


def _table_map_body(b: TableMap) -> dict[str, Any]:
    return {
        "table_id": b.table_id,
        "database": b.database,
        "table": b.table,
        "columns": [
            {k: v for k, v in _plain(c).items() if v is not None and k != "index"} for c in b.columns
        ],
        "primary_key": b.primary_key,
    }


def event_dict(ev: Event) -> dict[str, Any]:
    h = ev.header
    d: dict[str, Any] = {
        "file": ev.source,
        "offset": ev.offset,
        "type": ev.type_name,
        "type_code": ev.type_code,
        "timestamp": h.timestamp,
        "server_id": h.server_id,
        "event_size": h.event_size,
        "log_pos": h.log_pos,
        "flags": h.flags,
    }
    if ev.inner_index is not None:
        d["inner_index"] = ev.inner_index
    if ev.checksum is not None:
        d["checksum"] = f"0x{ev.checksum:08x}"
    b = ev.body
    if isinstance(b, Rows):
        d["body"] = _rows_body(b)
    elif isinstance(b, TableMap):
        d["body"] = _table_map_body(b)
    elif isinstance(b, UnknownEvent):
        d["body"] = {"raw": _plain(b.raw)}
    else:
        d["body"] = _body(b)
    return d


def reference_jsonl(events: Iterable[Event]) -> Iterator[str]:
    """The per-value path: a dict per event, every value converted, ``json.dumps`` (the reference)."""
    for ev in events:
        yield json.dumps(event_dict(ev), ensure_ascii=False)


_HEAD = (
    '{"file": %s, "offset": %d, "type": %s, "type_code": %d, "timestamp": %d, "server_id": %d, '
    '"event_size": %d, "log_pos": %d, "flags": %d'
)


class JsonLines:
    """The fast path of ``render_jsonl``, with what it keeps between events: quoted file and type
    names, each table map's encoded body and name fields, row formatters per layout."""

    def __init__(self) -> None:
        self._quoted: dict[str, str] = {}
        self._maps: dict[int, tuple[TableMap, str, str]] = {}  # id -> (map, its body, its name fields)
        self._images = ImageJsonCache()
        self._bodies: dict[type, BodyJson] = {}
        self._types: dict[int, str] = {}

    def _q(self, text: str) -> str:
        q = self._quoted.get(text)
        if q is None:
            if len(self._quoted) >= 4096:
                self._quoted.clear()
            q = self._quoted[text] = quote(text)
        return q

    def _map(self, tm: TableMap) -> tuple[TableMap, str, str]:
        """(map, ``_table_map_body`` encoded, the database/table/primary_key fields of a rows body)."""
        hit = self._maps.get(id(tm))
        if hit is not None and hit[0] is tm:
            return hit
        names = f', "database": {quote(tm.database)}, "table": {quote(tm.table)}'
        if tm.primary_key:
            names += ', "primary_key": ' + encode([tm.columns[i].label for i in tm.primary_key])
        if len(self._maps) >= 4096:
            self._maps.clear()
        hit = self._maps[id(tm)] = (tm, encode(_table_map_body(tm)), names)  # the map kept: its id stays its
        return hit

    def line(self, ev: Event) -> str:
        h = ev.header
        kind = ev.kind
        type_name = self._types.get(kind)
        if type_name is None:
            type_name = self._types[kind] = quote(ev.type_name)
        head = _HEAD % (
            self._q(ev.source), ev.offset, type_name, kind, h.timestamp, h.server_id,
            h.event_size, h.log_pos, h.flags,
        )  # fmt: skip
        if ev.inner_index is not None:
            head += ', "inner_index": %d' % ev.inner_index
        if ev.checksum is not None:
            head += ', "checksum": "0x%08x"' % ev.checksum
        b = ev.body
        cls = b.__class__
        if cls is Rows:
            return head + ', "body": ' + self._rows(b) + "}"
        if cls is TableMap:
            return head + ', "body": ' + self._map(b)[1] + "}"
        return head + ', "body": ' + self._other(ev) + "}"

    def _other(self, ev: Event) -> str:
        """The body of an event whose body is neither exactly ``Rows`` nor ``TableMap``."""
        b = ev.body
        if isinstance(b, (Rows, TableMap, UnknownEvent)):
            return encode(event_dict(ev)["body"])
        cls = b.__class__
        body_json = self._bodies.get(cls)
        if body_json is None:
            body_json = self._bodies[cls] = compile_body_json(cls)
        return body_json(b)

    def _rows_plan(self, tm: TableMap) -> tuple[TableMap, Any, bytes, bytes]:
        """For the compiled writer: the map, its image formatter, its name fields and its own body
        (a TABLE_MAP event's) encoded."""
        image = self._images.get(tm, lambda: [c.label for c in tm.columns], tm.columns)
        _, body, names = self._map(tm)
        return tm, image, names.encode("utf-8", "surrogateescape"), body.encode("utf-8", "surrogateescape")

    def _rows(self, b: Rows) -> str:
        tm = b.table
        if tm is None or b.undecoded_reason or b.partition_id is not None:
            return encode(_rows_body(b))
        _, _, names = self._map(tm)
        image = self._images.get(tm, lambda: [c.label for c in tm.columns], tm.columns)
        op = b.operation
        if op == "insert":
            rows = ['{"before": null, "after": ' + image(a) + "}" for _, a in b.rows]  # type: ignore[arg-type]
        elif op == "delete":
            rows = ['{"before": ' + image(bi) + ', "after": null}' for bi, _ in b.rows]  # type: ignore[arg-type]
        else:
            rows = [
                '{"before": ' + _image_or_null(image, bi) + ', "after": ' + _image_or_null(image, ai) + "}"
                for bi, ai in b.rows
            ]
        return (
            '{"operation": %s, "table_id": %d, "flags": %d, "version": %d, "column_count": %d%s, "rows": [%s]}'
            % (quote(op), b.table_id, b.flags, b.version, b.column_count, names, ", ".join(rows))
        )


def _image_or_null(image: Any, values: list[Any] | None) -> str:
    return "null" if values is None else image(values)  # type: ignore[no-any-return]


BodyJson = Callable[[Any], str]

# a field's value: the common scalars inline, anything else by ``_field_json``
_FIELD_EXPR = "(str({x}) if {x}.__class__ is int else Q({x}) if {x}.__class__ is str else 'null' if {x} is None else J({x}))"
_NO_BYTES = encode(_plain(b""))


def _already_plain(x: dict[Any, Any]) -> bool:
    """Whether ``_plain`` would give ``x`` back as it is: string keys, values scalars or such dicts."""
    for k, v in x.items():
        if k.__class__ is not str:
            return False
        cls = v.__class__
        if cls not in _AS_IS and not (cls is dict and _already_plain(v)):
            return False
    return True


def _field_json(x: Any) -> str:
    """``encode(_plain(x))``, without ``_plain``'s copy where it would change nothing: booleans, a
    dict of string keys and scalar or such dict values (a Query's status), no bytes, an empty tuple."""
    cls = x.__class__
    if cls is bool:
        return "true" if x else "false"
    if cls is dict and _already_plain(x):
        return encode(x)
    if cls is bytes and not x:
        return _NO_BYTES
    if cls is tuple and not x:
        return "[]"
    return encode(_plain(x))


def compile_body_json(cls: type) -> BodyJson:
    """``encode(_body(b))`` for bodies of one dataclass: its field names are constants, ints,
    strings and None inline. Other classes (or a class with a ``gtid`` field) use that reference."""
    names = _public_fields(cls)
    if names is None or "gtid" in names:
        return lambda b: encode(_body(b))
    env: dict[str, Any] = {"Q": quote, "E": encode, "J": _field_json}
    lines = ["def body_json(b):"]
    parts = []
    for i, name in enumerate(names):
        lines.append(f"    x{i} = b.{name}")
        parts += [repr(("{" if i == 0 else ", ") + quote(name) + ": "), _FIELD_EXPR.format(x=f"x{i}")]
    gtid = _FIELD_EXPR.format(x="g").replace("J(g)", "E(g)")  # event_dict sets b.gtid as it is
    gtid_key = (", " if names else "") + '"gtid": '
    lines += [
        f"    s = ''.join(({', '.join(parts)},))" if parts else "    s = '{'",
        "    if hasattr(b, 'gtid'):",
        "        g = b.gtid",
        f"        s += {gtid_key!r} + {gtid}",
        "    return s + '}'",
    ]
    exec(compile("\n".join(lines), f"<{cls.__name__} json>", "exec"), env)  # noqa: S102
    return env["body_json"]  # type: ignore[no-any-return]


def _body(b: Any) -> Any:
    """``event_dict``'s body of an event that is neither rows, a table map nor unknown."""
    body = _plain(b)
    if hasattr(b, "gtid"):
        body["gtid"] = b.gtid
    return body


def render_jsonl(events: Iterable[Event]) -> Iterator[str]:
    """One JSON object per event, as ``reference_jsonl`` writes it, byte for byte."""
    line = JsonLines().line
    for ev in events:
        yield line(ev)


def body_plan(cls: type) -> tuple[tuple[tuple[str, bytes], ...], bytes] | None:
    """What ``compile_body_json(cls)`` writes, as data for the compiled writer: per field its
    attribute and the encoded text before its value, and the text before ``gtid``; None for the
    classes it leaves to ``encode(_body(b))`` and those ``line`` sends through ``event_dict``."""
    names = _public_fields(cls)
    if names is None or "gtid" in names or issubclass(cls, (Rows, TableMap, UnknownEvent)):
        return None
    fields = tuple(
        (name, (("{" if i == 0 else ", ") + quote(name) + ": ").encode()) for i, name in enumerate(names)
    )
    return fields, ((", " if names else "") + '"gtid": ').encode()


def render_jsonl_bytes(events: Iterable[Event], batch_bytes: int = 1 << 20) -> Iterator[bytearray]:
    """``render_jsonl``'s lines with their newlines, encoded (UTF-8, surrogate escapes), in blocks of
    about ``batch_bytes``; the block before an error is given too. With the compiled formatter
    (``joined.event_json``), each line is written into the block by C."""
    lines = JsonLines()
    out = bytearray()
    writer = joined.event_json(
        lines.line,
        Rows,
        lines._rows,
        lines._rows_plan,
        TableMap,
        lambda tm: lines._map(tm)[1],
        lines._other,
        body_plan,
        quote,
    )
    try:
        if writer is None:
            for ev in events:
                out += lines.line(ev).encode("utf-8", "surrogateescape")
                out += b"\n"
                if len(out) >= batch_bytes:
                    yield out
                    out = bytearray()
        else:
            write = writer.write
            for ev in events:
                write(ev, out, _field_json, encode)
                if len(out) >= batch_bytes:
                    yield out
                    out = bytearray()
    except Exception:
        if out:  # the lines before the error are written too
            yield out
        raise
    if out:
        yield out
