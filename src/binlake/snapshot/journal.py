"""The snapshot's journal: its plan (the binlog point the replica starts from, each table's key
ranges) and which chunks a sink has applied, so a killed snapshot continues where it stopped and
never starts again from zero. Kept beside the sink's data (a target directory, or a state
directory for JDBC sinks: the executors never need it, only the driver), replaced atomically.

Key bounds keep their type in the file (number, text, bytes): they go back to the server as the
same parameters, so a resumed snapshot reads exactly the ranges it planned.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from binlake.snapshot.chunks import Bound, KeyRange

FORMAT = 1
TableName = tuple[str, str]
ChunkId = tuple[str, str, int]  # db, table, index of the range in the table's plan


def _value(v: Any) -> dict[str, str]:
    if isinstance(v, bytes):
        return {"b": v.hex()}
    if isinstance(v, str):
        return {"s": v}
    if isinstance(v, (int, Decimal)):
        return {"n": str(v)}
    raise TypeError(f"a key bound of type {type(v).__name__}")


def _parse(d: dict[str, str]) -> Any:
    ((kind, text),) = d.items()
    return bytes.fromhex(text) if kind == "b" else text if kind == "s" else Decimal(text)


def _bound(b: Bound | None) -> list[dict[str, str]] | None:
    return None if b is None else [_value(v) for v in b]


def _unbound(b: list[dict[str, str]] | None) -> Bound | None:
    return None if b is None else tuple(_parse(v) for v in b)


class JournalError(ValueError):
    """A journal that is not one binlake wrote (or a newer binlake)."""


@dataclass
class SnapshotJournal:
    path: Path
    start: tuple[str, int]  # where the replica starts: (binlog file, position) before the first chunk
    plan: dict[TableName, list[KeyRange]]
    done: set[ChunkId] = field(default_factory=set)

    @property
    def chunks(self) -> list[ChunkId]:
        return [(db, t, i) for (db, t), ranges in self.plan.items() for i in range(len(ranges))]

    @property
    def remaining(self) -> list[ChunkId]:
        return [c for c in self.chunks if c not in self.done]

    @property
    def complete(self) -> bool:
        return not self.remaining

    def mark_done(self, chunks: list[ChunkId]) -> None:
        """Record chunks a sink has committed (call after the commit: a chunk applied twice is
        harmless, one recorded but not applied would be lost)."""
        self.done.update(chunks)
        self.save()

    def save(self) -> None:
        data = {
            "format": FORMAT,
            "start": {"file": self.start[0], "position": self.start[1]},
            "tables": [
                {"db": db, "table": t, "ranges": [[_bound(r.low), _bound(r.high)] for r in ranges]}
                for (db, t), ranges in self.plan.items()
            ],
            "done": sorted([db, t, i] for db, t, i in self.done),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SnapshotJournal | None:
        """The journal at ``path``, or None when there is none yet."""
        p = Path(path)
        if not p.exists():
            return None
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                raise JournalError(
                    f"{p}: snapshot journal format {data.get('format')!r}, this binlake reads {FORMAT}"
                )
            plan = {
                (t["db"], t["table"]): [KeyRange(_unbound(lo), _unbound(hi)) for lo, hi in t["ranges"]]
                for t in data["tables"]
            }
            done = {(db, t, int(i)) for db, t, i in data["done"]}
            start = (data["start"]["file"], int(data["start"]["position"]))
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, JournalError):
                raise
            raise JournalError(f"{p}: not a snapshot journal binlake wrote ({e})") from None
        return cls(p, start, plan, done)
