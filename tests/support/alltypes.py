"""A MariaDB workload over every column type, with edge values, and helpers to compare what the
binlog decodes to with what SELECT returns."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

from binlake.values.json_binary import Json
from binlake.values.temporal import MysqlDate, MysqlDateTime, format_datetime

SCHEMA = """
CREATE TABLE alltypes (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  dec1 DECIMAL(10,4), dec2 DECIMAL(65,30), dec3 DECIMAL(5,0), dec4 DECIMAL(18,9),
  f FLOAT, d DOUBLE,
  b1 BIT(1), b13 BIT(13), b64 BIT(64),
  y YEAR,
  dte DATE, tm TIME, tm3 TIME(3), tm6 TIME(6), tm1 TIME(1),
  dtt DATETIME, dtt2 DATETIME(2), dtt6 DATETIME(6),
  ts TIMESTAMP NULL DEFAULT NULL, ts4 TIMESTAMP(4) NULL DEFAULT NULL,
  c CHAR(10), c255 CHAR(255), vc VARCHAR(60), vc300 VARCHAR(300),
  bn BINARY(8), vb VARBINARY(50),
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  e ENUM('a','b','c'), s SET('x','y','z'),
  j JSON, g GEOMETRY,
  latin VARCHAR(20) CHARACTER SET latin1, gbk VARCHAR(20) CHARACTER SET gbk
) DEFAULT CHARSET=utf8mb4
"""

BIG_JSON = (
    '{"items": [' + ",".join(f'{{"n": {i}, "s": "v{i}", "f": {i}.5}}' for i in range(3000)) + '], "ok": true}'
)

ROWS: list[str] = [
    "INSERT INTO alltypes (id) VALUES (1)",
    """INSERT INTO alltypes VALUES (2,
      -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
      -999999.9999, -99999999999999999999999999999999999.999999999999999999999999999999, -99999, -0.000000001,
      -3.40282e38, -1.7976931348623157e308,
      b'0', b'0', b'0',
      1901,
      '1000-01-01', '-838:59:59', '-838:59:58.999', '-838:59:58.999999', '-00:00:00.1',
      '1000-01-01 00:00:00', '1000-01-01 00:00:00.01', '1000-01-01 00:00:00.000001',
      '1970-01-01 00:00:01', '1970-01-01 00:00:01.0001',
      '', '', '', '',
      x'', x'',
      '', '', '', '', '', '', '', '',
      'a', '',
      '[]', ST_GeomFromText('POINT(0 0)'),
      '', '')""",
    """INSERT INTO alltypes VALUES (3,
      127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
      999999.9999, 99999999999999999999999999999999999.999999999999999999999999999999, 99999, 999999999.999999999,
      3.40282e38, 1.7976931348623157e308,
      b'1', b'1111111111111', b'1111111111111111111111111111111111111111111111111111111111111111',
      2155,
      '9999-12-31', '838:59:59', '838:59:58.999', '838:59:59.000000', '00:00:00.9',
      '9999-12-31 23:59:59', '9999-12-31 23:59:59.99', '9999-12-31 23:59:59.999999',
      '2038-01-19 03:14:07', '2038-01-19 03:14:07.9999',
      REPEAT('z', 10), REPEAT('\U0001f600', 255), REPEAT('y', 60), REPEAT('\u00e9', 300),
      x'FFFFFFFFFFFFFFFF', REPEAT(x'FF', 50),
      REPEAT('t', 255), REPEAT('x', 1000), REPEAT('m', 70000), REPEAT('l', 100000),
      REPEAT(x'00', 255), REPEAT(x'01', 1000), REPEAT(x'02', 70000), REPEAT(x'03', 100000),
      'c', 'x,y,z',
      '{"k": "v"}', ST_GeomFromText('LINESTRING(0 0, 1 1, 2 1)'),
      'caf\u00e9', '\u4e2d\u6587')""",
    """INSERT INTO alltypes VALUES (4,
      -1, 200, -2, 40000, -3, 9000000, -4, 3000000000, -5, 10000000000000000000,
      -1234.5678, 0.000000000000000000000000000001, -1, 1.5,
      0.1, 0.1,
      b'1', b'1010101010101', b'1000000000000000000000000000000000000000000000000000000000000001',
      0,
      '0000-00-00', '-16:08:04', '-16:08:04.250', '-00:00:00.000001', '-12:00:00.5',
      '0000-00-00 00:00:00', '2013-00-00 00:00:00.5', '2020-02-29 12:34:56.789012',
      '0000-00-00 00:00:00', '2021-06-15 08:30:00.1234',
      'abc', 'k\u00f6\u00f6l \U0001f680', 'it''s "quoted" \\\\ back', 'line\nbreak\ttab',
      x'0001020300', x'00FF00FF',
      'tiny', 'text \U0001f4a9', 'medium', 'long',
      x'DEADBEEF', x'00', x'CAFEBABE', x'0A0D',
      'b', 'x,z',
      %(big_json)s, ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'),
      'na\u00efve', '\u6c49\u5b57')""",
    "INSERT INTO alltypes (id, dte, dtt, ts, y) VALUES (5, '2013-00-00', '2013-00-00 00:00:00', NULL, 0)",
    "UPDATE alltypes SET vc = 'updated', i = i + 1, tm6 = '-01:02:03.456789' WHERE id = 4",
    "UPDATE alltypes SET id = 6 WHERE id = 5",
    "DELETE FROM alltypes WHERE id = 1",
    "INSERT INTO alltypes (id, vc) VALUES (1, 'again')",
]


def run_workload(db: Any, database: str = "types") -> None:
    conn = db.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
        cur.execute(f"USE {database}")
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(SCHEMA)
        for sql in ROWS:
            cur.execute(sql.replace("%(big_json)s", conn.escape(BIG_JSON)))
    conn.close()


def select_rows(db: Any, database: str = "types") -> dict[int, dict[str, Any]]:
    import pymysql.cursors

    conn = db.connect(database, cursorclass=pymysql.cursors.DictCursor)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute("SELECT * FROM alltypes ORDER BY id")
        rows = {r["id"]: r for r in cur.fetchall()}
    conn.close()
    return rows


def comparable(decoded: Any, selected: Any, column: str) -> tuple[Any, Any]:
    """Both sides in one form: the binlog's typed value and PyMySQL's SELECT value."""
    if decoded is None or selected is None:
        return decoded, selected
    if isinstance(decoded, float) and column == "f":
        return struct.pack("<f", decoded), struct.pack("<f", float(selected))
    if column.startswith("b") and column[1:].isdigit():  # BIT: PyMySQL gives big-endian bytes
        return decoded, int.from_bytes(selected, "big")
    if isinstance(decoded, MysqlDate):
        return str(decoded), str(selected)
    if isinstance(decoded, MysqlDateTime):  # SELECT prints the column's fractional digits
        fsp = len(str(selected).partition(".")[2])
        return format_datetime(decoded, fsp), str(selected)
    if isinstance(decoded, dt.datetime) and decoded.tzinfo is not None:
        return decoded.replace(tzinfo=None), selected
    if isinstance(decoded, tuple) and column == "s":
        return set(decoded), set(selected) if not isinstance(selected, str) else set(
            filter(None, selected.split(","))
        )
    if isinstance(decoded, Json):
        return decoded.value, selected
    if isinstance(decoded, Decimal):
        return decoded, Decimal(selected)
    return decoded, selected
