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

__all__ = [
    "BODY_DECODERS",
    "DecodeState",
    "Event",
    "EventHeader",
    "EventType",
    "FormatDescription",
    "UnknownEvent",
    "type_name",
]
