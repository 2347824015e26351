"""How untrusted source names (database, table, column) become names in a target, injectively.

Everything in a binlog is someone else's input: a table may be called ``../../x``, ``a.b``, ``k` OR
TRUE --`` or ``_binlake_order_key``. Three rules keep every target safe and every source table
distinct:

1. **Reserved prefix.** binlake's own tables and columns (``_binlake_order_key``, staging and
   kept-aside tables …) start with ``_binlake_``. A source name that starts with it gets the prefix
   once more (``_binlake_x`` -> ``_binlake__binlake_x``), so no source name can ever be one of
   binlake's, and names binlake derives (``_binlake_dropped_…``) never meet a source name.
2. **File names** (Delta table directories, Parquet snapshots, one-database SQL targets) use
   ``path_name(db, table)``: ``<db>.<table>`` with every character outside ``[A-Za-z0-9_]``
   written as ``@xxxx`` (its UTF-16 code units in hex, as MySQL names its own table files), so the
   result has no ``/``, ``\\``, ``..``, NUL, space or leading dot, and exactly one unescaped ``.``
   tells the database from the table. ``source_of`` reads it back.
3. **Length limits** (file names 255 bytes, PostgreSQL identifiers 63 bytes, MariaDB 64
   characters): a name that does not fit is cut and ends in ``~`` plus a hash of the whole name
   (``fit``). Such a name is not reversible: sinks record it (see ``NameBook``).

A collision can only come from a hash collision or a name crafted to look like another name's
shortened form; ``NameBook.claim`` refuses both with an error instead of merging two tables.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_PREFIX = "_binlake_"
NAME_BOOK = "_binlake_tables.json"  # beside file-based targets: target file name -> [db, table]
MAX_FILE_NAME = 200  # bytes; below the usual 255 so suffixes (.parquet, .tmp) still fit
_SAFE = re.compile(r"[A-Za-z0-9_]")
_ESCAPED = re.compile(r"@([0-9a-f]{4})")


class NameCollisionError(ValueError):
    """Two different source names would land on one target name."""


def escape_reserved(name: str) -> str:
    """A source name that cannot be one of binlake's own (rule 1)."""
    return SYSTEM_PREFIX + name if name.startswith(SYSTEM_PREFIX) else name


def unescape_reserved(name: str) -> str:
    return name[len(SYSTEM_PREFIX) :] if name.startswith(SYSTEM_PREFIX + SYSTEM_PREFIX) else name


def dropped_name(table: str, file_number: int, position: int) -> str:
    """Where a table dropped (or truncated) upstream is kept aside with its rows."""
    return f"{SYSTEM_PREFIX}dropped_{file_number}_{position}_{table}"


def replaced_name(name: str, label: int | str) -> str:
    """Where a target that was in the way of a rename is kept aside (never lost); ``label`` says
    which batch (and step) put it there."""
    return f"{SYSTEM_PREFIX}replaced_{label}_{name}"


def renaming_name(i: int) -> str:
    """A free temporary name for swaps and cycles of renames."""
    return f"{SYSTEM_PREFIX}renaming_{i}"


def encode_component(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_]`` as ``@xxxx`` (UTF-16 code units)."""
    out = []
    for ch in name:
        if _SAFE.fullmatch(ch):
            out.append(ch)
        else:
            units = ch.encode("utf-16-be", "surrogatepass")  # undecodable bytes kept as lone surrogates
            out.extend(f"@{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
    return "".join(out)


def decode_component(text: str) -> str:
    """The inverse of ``encode_component`` (UnicodeError for text it cannot have made)."""
    units = bytearray()
    for escaped, plain in re.findall(r"@([0-9a-f]{4})|(.)", text):
        units += bytes.fromhex(escaped) if escaped else plain.encode("utf-16-be", "surrogatepass")
    name = units.decode("utf-16-be", "surrogatepass")
    if encode_component(name) != text:
        raise UnicodeError(f"{text!r} is not an encoded name")
    return name


def fit(name: str, limit: int, size: Callable[[str], int] = len, whole: str | None = None) -> str:
    """``name`` if ``size(name) <= limit``, else a prefix of it, ``~`` and 16 hex digits of the
    SHA-256 of ``whole`` (default: ``name``): stable across runs, distinct for distinct names."""
    if size(name) <= limit:
        return name
    import hashlib  # here: the commands that never shorten a name do not load OpenSSL

    digest = "~" + hashlib.sha256((whole if whole is not None else name).encode("utf-8")).hexdigest()[:16]
    cut = name
    while cut and size(cut + digest) > limit:
        cut = cut[:-1]
    return cut + digest


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def path_name(db: str, table: str, limit: int = MAX_FILE_NAME) -> str:
    """The file name for table ``db.table`` (rule 2, shortened by rule 3)."""
    name = f"{encode_component(db)}.{encode_component(table)}"
    return fit(name, limit, utf8_len, whole=json.dumps([db, table]))


def source_of(name: str) -> tuple[str, str] | None:
    """``(db, table)`` of a ``path_name`` that was not shortened; None for any other name."""
    parts = name.split(".")
    if len(parts) != 2 or not all(re.fullmatch(r"(?:[A-Za-z0-9_]|@[0-9a-f]{4})*", p) for p in parts):
        return None
    try:
        return decode_component(parts[0]), decode_component(parts[1])
    except UnicodeError:
        return None


def inside(root: Path, name: str) -> Path:
    """``root / name``, checked to stay a direct child of ``root`` (defence in depth)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        raise NameCollisionError(f"refusing target file name {name!r}")
    return root / name


@dataclass
class NameBook:
    """The record of which source name each target name holds (``{target: [db, table]}``), kept as
    a JSON file beside file-based targets: a reader finds ``db.table`` again even where a name was
    shortened, and a second source name claiming a taken target name is refused."""

    path: Path
    names: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> NameBook:
        return cls(path, json.loads(path.read_text()) if path.exists() else {})

    def claim(self, target: str, db: str, table: str) -> None:
        held = self.names.get(target)
        if held is not None and held != [db, table]:
            raise NameCollisionError(
                f"target name {target!r} holds `{held[0]}`.`{held[1]}` already; "
                f"`{db}`.`{table}` cannot go there too"
            )
        if held is None:
            self.names[target] = [db, table]
            self.save()

    def move(self, old: str, new: str, db: str, table: str) -> None:
        self.names.pop(old, None)
        self.names[new] = [db, table]
        self.save()

    def source(self, target: str) -> tuple[str, str] | None:
        held = self.names.get(target)
        return (held[0], held[1]) if held else source_of(target)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.names, ensure_ascii=False, sort_keys=True))
        os.replace(tmp, self.path)
