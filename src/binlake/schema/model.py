"""Table definitions as DDL describes them, and how they complete a TABLE_MAP that lacks metadata."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from binlake.dialects.mysql import quote_ident

# charset -> a collation id of it (decoding needs the charset, not the exact collation)
CHARSET_COLLATION: dict[str, int] = {
    "big5": 1,
    "latin2": 9,
    "dec8": 3,
    "cp850": 4,
    "latin1": 8,
    "hp8": 6,
    "koi8r": 7,
    "swe7": 10,
    "ascii": 11,
    "ujis": 12,
    "sjis": 13,
    "cp1251": 51,
    "hebrew": 16,
    "tis620": 18,
    "euckr": 19,
    "koi8u": 22,
    "gb2312": 24,
    "greek": 25,
    "cp1250": 26,
    "gbk": 28,
    "cp1257": 59,
    "latin5": 30,
    "utf8": 33,
    "utf8mb3": 33,
    "ucs2": 35,
    "cp866": 36,
    "macce": 38,
    "macroman": 39,
    "cp852": 40,
    "latin7": 41,
    "utf8mb4": 45,
    "cp1256": 57,
    "utf16": 54,
    "utf16le": 56,
    "utf32": 60,
    "binary": 63,
    "cp932": 95,
    "eucjpms": 97,
    "gb18030": 248,
}

# the server default when nothing says otherwise (MySQL 8 and MariaDB 10.6+: utf8mb4)
DEFAULT_CHARSET = "utf8mb4"

# DDL type names (sqlglot's) -> binlog column type codes they are logged as
BINLOG_TYPES: dict[str, set[int]] = {
    "TINYINT": {1},
    "UTINYINT": {1},
    "BOOLEAN": {1},
    "SMALLINT": {2},
    "USMALLINT": {2},
    "MEDIUMINT": {9},
    "UMEDIUMINT": {9},
    "INT": {3},
    "UINT": {3},
    "BIGINT": {8},
    "UBIGINT": {8},
    "FLOAT": {4},
    "DOUBLE": {5},
    "DECIMAL": {246},
    "UDECIMAL": {246},
    "DATE": {10, 14},
    "TIME": {11, 19},
    "DATETIME": {12, 18},
    "TIMESTAMP": {7, 17},
    "TIMESTAMPTZ": {7, 17},
    "YEAR": {13},
    "CHAR": {254},
    "VARCHAR": {15},
    "BINARY": {254},
    "VARBINARY": {15},
    "TINYTEXT": {252},
    "TEXT": {252},
    "MEDIUMTEXT": {252},
    "LONGTEXT": {252},
    "TINYBLOB": {252},
    "BLOB": {252},
    "MEDIUMBLOB": {252},
    "LONGBLOB": {252},
    "JSON": {245, 252},
    "ENUM": {254},
    "SET": {254},
    "BIT": {16},
    "GEOMETRY": {255},
    "VECTOR": {242},
}
MYSQL_NAMES = {"TIMESTAMPTZ": "TIMESTAMP"}  # sqlglot's names that MySQL spells otherwise (unsigned: below)
UNSIGNED_TYPES = {"UTINYINT", "USMALLINT", "UMEDIUMINT", "UINT", "UBIGINT", "UDECIMAL"}
BINARY_TYPES = {"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "GEOMETRY", "VECTOR"}
TEXT_TYPES = {"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET", "JSON"}


@dataclass
class ColumnSpec:
    name: str
    type_name: str  # sqlglot's type name, e.g. UINT, VARCHAR
    charset: str | None = None
    nullable: bool = True
    enum_values: list[str] | None = None
    set_values: list[str] | None = None
    params: list[str] = field(default_factory=list)  # length, precision/scale, fsp as written

    @property
    def unsigned(self) -> bool:
        return self.type_name in UNSIGNED_TYPES

    def mysql_type(self) -> str:
        """The column's type as MySQL writes it, with its character set and nullability."""
        base = MYSQL_NAMES.get(self.type_name, self.type_name)
        if self.unsigned:
            base = self.type_name[1:]
        t = base + (f"({','.join(self.params)})" if self.params else "")
        for values in (self.enum_values, self.set_values):
            if values is not None:
                t += "(" + ",".join(_quote_string(v) for v in values) + ")"
        if self.unsigned:
            t += " UNSIGNED"
        if self.charset and self.type_name in TEXT_TYPES and self.type_name != "JSON":
            t += f" CHARACTER SET {self.charset}"
        # a TIMESTAMP without NULL is NOT NULL on servers without explicit_defaults_for_timestamp
        return t + (" NOT NULL" if not self.nullable else " NULL" if base == "TIMESTAMP" else "")

    @property
    def collation(self) -> int | None:
        if self.type_name in BINARY_TYPES:
            return 63
        if self.type_name in TEXT_TYPES and self.charset:
            return CHARSET_COLLATION.get(self.charset.lower(), 45)
        return None


@dataclass
class TableDef:
    database: str
    name: str
    columns: list[ColumnSpec] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    charset: str | None = None

    def index(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name.lower() == name.lower():
                return i
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableDef:
        cols = [ColumnSpec(**c) for c in d["columns"]]
        return cls(d["database"], d["name"], cols, list(d.get("primary_key") or []), d.get("charset"))

    def ddl(self) -> str:
        """A MySQL CREATE TABLE of the definition, which loads back as ``--schema`` to the same
        definition (sqlglot's type names, such as USMALLINT or TIMESTAMPTZ, are not MySQL's)."""
        parts = [f"  {quote_ident(c.name)} {c.mysql_type()}" for c in self.columns]
        if self.primary_key:
            parts.append("  PRIMARY KEY (" + ", ".join(quote_ident(k) for k in self.primary_key) + ")")
        tail = f" DEFAULT CHARSET={self.charset}" if self.charset else ""
        name = f"{quote_ident(self.database)}.{quote_ident(self.name)}"
        return f"CREATE TABLE {name} (\n" + ",\n".join(parts) + f"\n){tail}"


def _quote_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
