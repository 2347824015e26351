"""The last change per key within a stretch of a change log: what a sync needs of it (the ``binlog``
source's option ``changes=last``).

A sync applies the last change per (table, primary key) of a batch (``binlake.spark.plan``); every
earlier one is read, shipped to Spark, kept and shuffled only to lose. Here each read (a range of a
file) drops them before Spark sees them, in windows of ``WINDOW_ROWS`` rows that roll (what one
keeps is compacted again with the next), by the rule the plan uses, so that the plan's own
last-change-per-key over what the windows give finds what it found over every change:

* a change is replaced by a later one of the same table and key (its ``pk``, compared as encoded:
  equal values of one key encoder are equal bytes; an encoding that differs only keeps both, which
  the plan then orders);
* a primary-key update also deletes its old key: its tombstone (``op`` delete, the old key, the
  update's order key with part ``TOMBSTONE``) is a change of the old key like any other;
* a table is followed through the window's renames by its identity, not its name: a row of ``a``
  before ``RENAME TABLE a TO b`` and one of ``b`` after it are changes of one table (the plan maps
  both to ``b``, the name at the batch's end, and keeps the later); a ``drop_table`` (or a rename
  away) ends a name's table, and a later row of that name is of another, so changes on either side
  of it never replace each other;
* keyless tables' changes and DDL changes are kept as they are, in order;
* a table with an insert or update whose image lacks columns of its layout (``binlog_row_image``
  MINIMAL or NOBLOB: an update logs the columns it changed) keeps every change of the window as it
  is: the plan folds a key's images column by column (``binlake.spark.plan``), and a change that
  was replaced may hold the only value of a column the later ones leave out.

Each row then carries ``changes``: how many row changes of the read it stands for (1 for one kept
as it was, more for the last of several, 0 for a tombstone), so a report still counts every change,
``partial``: its after image lacks columns of its layout (the plan folds its table), and
``json_edits``: it is an update whose after image holds a partial JSON update (the plan's head
refuses the batch from this flag, without a job of its own over the images).
Every server that wrote a change of the window keeps a row (a sink refuses a batch its own server
wrote), and every row that carries its layout's columns (a read with ``columns=first``) is kept. A
partial JSON update is kept whatever replaced it, so the batch is refused as a plain read's is: the
later change need not carry the document (a MINIMAL image leaves out the columns it did not change),
and its edit would be lost without a word.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from binlake.arrowlog.variant import decode, metadata_keys, object_starts, one_field_starts
from binlake.changes import KEY_WIDTH, NAME_OPS, ROW_OPS, TOMBSTONE, Op
from binlake.render.values import PARTIAL_JSON_KEY

# rows compacted at once: a window is held whole, with the carry (~15 MB of Arrow of narrow rows; a
# 125 MB range of the 1 GB benchmark series peaked at 420 MB of RSS with 65,536 and 324 MB with this,
# keeping the same rows: the windows roll)
WINDOW_ROWS = 32_768
# and bytes: wide rows (documents, BLOBs) by count alone held GBs, past the 2 GiB one Arrow binary
# column holds (``combine_chunks`` failed); a batch bigger than this is a window alone
WINDOW_BYTES = 128 << 20
COUNT_FIELD = pa.field("changes", pa.int32())
# a row's after image lacks columns of its layout (``partial_images``): the plan folds its table
PARTIAL_FIELD = pa.field("partial", pa.bool_())
# a row's after image holds a partial JSON update (``_json_edits``): the plan refuses the batch
EDITS_FIELD = pa.field("json_edits", pa.bool_())
ROW_OP_VALUES = pa.array([o.value for o in ROW_OPS])  # ``op`` of a row change
WRITE_OP_VALUES = pa.array([Op.INSERT.value, Op.UPDATE.value])  # the row changes with an after image
_SPLITS = pa.array([o.value for o in NAME_OPS if o != Op.RENAME_COLUMN])  # rename_table, drop_table
_KEY = ["_table", "_key_value", "_key_metadata"]  # a change's table (``_identities``) and key


def compacted_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of what ``last_per_key`` yields of batches of ``schema``."""
    return schema.append(COUNT_FIELD).append(PARTIAL_FIELD).append(EDITS_FIELD)


def last_per_key(
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    window: int = WINDOW_ROWS,
    window_bytes: int = WINDOW_BYTES,
    suspects: Collection[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """``batches`` (change-log batches of ``schema``, in order) with only the last change per key,
    the ``changes`` each row stands for, whether its image is ``partial`` and whether it holds
    ``json_edits`` (``compacted_schema``). ``suspects``: the positions of the events that may hold
    partial JSON updates (PARTIAL_UPDATE_ROWS), filled as the batches are read (None: not known).

    Compacted a window at a time, of about ``window`` rows and at most ``window_bytes`` (or one
    batch), and rolling: what a window keeps is carried into the next and compacted with it, so a
    read keeps about one change per key of the tables it touched, however long it is. The carry is
    given (and the next window starts afresh) once it holds over half a window's rows or bytes:
    a table whose changes are all kept (partial images, keyless) never grows it past that."""
    held: list[pa.RecordBatch] = []
    carry: pa.Table | None = None  # what the windows so far keep, in order key order
    rows = size = 0
    widths: dict[int, int] = {}  # a layout number's column count (its columns come on its first row)

    def roll() -> list[pa.RecordBatch]:
        nonlocal carry, rows, size
        out = compacted(pa.Table.from_batches(held, schema), widths, suspects, carry)
        held.clear()
        if out.num_rows > window // 2 or out.nbytes > window_bytes // 2:
            carry, rows, size = None, 0, 0
            return out.to_batches()
        carry, rows, size = out, out.num_rows, out.nbytes
        return []

    for b in batches:
        if held and size + b.nbytes > window_bytes:
            yield from roll()
        held.append(b)
        rows, size = rows + b.num_rows, size + b.nbytes
        if rows >= window or size >= window_bytes:
            yield from roll()
    if held:
        yield from roll()
    if carry is not None:
        yield from carry.to_batches()


def compacted(
    t: pa.Table,
    widths: dict[int, int] | None = None,
    suspects: Collection[int] | None = None,
    carry: pa.Table | None = None,
) -> pa.Table:
    """One window's last change per key (module docstring), in order key order. ``widths``: the
    column count of each layout number seen so far in the read (a read with ``columns=first``),
    updated here; ``suspects`` as in ``last_per_key``; ``carry``: what the windows before kept
    (``compacted_schema``), compacted with ``t`` as the changes before it, each standing for the
    ``changes`` it counts (``partial`` and ``json_edits`` are found again, alike)."""
    counts = pa.repeat(pa.scalar(1, pa.int32()), t.num_rows)
    if carry is not None and carry.num_rows:
        counts = pa.concat_arrays([carry["changes"].combine_chunks(), counts])
        t = pa.concat_tables([carry.select(t.column_names), t])
    t = t.combine_chunks()  # one chunk: every step below then runs over whole arrays
    n = t.num_rows
    op, pk, before_key = t["op"], t["pk"], t["pk_before"]
    row_ops = pc.is_in(op, ROW_OP_VALUES)
    partial = partial_images(t, row_ops, widths)
    with_key = pc.and_(row_ops, pc.is_valid(pk))
    tables = _identities(t)
    # the changes of a table with a partial image stay as they are, like a keyless table's
    keyed = pc.and_(with_key, pc.invert(_tables_of(tables, with_key, partial))).combine_chunks()
    moved = pc.and_(
        pc.and_(keyed, pc.equal(op, Op.UPDATE.value)),
        pc.and_(pc.is_valid(before_key), pc.invert(_same_key(pk, before_key))),
    ).fill_null(False)
    index = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)  # 0 … n-1
    # a row's rank: its place in order key order, a tombstone just before its update
    rows = t.append_column(COUNT_FIELD, counts)
    rows = rows.append_column(PARTIAL_FIELD, partial)
    edits = _json_edits(t, row_ops, suspects)
    rows = rows.append_column(EDITS_FIELD, edits)
    rows = rows.append_column("_rank", pc.multiply(index, 2)).append_column("_keyed", keyed)
    both, both_tables = rows, tables
    if pc.any(moved).as_py():  # a tombstone is a change of its update's table
        both = pa.concat_tables([rows, _tombstones(rows.filter(moved))])
        both_tables = pa.chunked_array([tables, tables.filter(moved)])
    # the keys alone are grouped (filtering the whole rows would copy every image)
    keys = pa.table(
        {
            "_table": both_tables,
            "_key_value": pc.struct_field(both["pk"], "value"),
            "_key_metadata": pc.struct_field(both["pk"], "metadata"),
            "_rank": both["_rank"],
            "changes": both["changes"],
        }
    )
    groups = (
        keys.filter(both["_keyed"])
        .group_by(_KEY, use_threads=False)
        .aggregate([("_rank", "max"), ("changes", "sum")])
    )
    last = groups["_rank_max"].combine_chunks()
    ranks = pa.concat_arrays(
        [
            last,
            pc.multiply(index.filter(pc.invert(keyed)), 2),
            _carriers(t, index, keyed),
            pc.multiply(index.filter(edits), 2),
        ]
    )
    ranks = pa.concat_arrays([ranks, _servers_left(t, both, ranks)])
    chosen = pc.is_in(both["_rank"], ranks)
    if both is rows:  # in rank order already
        kept = both.filter(chosen)
    else:  # each tombstone just before its update
        at = pc.indices_nonzero(chosen)
        kept = both.take(pc.take(at, pc.sort_indices(pc.take(both["_rank"], at))))
    # a group's last change stands for the group; a row kept for its server counts nothing more
    total = pc.take(groups["changes_sum"].combine_chunks(), pc.index_in(kept["_rank"], last))
    count = pc.if_else(
        pc.is_valid(total),
        pc.cast(total, pa.int32()),
        pc.if_else(kept["_keyed"], pa.scalar(0, pa.int32()), kept["changes"]),
    )
    out = kept.select(t.column_names).append_column(COUNT_FIELD, count)
    out = out.append_column(PARTIAL_FIELD, kept[PARTIAL_FIELD.name])
    return out.append_column(EDITS_FIELD, kept[EDITS_FIELD.name])


def _tables_of(tables: pa.Array, rows: pa.Array, marked: pa.Array) -> pa.Array:
    """Of ``rows``, those whose table (``tables``: each row's, ``_identities``) has a ``marked`` row."""
    if not pc.any(marked).as_py():
        return pa.repeat(pa.scalar(False), len(tables))
    found = pc.unique(tables.filter(marked))
    return pc.and_(rows, pc.is_in(tables, found)).fill_null(False)


def partial_images(t: pa.Table, rows: pa.Array, widths: dict[int, int] | None = None) -> pa.Array:
    """Per row of change-log window ``t``, whether it is an insert or update of ``rows`` whose after
    image lacks columns of its layout (MINIMAL/NOBLOB: it holds fewer fields than the layout has
    columns; ``widths`` as in ``compacted``). An image is whole where it begins as an object of
    its layout's column count does (``object_starts``): each row's head is cut once per head
    length and looked up among the heads of every count the window's layouts have."""
    writes = pc.and_(rows, pc.is_in(t["op"], WRITE_OP_VALUES)).fill_null(False)
    if not pc.any(writes).as_py():
        return pa.repeat(pa.scalar(False), t.num_rows)
    count = _layout_widths(t, widths)
    after = t["after"]
    # the images' bytes as they are (a NULL image's are never read: it is not whole, below)
    values = pa.chunked_array([c.field("value") for c in after.chunks], after.type.field("value").type)
    heads: dict[int, tuple[list[bytes], list[int]]] = {}  # a head's length -> heads, their counts
    for w in pc.unique(count.filter(writes)).to_pylist():
        if w is None:  # a layout whose columns this read has not shown: taken as partial
            continue
        for start in object_starts(w):
            found = heads.setdefault(len(start), ([], []))
            found[0].append(start)
            found[1].append(w)
    full = pa.repeat(pa.scalar(False), t.num_rows)
    for length, (starts, counts) in heads.items():
        at = pc.index_in(pc.binary_slice(values, 0, length), pa.array(starts, pa.binary()))
        begins_as = pc.take(pa.array(counts, pa.int32()), at)  # the count its head is of, or NULL
        full = pc.or_(full, pc.equal(count, begins_as).fill_null(False))
    full = pc.and_(full, pc.is_valid(after))
    return pc.and_(writes, pc.invert(full)).combine_chunks()


def _layout_widths(t: pa.Table, widths: dict[int, int] | None) -> pa.Array:
    """Each row's layout's column count: its ``columns``' length, or in a read with ``columns=first``
    that of its ``layout`` number (``widths``, updated from the rows that carry columns)."""
    lengths = pc.list_value_length(t["columns"].combine_chunks())
    if "layout" not in t.column_names:
        return lengths
    known = widths if widths is not None else {}
    numbers = t["layout"].combine_chunks()
    carrying = pc.is_valid(lengths)
    for number, width in zip(
        numbers.filter(carrying).to_pylist(), lengths.filter(carrying).to_pylist(), strict=True
    ):
        known[number] = width
    ids = pa.array(list(known), pa.int64())
    return pc.take(pa.array(list(known.values()), pa.int32()), pc.index_in(numbers, ids))


def _same_key(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    """Two variant columns equal byte for byte (value and metadata), per row."""
    return pc.and_(
        pc.equal(pc.struct_field(a, "value"), pc.struct_field(b, "value")),
        pc.equal(pc.struct_field(a, "metadata"), pc.struct_field(b, "metadata")),
    )


def _tombstones(moved: pa.Table) -> pa.Table:
    """The deletes of the old keys of primary-key updates (``moved``: those rows), as ``latest_per_key``
    makes them: the old key, no images, the update's order key with part TOMBSTONE, counted 0."""
    m = moved.num_rows
    replaced = {
        "op": pa.array([Op.DELETE.value] * m, moved.schema.field("op").type),
        "pk": moved["pk_before"],
        "pk_before": pa.nulls(m, moved.schema.field("pk_before").type),
        "before": pa.nulls(m, moved.schema.field("before").type),
        "after": pa.nulls(m, moved.schema.field("after").type),
        "order_key": pc.binary_replace_slice(
            moved["order_key"], start=KEY_WIDTH - 1, stop=KEY_WIDTH, replacement=bytes([TOMBSTONE])
        ),
        "changes": pa.repeat(pa.scalar(0, pa.int32()), m),
        "partial": pa.repeat(pa.scalar(False), m),
        "json_edits": pa.repeat(pa.scalar(False), m),
        "_rank": pc.subtract(moved["_rank"], 1),
    }
    return pa.table(
        {name: replaced.get(name, moved[name]) for name in moved.column_names}, schema=moved.schema
    )


class _Tables:
    """The table each name stands for now, as a number: a name met for the first time is a new
    table; a rename or drop moves or ends what a name stands for (``_identities``)."""

    def __init__(self) -> None:
        self.now: dict[str, int] = {}
        self.fresh = itertools.count()

    def of(self, name: str) -> int:
        got = self.now.get(name)
        if got is None:
            got = self.now[name] = next(self.fresh)
        return got

    def rename(self, old: str | None, new: str | None, op: str) -> None:
        table = self.now.pop(old, None) if old is not None else None
        if op == Op.RENAME_TABLE.value and new is not None:
            self.now[new] = table if table is not None else next(self.fresh)


def _identities(t: pa.Table) -> pa.Array:
    """Per row of window ``t``, the table it is a change of, as a number (module docstring): its
    name's at the window's start, followed through the window's ``rename_table`` changes in order;
    a ``drop_table``, or a rename away, ends a name's table (a later row of the name is of a new
    one). Without renames or drops, one number per name. Each stretch between two of them looks
    up only the names its rows have: a carried window holds every drop of the range, and every
    name of it (an ETL's staging tables), and looking up each name at each drop took their product
    per window."""
    names = pc.dictionary_encode(pc.binary_join_element_wise(t["db"], t["table"], "\x00"))
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    known = names.dictionary.to_pylist()
    splits = pc.indices_nonzero(pc.is_in(t["op"], _SPLITS)).to_pylist()
    tables = _Tables()
    changes = t.take(splits).select(["op", "before", "after"]).to_pylist() if splits else []
    indices = names.indices
    bounds = [0, *(s + 1 for s in splits), len(t)]  # (a split's own row, keyless, ends its stretch)
    pieces = []
    for j, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        if j:  # the split that ends the stretch before: what the names stand for after it
            change = changes[j - 1]
            old, new = (
                None if image is None else _full_name(decode(image["value"], image["metadata"]))
                for image in (change["before"], change["after"])
            )
            tables.rename(old, new, change["op"])
        piece = indices.slice(lo, hi - lo)
        used = pc.unique(piece)
        ids = pa.array([tables.of(known[u]) for u in used.to_pylist()], pa.int64())
        pieces.append(pc.take(ids, pc.index_in(piece, used)))
    return pa.concat_arrays(pieces)


def _full_name(name: dict[str, str]) -> str:
    """A rename's or drop's name as ``_identities`` keys names: db, NUL, table."""
    return f"{name['db']}\x00{name['table']}"


def _carriers(t: pa.Table, index: pa.Array, keyed: pa.Array) -> pa.Array:
    """The ranks of the row changes that carry their layout's columns where a read writes them once
    (``ColumnsOnce``: rows with a ``layout`` number, NULL columns on the rest): kept whatever replaced
    them, or a kept row of their layout (here or in a later window) would have no columns."""
    if "layout" not in t.column_names:
        return pa.array([], pa.int64())
    carrying = pc.and_(keyed, pc.is_valid(t["columns"].combine_chunks()))
    return pc.multiply(index.filter(carrying), 2)


def _json_edits(t: pa.Table, rows: pa.Array, suspects: Collection[int] | None = None) -> pa.Array:
    """Per row of window ``t``, whether it is an update of ``rows`` whose after image holds a partial
    JSON update (a column's value an object ``{"json_diff": [...]}``: a JSON column otherwise holds a
    string). Their layouts' metadata name the key (every layout with a JSON column's does); of
    those, the images holding an object of that one key (``_partial_marks``, searched per metadata)
    are decoded (the bytes of a value may look so too). ``suspects``: only rows of events at those
    positions can be (PARTIAL_UPDATE_ROWS; None: any)."""
    n = t.num_rows
    if suspects is not None and not suspects:
        return pa.repeat(pa.scalar(False), n)
    after = t["after"].combine_chunks()
    values, metadata = pc.struct_field(after, "value"), pc.struct_field(after, "metadata")
    maybe = pc.and_(
        pc.and_(rows, pc.equal(t["op"], Op.UPDATE.value)), pc.match_substring(metadata, PARTIAL_JSON_KEY)
    ).fill_null(False)
    if isinstance(maybe, pa.ChunkedArray):
        maybe = maybe.combine_chunks()
    if not pc.any(maybe).as_py():
        return pa.repeat(pa.scalar(False), n)
    if suspects is not None:  # the window's own candidates looked up (the read's suspects grow)
        positions = t["position"].combine_chunks()
        hits = [p for p in pc.unique(positions.filter(maybe)).to_pylist() if p in suspects]
        maybe = pc.and_(maybe, pc.is_in(positions, pa.array(hits, pa.int64()))).fill_null(False)
    found: list[int] = []
    for meta in pc.unique(metadata.filter(maybe)).to_pylist():
        marks = _partial_marks(meta)
        if not marks:  # the key's name is only part of another's
            continue
        at = pc.indices_nonzero(pc.and_(maybe, pc.equal(metadata, meta)))
        hit = at.filter(functools.reduce(pc.or_, (pc.match_substring(values.take(at), m) for m in marks)))
        for i, value in zip(hit.to_pylist(), values.take(hit).to_pylist(), strict=True):
            if any(isinstance(v, dict) and PARTIAL_JSON_KEY in v for v in decode(value, meta).values()):
                found.append(i)
    if not found:
        return pa.repeat(pa.scalar(False), n)
    return pc.is_in(pa.array(range(n), pa.int64()), pa.array(found, pa.int64()))


def _partial_marks(metadata: bytes) -> list[bytes]:
    """How an object ``{"json_diff": ...}`` starts under ``metadata`` (none: no such key there)."""
    keys = metadata_keys(metadata)
    return one_field_starts(keys.index(PARTIAL_JSON_KEY)) if PARTIAL_JSON_KEY in keys else []


def _servers_left(t: pa.Table, both: pa.Table, ranks: pa.Array) -> pa.Array:
    """For each server that wrote changes of window ``t`` but none of the rows of ``ranks``, the
    rank of its last change (kept too: a superseded change the plan orders again changes nothing)."""
    kept = set(pc.unique(both["server_id"].filter(pc.is_in(both["_rank"], ranks))).to_pylist())
    missing = set(pc.unique(t["server_id"]).to_pylist()) - kept
    servers = t["server_id"].combine_chunks()
    out = []
    for server in sorted(missing, key=lambda s: (s is None, s)):
        mine = pc.is_null(servers) if server is None else pc.equal(servers, server).fill_null(False)
        out.append(pc.max(pc.indices_nonzero(mine)).as_py() * 2)
    return pa.array(out, pa.int64())
