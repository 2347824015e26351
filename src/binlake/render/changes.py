"""Row changes as JSON lines: one object per inserted, updated or deleted row, in a fixed envelope
a Debezium or Maxwell user recognises (README "binlake changes" documents it field by field).

Built on the core change model (``binlake.changes.row_changes``: ``RowChange``, ``OrderKey``);
values in the change log's encoding (``render.values.json_value``), images and keys written by a
formatter generated once per table layout (``render.jsonrow``). The envelope's keys and their order
never change; a field without a value is ``null``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from operator import itemgetter
from typing import Any

from binlake.changes import ROW_OPS, Layout, Op, row_changes
from binlake.events.rows import ABSENT
from binlake.render.jsonrow import ImageJson, ImageJsonCache, quote
from binlake.txn import Transaction

ENVELOPE_VERSION = 1
OP_CODES = {Op.INSERT: "c", Op.UPDATE: "u", Op.DELETE: "d"}  # Debezium's op letters
FIELDS = ("op", "type", "database", "table", "key", "before", "after", "source", "transaction", "order_key")
SOURCE_FIELDS = ("file", "pos", "row", "server_id", "gtid", "ts_ms", "ts_us")
TRANSACTION_FIELDS = ("id", "pos", "order")

KeyJson = Callable[[Sequence[Any] | None, Sequence[Any] | None], str]
"""The key object of a change from its (after, before) images."""


def _key_json(layout: Layout, image_json: Callable[[Sequence[str], Sequence[Any]], ImageJson]) -> KeyJson:
    """The primary-key columns (in table order) with their values, from the after image when it
    carries them all, else the before image (a minimal after image leaves out an unchanged key)."""
    index = [i for i, c in enumerate(layout) if c.pk]
    if not index:
        return lambda after, before: "null"
    names = [layout[i].name for i in index]
    fmt = image_json(names, [layout[i] for i in index])
    pick = itemgetter(*index)
    single = len(index) == 1

    def key_json(after: Sequence[Any] | None, before: Sequence[Any] | None) -> str:
        for image in (after, before):
            if image is not None:
                values = (pick(image),) if single else pick(image)
                if not any(v is ABSENT for v in values):
                    return fmt(values)
        return "null"

    return key_json


def _names(layout: Layout) -> list[str]:
    return [c.name for c in layout]


class ChangeLines:
    """The JSON lines of transactions' row changes, with what it keeps between them: quoted
    names, image and key formatters per layout."""

    def __init__(self) -> None:
        self._images = ImageJsonCache()
        self._keys: dict[int, tuple[Layout, KeyJson]] = {}
        self._names: dict[tuple[str, str, Op], str] = {}
        self._files: dict[str, str] = {}

    def _key(self, layout: Layout) -> KeyJson:
        hit = self._keys.get(id(layout))
        if hit is not None and hit[0] is layout:
            return hit[1]
        if len(self._keys) >= 4096:
            self._keys.clear()
        fn = _key_json(layout, lambda names, cols: self._images.get(tuple(names), lambda: names, cols))
        self._keys[id(layout)] = (layout, fn)
        return fn

    def _head(self, op: Op, db: str, table: str) -> str:
        """``{"op": …, "type": …, "database": …, "table": …, "key": `` of a table's changes."""
        head = self._names.get((db, table, op))
        if head is None:
            if len(self._names) >= 4096:
                self._names.clear()
            head = self._names[(db, table, op)] = (
                f'{{"op": "{OP_CODES[op]}", "type": "{op.value}", "database": {quote(db)}, '
                f'"table": {quote(table)}, "key": '
            )
        return head

    def lines(self, t: Transaction) -> list[str]:
        """The lines of one finished transaction (its events as selected), in commit order."""
        out: list[str] = []
        gtid = quote(t.gtid) if t.gtid else "null"
        ts_us = t.commit_time_us or None
        ts = 'null, "ts_us": null' if ts_us is None else f'{ts_us // 1000}, "ts_us": {ts_us}'
        order = 0
        tail_txn = ""
        for rc in row_changes(t):
            if rc.op not in ROW_OPS:
                continue
            layout = rc.layout
            assert layout is not None
            image = self._images.get(layout, partial(_names, layout), layout)
            before, after = rc.before, rc.after
            file = self._files.get(rc.file)
            if file is None:
                file = self._files[rc.file] = quote(rc.file)
            if not tail_txn:
                txn_id = gtid if t.gtid else quote(f"{rc.file}:{t.start}")
                tail_txn = f'"gtid": {gtid}, "ts_ms": {ts}}}, "transaction": {{"id": {txn_id}, "pos": {t.start}, "order": '
            out.append(
                "".join(
                    (
                        self._head(rc.op, rc.db, rc.table),
                        self._key(layout)(after, before),
                        ', "before": ',
                        "null" if before is None else image(before),
                        ', "after": ',
                        "null" if after is None else image(after),
                        ', "source": {"file": ',
                        file,
                        f', "pos": {rc.position}, "row": {rc.order_key.row}, "server_id": {rc.server_id}, ',
                        tail_txn,
                        f'{order}}}, "order_key": "{rc.order_key.encode().hex()}"}}',
                    )
                )
            )
            order += 1
        return [_separators(line) for line in out] if _has_separators(out) else out


_LINE_SEPARATORS = {0x2028: "\\u2028", 0x2029: "\\u2029"}


def _has_separators(lines: list[str]) -> bool:
    return any("\u2028" in line or "\u2029" in line for line in lines)


def _separators(line: str) -> str:
    """U+2028/U+2029 escaped: valid raw in JSON, but line breaks to many line readers (Python's
    ``splitlines``, JavaScript before ES2019), which would cut a change in two."""
    return line.translate(_LINE_SEPARATORS)


def render_changes(transactions: Iterable[Transaction]) -> Iterator[str]:
    """One JSON line per row change of the transactions, in order."""
    lines = ChangeLines().lines
    for t in transactions:
        yield from lines(t)
