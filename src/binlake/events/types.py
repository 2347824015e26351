"""Event type codes of MySQL, MariaDB, Percona, Aurora and PolarDB-X, as data."""

from __future__ import annotations

from enum import IntEnum


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS_V2 = 30
    UPDATE_ROWS_V2 = 31
    DELETE_ROWS_V2 = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    # PolarDB-X data nodes
    POLARDBX_SEQUENCE = 80
    POLARDBX_CONSENSUS = 101
    POLARDBX_GCN = 105
    # Amazon Aurora
    AURORA_PADDING = 100
    # Percona Server 5.7-style binlog encryption
    PERCONA_START_ENCRYPTION = 159
    # MariaDB
    MARIA_ANNOTATE_ROWS = 160
    MARIA_BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    MARIA_START_ENCRYPTION = 164
    MARIA_QUERY_COMPRESSED = 165
    MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIA_WRITE_ROWS_COMPRESSED = 169
    MARIA_UPDATE_ROWS_COMPRESSED = 170
    MARIA_DELETE_ROWS_COMPRESSED = 171


def type_name(code: int) -> str:
    try:
        return EventType(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


# Row-event family: type code -> (operation, rows-event version, MariaDB-compressed?)
ROWS_EVENT_KINDS: dict[int, tuple[str, int, bool]] = {
    EventType.PRE_GA_WRITE_ROWS: ("insert", 0, False),
    EventType.PRE_GA_UPDATE_ROWS: ("update", 0, False),
    EventType.PRE_GA_DELETE_ROWS: ("delete", 0, False),
    EventType.WRITE_ROWS_V1: ("insert", 1, False),
    EventType.UPDATE_ROWS_V1: ("update", 1, False),
    EventType.DELETE_ROWS_V1: ("delete", 1, False),
    EventType.WRITE_ROWS_V2: ("insert", 2, False),
    EventType.UPDATE_ROWS_V2: ("update", 2, False),
    EventType.DELETE_ROWS_V2: ("delete", 2, False),
    EventType.PARTIAL_UPDATE_ROWS: ("update", 2, False),
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: ("insert", 1, True),
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: ("update", 1, True),
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: ("delete", 1, True),
    EventType.MARIA_WRITE_ROWS_COMPRESSED: ("insert", 2, True),
    EventType.MARIA_UPDATE_ROWS_COMPRESSED: ("update", 2, True),
    EventType.MARIA_DELETE_ROWS_COMPRESSED: ("delete", 2, True),
}

# Header flags (LOG_EVENT_*_F)
FLAG_BINLOG_IN_USE = 0x1
FLAG_THREAD_SPECIFIC = 0x4
FLAG_SUPPRESS_USE = 0x8
FLAG_ARTIFICIAL = 0x20
FLAG_RELAY_LOG = 0x40
FLAG_IGNORABLE = 0x80
FLAG_SKIP_REPLICATION = 0x8000

# Post-header lengths of a binlog v3 file (4.0 / 4.1), which has no FORMAT_DESCRIPTION event.
V3_POST_HEADER_LEN: dict[int, int] = {
    EventType.START_V3: 56,
    EventType.QUERY: 11,
    EventType.STOP: 0,
    EventType.ROTATE: 8,
    EventType.INTVAR: 0,
    EventType.LOAD: 18,
    EventType.SLAVE: 0,
    EventType.CREATE_FILE: 4,
    EventType.APPEND_BLOCK: 4,
    EventType.EXEC_LOAD: 4,
    EventType.DELETE_FILE: 4,
    EventType.NEW_LOAD: 18,
    EventType.RAND: 0,
    EventType.USER_VAR: 0,
}
