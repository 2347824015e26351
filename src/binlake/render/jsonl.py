"""One JSON object per event: header, origin, typed body; row events with typed column values."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterable, Iterator
from typing import Any

from binlake.events.base import Event, UnknownEvent
from binlake.events.rows import ABSENT, Rows
from binlake.events.table_map import TableMap
from binlake.render.values import json_value
from binlake.values.columns import ColumnDef


def _plain(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {
            f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v) if not f.name.startswith("_")
        }
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
        body = _plain(b)
        if hasattr(b, "gtid"):
            body["gtid"] = b.gtid
        d["body"] = body
    return d


def render_jsonl(events: Iterable[Event]) -> Iterator[str]:
    for ev in events:
        yield json.dumps(event_dict(ev), ensure_ascii=False)
