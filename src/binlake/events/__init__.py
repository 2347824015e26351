"""Typed binlog events: one module per event family, and the table that maps type codes to them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from binlake.events import control, gtid, load, payload, query, rows, table_map, vendor
from binlake.events.base import DecodeState, Event, EventHeader, FormatDescription, UnknownEvent
from binlake.events.types import ROWS_EVENT_KINDS, EventType, type_name

BodyDecoder = Callable[[bytes, DecodeState, EventHeader], Any]

BODY_DECODERS: dict[int, BodyDecoder] = {
    EventType.START_V3: control.decode_start_v3,
    EventType.QUERY: query.decode_query,
    EventType.EXECUTE_LOAD_QUERY: query.decode_query,
    EventType.MARIA_QUERY_COMPRESSED: query.decode_query,
    EventType.STOP: control.decode_stop,
    EventType.ROTATE: control.decode_rotate,
    EventType.INTVAR: control.decode_intvar,
    EventType.LOAD: load.decode_load,
    EventType.NEW_LOAD: load.decode_load,
    EventType.CREATE_FILE: load.decode_load,
    EventType.APPEND_BLOCK: control.decode_file_block,
    EventType.EXEC_LOAD: control.decode_file_block,
    EventType.DELETE_FILE: control.decode_file_block,
    EventType.BEGIN_LOAD_QUERY: control.decode_file_block,
    EventType.RAND: control.decode_rand,
    EventType.USER_VAR: control.decode_user_var,
    EventType.FORMAT_DESCRIPTION: control.decode_format_description,
    EventType.XID: control.decode_xid,
    EventType.TABLE_MAP: table_map.decode_table_map,
    EventType.INCIDENT: control.decode_incident,
    EventType.HEARTBEAT: control.decode_heartbeat,
    EventType.HEARTBEAT_V2: control.decode_heartbeat_v2,
    EventType.ROWS_QUERY: control.decode_rows_query,
    EventType.GTID: gtid.decode_gtid,
    EventType.ANONYMOUS_GTID: gtid.decode_gtid,
    EventType.GTID_TAGGED: gtid.decode_gtid_tagged,
    EventType.PREVIOUS_GTIDS: gtid.decode_previous_gtids,
    EventType.XA_PREPARE: control.decode_xa_prepare,
    EventType.TRANSACTION_PAYLOAD: payload.decode_transaction_payload,
    EventType.MARIA_ANNOTATE_ROWS: control.decode_annotate_rows,
    EventType.MARIA_BINLOG_CHECKPOINT: gtid.decode_maria_checkpoint,
    EventType.MARIA_GTID: gtid.decode_maria_gtid,
    EventType.MARIA_GTID_LIST: gtid.decode_maria_gtid_list,
    EventType.MARIA_START_ENCRYPTION: vendor.decode_start_encryption,
    EventType.PERCONA_START_ENCRYPTION: vendor.decode_start_encryption,
    EventType.POLARDBX_SEQUENCE: vendor.decode_polarx_sequence,
    EventType.POLARDBX_GCN: vendor.decode_polarx_gcn,
    EventType.POLARDBX_CONSENSUS: vendor.decode_opaque,
    EventType.AURORA_PADDING: vendor.decode_opaque,
    EventType.IGNORABLE: vendor.decode_opaque,
    EventType.TRANSACTION_CONTEXT: vendor.decode_opaque,
    EventType.VIEW_CHANGE: vendor.decode_opaque,
    EventType.SLAVE: vendor.decode_opaque,
}
BODY_DECODERS.update({code: rows.decode_rows for code in ROWS_EVENT_KINDS})

ENCRYPTION_STARTS = frozenset({EventType.MARIA_START_ENCRYPTION, EventType.PERCONA_START_ENCRYPTION})
# the event types whose body is a Query (a statement), found in the table above: what a schema
# tracker hears besides TABLE_MAPs (``DecodeState.observers_of``)
QUERY_KINDS = frozenset(code for code, decode in BODY_DECODERS.items() if decode is query.decode_query)
# what a schema tracker hears: the statements (its DDL) and the table maps (it names their columns)
SCHEMA_KINDS = QUERY_KINDS | {EventType.TABLE_MAP}

__all__ = [
    "BODY_DECODERS",
    "DecodeState",
    "Event",
    "EventHeader",
    "EventType",
    "FormatDescription",
    "QUERY_KINDS",
    "SCHEMA_KINDS",
    "UnknownEvent",
    "type_name",
]

BodyEncoder = Callable[[Any, FormatDescription], bytes]


def _table_id_width(fde: FormatDescription, code: int, default: int) -> int:
    return 4 if fde.post_header_len(code, default) == 6 else 6


BODY_ENCODERS: dict[int, BodyEncoder] = {
    EventType.FORMAT_DESCRIPTION: lambda b, f: control.encode_format_description(b),
    EventType.START_V3: lambda b, f: control.encode_start_v3(b),
    EventType.QUERY: lambda b, f: query.encode_query(b, f.post_header_len(EventType.QUERY, 13)),
    EventType.EXECUTE_LOAD_QUERY: lambda b, f: query.encode_query(b, 13),
    EventType.MARIA_QUERY_COMPRESSED: lambda b, f: query.encode_query(
        b, f.post_header_len(EventType.QUERY, 13)
    ),
    EventType.STOP: lambda b, f: control.encode_stop(b),
    EventType.ROTATE: lambda b, f: control.encode_rotate(b),
    EventType.INTVAR: lambda b, f: control.encode_intvar(b),
    EventType.LOAD: lambda b, f: load.encode_load(b),
    EventType.NEW_LOAD: lambda b, f: load.encode_load(b),
    EventType.CREATE_FILE: lambda b, f: load.encode_load(b),
    EventType.APPEND_BLOCK: lambda b, f: control.encode_file_block(b),
    EventType.EXEC_LOAD: lambda b, f: control.encode_file_block(b),
    EventType.DELETE_FILE: lambda b, f: control.encode_file_block(b),
    EventType.BEGIN_LOAD_QUERY: lambda b, f: control.encode_file_block(b),
    EventType.RAND: lambda b, f: control.encode_rand(b),
    EventType.USER_VAR: lambda b, f: control.encode_user_var(b),
    EventType.XID: lambda b, f: control.encode_xid(b),
    EventType.TABLE_MAP: lambda b, f: table_map.encode_table_map(
        b, _table_id_width(f, EventType.TABLE_MAP, 8), f.is_mariadb
    ),
    EventType.INCIDENT: lambda b, f: control.encode_incident(b),
    EventType.HEARTBEAT: lambda b, f: control.encode_heartbeat(b),
    EventType.ROWS_QUERY: lambda b, f: control.encode_rows_query(b),
    EventType.GTID: lambda b, f: gtid.encode_gtid(b),
    EventType.ANONYMOUS_GTID: lambda b, f: gtid.encode_gtid(b),
    EventType.PREVIOUS_GTIDS: lambda b, f: gtid.encode_previous_gtids(b),
    EventType.GTID_TAGGED: lambda b, f: gtid.encode_gtid_tagged(b),
    EventType.XA_PREPARE: lambda b, f: control.encode_xa_prepare(b),
    EventType.TRANSACTION_PAYLOAD: lambda b, f: payload.encode_transaction_payload(b),
    EventType.MARIA_ANNOTATE_ROWS: lambda b, f: control.encode_annotate_rows(b),
    EventType.MARIA_BINLOG_CHECKPOINT: lambda b, f: gtid.encode_maria_checkpoint(b),
    EventType.MARIA_GTID: lambda b, f: gtid.encode_maria_gtid(b),
    EventType.MARIA_GTID_LIST: lambda b, f: gtid.encode_maria_gtid_list(b),
    EventType.MARIA_START_ENCRYPTION: lambda b, f: vendor.encode_start_encryption(b),
    EventType.PERCONA_START_ENCRYPTION: lambda b, f: vendor.encode_start_encryption(b),
    EventType.POLARDBX_SEQUENCE: lambda b, f: vendor.encode_polarx_sequence(b),
    EventType.POLARDBX_GCN: lambda b, f: vendor.encode_polarx_gcn(b),
}
for _opaque in (
    EventType.POLARDBX_CONSENSUS,
    EventType.AURORA_PADDING,
    EventType.IGNORABLE,
    EventType.TRANSACTION_CONTEXT,
    EventType.VIEW_CHANGE,
    EventType.SLAVE,
):
    BODY_ENCODERS[_opaque] = lambda b, f: vendor.encode_opaque(b)


def _rows_encoder(code: int) -> BodyEncoder:
    return lambda b, f: rows.encode_rows(b, _table_id_width(f, code, 10))


for _rows_code in ROWS_EVENT_KINDS:
    BODY_ENCODERS[_rows_code] = _rows_encoder(_rows_code)


def encode_body(type_code: int, body: Any, fde: FormatDescription) -> bytes:
    """The bytes of an event body (between the common header and the checksum)."""
    if isinstance(body, UnknownEvent):
        return body.raw
    encoder = BODY_ENCODERS.get(type_code)
    if encoder is None:
        raise ValueError(f"no encoder for {type_name(type_code)} events")
    return encoder(body, fde)
