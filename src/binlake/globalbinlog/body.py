"""A piece's body as the node reader gives it: table maps decoded, row images kept as their bytes.

The merge orders transactions by what surrounds their rows (XA control, TSO carriers), never by the
rows; the global binlog writer copies the row images as they are (``encode_rows`` writes kept bytes
back unchanged). So rows are decoded only when something looks at them (the change log, logical
names dropping a column, ``Piece.rows``): iterating the body decodes them once, as reading with
decoding on would have; ``as_read`` gives the writer the events without decoding anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from binlake.decoder import decoded
from binlake.events.base import Event


@dataclass(slots=True)  # no __dict__: one object less per held piece for the cycle collector
class NodeBody(Sequence[Event]):
    """Body events read without decoding rows; iterating decodes them (once: kept after)."""

    raw: Sequence[Event]  # a tuple from the sorter
    _full: list[Event] | None = field(default=None, repr=False, compare=False)

    def full(self) -> list[Event]:
        if self._full is None:
            self._full = [decoded(e) for e in self.raw]
        return self._full

    def __iter__(self) -> Iterator[Event]:
        return iter(self.full())

    def __len__(self) -> int:
        return len(self.raw)

    def __bool__(self) -> bool:
        return bool(self.raw)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Event]: ...
    def __getitem__(self, i: Any) -> Any:
        return self.full()[i]

    def __getstate__(self) -> dict[str, Any]:  # a checkpoint or a Spark task ships the bytes only
        return {"raw": self.raw, "_full": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.raw, self._full = state["raw"], None


def as_read(events: Sequence[Event]) -> Iterable[Event]:
    """The events as the node reader gave them (rows not decoded where they were not): what the
    writer copies."""
    if isinstance(events, NodeBody):
        return events.raw
    undecoded = getattr(events, "undecoded", None)
    return undecoded() if callable(undecoded) else events
