"""A MySQL 9 workload over every column type it has, with edge values, in the row formats MySQL can
log: FULL and MINIMAL images, partial JSON updates, a compressed transaction, partitions.

Small on purpose (a few hundred row lines): it is compared line by line with ``mysqlbinlog``.
mysqlbinlog cannot print GEOMETRY (it abandons the event there): that table's rows go to a binlog
file of their own, which mariadb-binlog can print (it stops at the first JSON column)."""

from __future__ import annotations

from typing import Any

ENUM_300 = ",".join(f"'e{i}'" for i in range(300))  # more than 255 members: a 2-byte ENUM
SET_64 = ",".join(f"'s{i}'" for i in range(64))  # 64 members: an 8-byte SET

SCHEMA = [
    """CREATE TABLE nums (
      id INT PRIMARY KEY,
      ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
      mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
      d1 DECIMAL(1,0), d2 DECIMAL(1,1), d3 DECIMAL(9,9), d4 DECIMAL(10,0), d5 DECIMAL(18,9),
      d6 DECIMAL(19,0), d7 DECIMAL(65,0), d8 DECIMAL(65,30), d9 DECIMAL(30,30), d10 DECIMAL(14,5) UNSIGNED,
      f FLOAT, d DOUBLE,
      b1 BIT(1), b8 BIT(8), b13 BIT(13), b64 BIT(64), y YEAR
    )""",
    """CREATE TABLE times (
      id INT PRIMARY KEY,
      dte DATE, t0 TIME, t1 TIME(1), t2 TIME(2), t3 TIME(3), t4 TIME(4), t5 TIME(5), t6 TIME(6),
      dt0 DATETIME, dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3), dt4 DATETIME(4), dt5 DATETIME(5),
      dt6 DATETIME(6),
      ts0 TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts3 TIMESTAMP(3) NULL, ts6 TIMESTAMP(6) NULL
    )""",
    f"""CREATE TABLE strs (
      id INT PRIMARY KEY,
      c CHAR(10), c255 CHAR(255), vc VARCHAR(60), vc300 VARCHAR(300),
      cl CHAR(5) CHARACTER SET latin1, vl VARCHAR(20) CHARACTER SET latin1,
      cg CHAR(4) CHARACTER SET gbk, vg VARCHAR(20) CHARACTER SET gbk,
      c16 CHAR(3) CHARACTER SET utf16, c32 CHAR(3) CHARACTER SET utf32, v32 VARCHAR(10) CHARACTER SET utf32,
      cu CHAR(4) CHARACTER SET ucs2, cb CHAR(6) CHARACTER SET binary,
      bn BINARY(8), vb VARBINARY(50),
      tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT CHARACTER SET latin1,
      tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
      e ENUM('a','b','c'), e300 ENUM({ENUM_300}), s SET('x','y','z'), s64 SET({SET_64})
    ) DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE docs (id INT PRIMARY KEY, j JSON, k INT)""",
    """CREATE TABLE vecs (id INT PRIMARY KEY, v3 VECTOR(3), v1 VECTOR(1))""",
    """CREATE TABLE geo (id INT PRIMARY KEY, g GEOMETRY, p POINT, k INT)""",
    """CREATE TABLE parts (id INT PRIMARY KEY, v VARCHAR(10))
       PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20),
                                PARTITION p2 VALUES LESS THAN MAXVALUE)""",
]

NUMS = [
    "INSERT INTO nums (id) VALUES (1)",
    """INSERT INTO nums VALUES (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
      -9, -0.9, -0.999999999, -9999999999, -999999999.999999999, -9999999999999999999,
      -99999999999999999999999999999999999999999999999999999999999999999,
      -99999999999999999999999999999999999.999999999999999999999999999999,
      -0.999999999999999999999999999999, 0,
      -3.40282e38, -1.7976931348623157e308, b'0', b'0', b'0', b'0', 1901)""",
    """INSERT INTO nums VALUES (3, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295,
      9223372036854775807, 18446744073709551615,
      9, 0.9, 0.999999999, 9999999999, 999999999.999999999, 9999999999999999999,
      99999999999999999999999999999999999999999999999999999999999999999,
      99999999999999999999999999999999999.999999999999999999999999999999,
      0.999999999999999999999999999999, 999999999.99999,
      3.40282e38, 1.7976931348623157e308, b'1', b'11111111', b'1111111111111', x'FFFFFFFFFFFFFFFF', 2155)""",
    """INSERT INTO nums VALUES (4, -1, 200, -2, 40000, -3, 9000000, -4, 3000000000, -5, 10000000000000000000,
      0, 0.1, 0.000000001, 1, -0.000000001, 1, 0, 0.000000000000000000000000000001,
      0.000000000000000000000000000001, 0.00001,
      0.1, 0.1, b'1', b'10000001', b'1010101010101', x'8000000000000001', 0)""",
    """INSERT INTO nums (id, f, d, d5, d8) VALUES (5, 1e-38, 4.9e-324, 0.5, -0.5),
      (6, -0.0, -0.0, 123456789.123456789, 1.5), (7, 16777217, 9007199254740993, 100, 1e30)""",
]

TIMES = [
    "INSERT INTO times (id) VALUES (1)",
    """INSERT INTO times VALUES (2, '1000-01-01', '-838:59:59', '-838:59:58.9', '-838:59:58.99',
      '-838:59:58.999', '-838:59:58.9999', '-838:59:58.99999', '-838:59:58.999999',
      '1000-01-01 00:00:00', '1000-01-01 00:00:00.1', '1000-01-01 00:00:00.01', '1000-01-01 00:00:00.001',
      '1000-01-01 00:00:00.0001', '1000-01-01 00:00:00.00001', '1000-01-01 00:00:00.000001',
      '1970-01-01 00:00:01', '1970-01-01 00:00:01.1', '1970-01-01 00:00:01.001', '1970-01-01 00:00:01.000001')""",
    """INSERT INTO times VALUES (3, '9999-12-31', '838:59:59', '838:59:58.9', '838:59:58.99', '838:59:58.999',
      '838:59:58.9999', '838:59:58.99999', '838:59:58.999999',
      '9999-12-31 23:59:59', '9999-12-31 23:59:59.9', '9999-12-31 23:59:59.99', '9999-12-31 23:59:59.999',
      '9999-12-31 23:59:59.9999', '9999-12-31 23:59:59.99999', '9999-12-31 23:59:59.999999',
      '2038-01-19 03:14:07', '2038-01-19 03:14:07.9', '2038-01-19 03:14:07.999', '2038-01-19 03:14:07.999999')""",
    """INSERT INTO times VALUES (4, '0000-00-00', '00:00:00', '-00:00:00.1', '-00:00:00.01', '-00:00:00.001',
      '-00:00:00.0001', '-00:00:00.00001', '-00:00:00.000001',
      '0000-00-00 00:00:00', '2013-00-00 00:00:00.5', '2013-01-00 00:00:00.25', '0000-01-01 00:00:00.125',
      '2020-02-29 12:34:56.7891', '2020-02-29 12:34:56.78912', '2020-02-29 12:34:56.789123',
      '0000-00-00 00:00:00', '2021-06-15 08:30:00.1', '2021-06-15 08:30:00.123', '2021-06-15 08:30:00.123456')""",
    "INSERT INTO times (id, dte, t0, t6) VALUES (5, '2013-00-00', '-12:34:56', '-00:00:01.5')",
]

STRS = [
    "INSERT INTO strs (id) VALUES (1)",
    """INSERT INTO strs VALUES (2, '', '', '', '', '', '', '', '', '', '', '', '', '', x'', x'',
      '', '', '', '', '', '', '', '', 'a', 'e0', '', '')""",
    """INSERT INTO strs VALUES (3, REPEAT('z', 10), REPEAT('\U0001f600', 255), REPEAT('y', 60),
      REPEAT('\u00e9', 300), 'caf\u00e9', 'na\u00efve \u00e0', '\u4e2d\u6587', '\u6c49\u5b57 ok',
      '\u00e9\U0001f600a', 'a\u00e9\U0001f600', 'utf32 \U0001f680', '\u00e9\u4e2d', x'00FF0A270D5C',
      x'FFFFFFFFFFFFFFFF', REPEAT(x'FF', 50),
      REPEAT('t', 255), REPEAT('x', 1000), REPEAT('m', 70000), REPEAT('l', 100000),
      REPEAT(x'00', 255), REPEAT(x'01', 1000), REPEAT(x'02', 70000), REPEAT(x'03', 100000),
      'c', 'e299', 'x,y,z', '{SET_ALL}')""",
    """INSERT INTO strs (id, c, vc, vc300, vl, bn, vb, tx, bl, e, e300, s, s64) VALUES (4,
      'it''s', 'it''s "q" \\\\ back', 'line\nbreak\ttab\rret\bbs\fff\\Zz', 'quote''s \\\\',
      x'0001020300', x'00FF00FF27275C5C0A', 'nul\\0in text', x'0A0D09085C27', 'b', 'e256', 'x,z', 's0,s63')""",
    "UPDATE strs SET vc = 'updated', c = NULL WHERE id = 4",
    "DELETE FROM strs WHERE id = 2",
]

DOCS = [
    """INSERT INTO docs VALUES (1, NULL, 0), (2, 'null', 0), (3, 'true', 0), (4, 'false', 0), (5, '0', 0),
      (6, '-1', 0), (7, '18446744073709551615', 0), (8, '-9223372036854775808', 0), (9, '3.5e300', 0),
      (10, '"str ''q'' \\\\\\\\ \\\\n \\\\u00e9 \\\\ud83d\\\\ude00"', 0), (11, '[]', 0), (12, '{}', 0),
      (13, '[1, "two", 3.25, null, true, [], {}, {"a": [false]}]', 0),
      (14, '{"b": 1, "a": {"c": [1, 2, {"d": "e"}]}, "": "empty key", "k\\\\"q": "v"}', 0)""",
    """INSERT INTO docs VALUES (15, JSON_OBJECT('dec', CAST(1.50 AS DECIMAL(5,2)), 'date', CAST('2024-02-29' AS DATE),
      'time', CAST('-12:34:56.5' AS TIME(1)), 'dt', CAST('2024-02-29 01:02:03.456' AS DATETIME(3)),
      'bin', CAST(x'00FF' AS BINARY), 'big', 12345678901234567890, 'f', 0.1), 0),
      (16, JSON_ARRAY(CAST(x'CAFE' AS BINARY), CAST('23:59:59' AS TIME), 1e-7, -0.0), 0),
      (18, CAST(CAST('2024-02-29' AS DATE) AS JSON), 0), (19, CAST(CAST(-1.50 AS DECIMAL(4,2)) AS JSON), 0),
      (20, CAST(CAST('2024-02-29 23:59:59.5' AS DATETIME(1)) AS JSON), 0), (21, CAST(1e15 AS JSON), 0),
      (22, JSON_OBJECT('neg', -4.9e-5, 'big', 1.5e15, 'exp', 1e16, 'tiny', 1e-16), 0)""",
    "INSERT INTO docs VALUES (17, %(big_json)s, 0)",
]

# partial JSON: logged as diffs only with PARTIAL_JSON (and, with FULL images, as whole documents)
DOCS_PARTIAL = [
    """UPDATE docs SET j = JSON_SET(j, '$.a.c[2].d', 'f', '$.new', JSON_ARRAY(1, 'x')), k = 1 WHERE id = 14""",
    "UPDATE docs SET j = JSON_REPLACE(j, '$[1]', 'deux', '$[2]', 99) WHERE id = 13",
    "UPDATE docs SET j = JSON_REMOVE(j, '$.b', '$.\"\"') WHERE id = 14",
    "UPDATE docs SET j = JSON_SET(j, '$.items[7].s', 'changed', '$.ok', false) WHERE id = 17",
    "UPDATE docs SET j = JSON_REPLACE(j, '$.dec', 2.25, '$.f', 'text ''q''') WHERE id = 15",
    "UPDATE docs SET j = JSON_SET(j, '$', JSON_OBJECT('whole', 1)) WHERE id = 12",
    "UPDATE docs SET j = JSON_REMOVE(j, '$[0]'), k = k + 1 WHERE id = 16",
]

VECS = [
    "INSERT INTO vecs VALUES (1, NULL, NULL)",
    "INSERT INTO vecs VALUES (2, STRING_TO_VECTOR('[1.1, -2.5, 3.4028234e38]'), STRING_TO_VECTOR('[0]'))",
    "INSERT INTO vecs VALUES (3, STRING_TO_VECTOR('[1.5e-38, 0.1, -0.333333343]'), STRING_TO_VECTOR('[-1.2e-38]'))",
    "UPDATE vecs SET v3 = STRING_TO_VECTOR('[7, 8, 9]') WHERE id = 2",
]

GEO = [
    "INSERT INTO geo VALUES (1, NULL, NULL, 0)",
    """INSERT INTO geo VALUES (2, ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'),
      ST_GeomFromText('POINT(1 2)'), 0), (3, ST_GeomFromText('LINESTRING(0 0, 1 1)', 4326), NULL, 0),
      (4, ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 2 2))'), ST_GeomFromText('POINT(-1.5 1e300)'), 0)""",
    "UPDATE geo SET k = 1, p = ST_GeomFromText('POINT(3 4)') WHERE id = 2",
    "DELETE FROM geo WHERE id = 3",
]

PARTS = [
    "INSERT INTO parts VALUES (1, 'a'), (15, 'b'), (25, 'c')",
    "UPDATE parts SET id = 16 WHERE id = 1",  # moves p0 -> p1: a source partition
    "UPDATE parts SET v = 'bb' WHERE id = 15",
    "DELETE FROM parts WHERE id = 25",
]


def _session(cur: Any, **settings: str) -> None:
    for name, value in settings.items():
        cur.execute(f"SET SESSION {name} = {value}")


def run_workload(db: Any, database: str = "mtypes") -> None:
    """Every statement above, FULL images first, then the same tables in MINIMAL images with partial
    JSON, one compressed transaction, and GEOMETRY in a binlog file of its own."""
    from tests.support.alltypes import BIG_JSON

    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {database}")
            cur.execute(f"USE {database}")
            _session(cur, sql_mode="''", time_zone="'+00:00'")
            for sql in SCHEMA:
                cur.execute(sql)
            set_all = ",".join(f"s{i}" for i in range(64))
            for sql in NUMS + TIMES + STRS + DOCS + VECS + PARTS:
                cur.execute(sql.replace("{SET_ALL}", set_all).replace("%(big_json)s", conn.escape(BIG_JSON)))
            _session(cur, binlog_row_image="'MINIMAL'", binlog_row_value_options="'PARTIAL_JSON'")
            for sql in DOCS_PARTIAL:
                cur.execute(sql)
            cur.execute("UPDATE nums SET i = i + 1, d8 = -d8 WHERE id IN (2, 3)")
            cur.execute("UPDATE times SET dt6 = '2001-02-03 04:05:06.000007' WHERE id = 4")
            cur.execute("DELETE FROM strs WHERE id = 3")
            cur.execute("UPDATE parts SET id = 5 WHERE id = 16")
            _session(cur, binlog_row_image="'FULL'", binlog_row_value_options="''")
            _session(cur, binlog_transaction_compression="ON")
            cur.execute("BEGIN")
            cur.execute("INSERT INTO nums (id, i, d8) VALUES (10, 42, 0.5)")
            cur.execute("UPDATE docs SET j = JSON_ARRAY('compressed', id) WHERE id < 4")
            cur.execute("INSERT INTO vecs (id, v3) VALUES (10, STRING_TO_VECTOR('[0.5, 0.25, 0.125]'))")
            cur.execute("COMMIT")
            _session(cur, binlog_transaction_compression="OFF")
            cur.execute("FLUSH BINARY LOGS")
            for sql in GEO:
                cur.execute(sql)
    finally:
        conn.close()
