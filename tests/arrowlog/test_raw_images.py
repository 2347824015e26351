"""Row images written from the rows' bytes (``_fastvariant.RawImage``, the change log's one pass
over events read with row decoding off) against the reference: the same events decoded, their
``row_changes``, batches by the pure builder. Random layouts of every column type with values of
the right shape (zero dates, text that is not UTF-8, unsigned values past int64, negative
decimals, JSON documents, NULLs, images leaving columns out, keys among them) and damaged bytes;
the corpus and generated series are in ``test_onepass``."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlake.arrowlog.changelog import (
    CHANGELOG_SCHEMA,
    Trim,
    changelog_batches,
    decoded_rows,
    rows_of,
    transaction_batches,
)
from binlake.changes import row_changes
from binlake.errors import MalformedEventError
from binlake.events.rows import NOT_ASKED, Rows
from binlake.events.table_map import TableMap
from binlake.generate import generate
from binlake.reader import BinlogReader
from binlake.txn import Transaction, TransactionGrouper
from binlake.values import column_decoder
from binlake.values.columns import ColumnDef
from binlake.values.json_binary import encode_json_binary
from binlake.values.rowops import image_program
from binlake.values.types import ColumnType
from binlake.wire import bits_set
from tests.values.test_plan import CATALOGUE, layout_case

_fastvariant = pytest.importorskip(
    "binlake.arrowlog._fastvariant", reason="the compiled change log is not built (./dev setup)"
)
_fastrows = pytest.importorskip("binlake.values._fastrows", reason="the compiled decoder is not built")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Transaction:
    """A committed transaction of one rows event, read with row decoding off."""
    out = tmp_path_factory.mktemp("raw")
    f = generate(out / "bin", seed=3, target_bytes=60_000).files[0]
    g = TransactionGrouper(keep_events=True)
    for ev in BinlogReader(f, decode_rows=False):
        for t in g.feed(1, ev):
            rows = [e for e in t.events if isinstance(e.body, Rows)]
            if t.kind == "commit" and len(rows) == 1:
                return t
    raise AssertionError("no transaction of one rows event")


def with_rows(t: Transaction, body: Rows) -> Transaction:
    events = [dataclasses.replace(e, body=body) if isinstance(e.body, Rows) else e for e in t.events]
    return dataclasses.replace(t, events=events)


def copied(t: Transaction) -> Transaction:
    """``t`` with a list of events of its own (decoding its rows replaces the list)."""
    return dataclasses.replace(t, events=list(t.events))


def outcome(build: Any) -> Any:
    try:
        return build()
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return (type(e), str(e))


def same(t: Transaction, size: int) -> Any:
    """The one pass over ``t`` (rows as bytes) and the reference over ``t`` decoded agree."""
    want = outcome(
        lambda: list(changelog_batches(row_changes(decoded_rows(copied(t))), size, compiled=False))
    )
    got = outcome(lambda: list(transaction_batches([copied(t)], "", size, compiled=True)))
    if isinstance(want, tuple):
        assert got == want
        return want
    assert not isinstance(got, tuple), got
    assert [b.num_rows for b in got] == [b.num_rows for b in want]
    assert pa.Table.from_batches(got, CHANGELOG_SCHEMA).equals(pa.Table.from_batches(want, CHANGELOG_SCHEMA))
    return want


def _value(draw: Any, name: str, a: int, b: int) -> bytes:
    """Bytes of one value an operation reads: its fixed size, a length and text or bytes, a JSON
    document; random bytes for a value only its Python decoder reads (CALL)."""
    if name in ("STR",):
        body = draw(st.one_of(st.binary(max_size=12), st.text(max_size=6).map(lambda x: x.encode("utf-8"))))
        body = body[: (1 << (8 * a)) - 1]
        return len(body).to_bytes(a, "little") + body
    if name == "JSON":
        doc = draw(
            st.recursive(
                st.none()
                | st.booleans()
                | st.integers(-(2**63), 2**64 - 1)
                | st.floats(allow_nan=False, allow_infinity=False)
                | st.text(max_size=5),
                lambda kids: (
                    st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3)
                ),
                max_leaves=6,
            )
        )
        body = encode_json_binary(doc)
        return len(body).to_bytes(a, "little") + body
    if name == "CALL":
        return draw(st.binary(max_size=10))
    return draw(st.binary(min_size=_fastrows._size(name, a, b), max_size=_fastrows._size(name, a, b)))


@st.composite
def rows_events(draw: Any) -> tuple[TableMap, Rows]:
    """A table of up to 8 catalogue columns (some of them its key) and a rows event of 1-3 rows
    whose values have the shape their operations read, its last byte cut off at times."""
    picks = draw(st.lists(st.integers(0, len(CATALOGUE) - 1), min_size=1, max_size=8))
    op = draw(st.sampled_from(["insert", "update", "delete"]))
    cols, before, after = layout_case(picks, draw(st.integers(0, 255)), op)
    n = len(cols)
    key = sorted(draw(st.sets(st.integers(0, n - 1), max_size=2)))
    tm = TableMap(1, 0, "d", "t", cols, primary_key=key)
    if op == "update" and draw(st.booleans()):  # an after image of other columns (MINIMAL)
        after = tuple(bits_set(draw(st.integers(1, (1 << n) - 1)), n))
    data = b""
    for _ in range(draw(st.integers(1, 3))):
        for present in (before, after):
            if present is None:
                continue
            program = image_program(cols, present) or []
            nulls = draw(st.integers(0, (1 << len(program)) - 1))
            data += nulls.to_bytes((len(program) + 7) // 8, "little")
            for k, (_, name, a, b, _) in enumerate(program):
                if not nulls >> k & 1:
                    data += _value(draw, name, a, b)
    if draw(st.integers(0, 9)) == 0:
        data = data[:-1]
    bits = {"before": sum(1 << i for i in before or ()), "after": sum(1 << i for i in after or ())}
    body = Rows(
        op, 2, 1, 0, n, bits["before"], bits["after"], table=tm, raw_rows=data, undecoded_reason=NOT_ASKED
    )
    return tm, body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rows_events(), size=st.sampled_from([1, 2, 4096]))
def test_random_layouts_written_from_bytes_alike(template: Transaction, case: Any, size: int) -> None:
    _, body = case
    same(with_rows(template, body), size)


def test_damaged_rows_raise_before_any_row_is_given(template: Transaction) -> None:
    """A rows event whose last row runs past its bytes: the one pass raises the decoder's
    ``MalformedEventError`` (naming the file and offset) and gives none of the event's rows, even
    in batches of one row."""
    ev = next(e for e in template.events if isinstance(e.body, Rows))
    body = ev.body
    full = decoded_rows(copied(template))
    rows = next(e.body.rows for e in full.events if isinstance(e.body, Rows))
    assert rows
    doubled = dataclasses.replace(body, raw_rows=body.raw_rows * 3 + body.raw_rows[:-1])
    t = with_rows(template, doubled)
    for size in (1, 4096):
        given_rows = 0
        with pytest.raises(MalformedEventError) as err:
            for b in transaction_batches([copied(t)], "", size, compiled=True):
                given_rows += b.num_rows
        assert given_rows == 0
        assert err.value.offset == ev.offset and err.value.source == ev.source
        assert same(t, size) is not None


def test_every_value_of_a_generated_series_from_bytes(tmp_path: Path) -> None:
    """Nothing of a series of every type is decoded to be written: every transaction's events
    keep their bytes through the one pass (no change went the decoded way)."""
    f = generate(tmp_path / "bin", seed=5, target_bytes=200_000).files[0]
    g = TransactionGrouper(keep_events=True)
    ts = [t for ev in BinlogReader(f, decode_rows=False) for t in g.feed(1, ev) if t.kind == "commit"]
    lists = [t.events for t in ts]
    rows = sum(b.num_rows for b in transaction_batches(ts, "", 4096, compiled=True))
    assert rows > 500
    assert all(t.events is events for t, events in zip(ts, lists, strict=True))


# what Python's strict UTF-8 decoder refuses at the edges: a surrogate, overlong forms, past
# U+10FFFF, a sequence cut short, a lone continuation byte; and the largest it takes
NOT_UTF8 = [
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",
    b"\xf4\x90\x80\x80",
    b"a\xe2\x82",
    b"\x80",
]
UTF8_EDGES = [b"\xed\x9f\xbf", b"\xf4\x8f\xbf\xbf", b"\xe0\xa0\x80", b"\xf0\x90\x80\x80", b"\xc2\x80"]


def _called(rng: random.Random, col: ColumnDef) -> bytes:
    """Bytes the decoder of a column of a CALL operation takes: random bytes of the length it
    reads (fixed-width types), else a length of ``meta`` bytes and 8 random bytes (GEOMETRY,
    VECTOR)."""
    data = rng.randbytes(16)
    try:
        _, end = column_decoder(col)(data, 0)
    except (ValueError, IndexError):
        return (8).to_bytes(col.meta, "little") + rng.randbytes(8)
    return data[:end]


def _random_value(rng: random.Random, col: ColumnDef, name: str, a: int, b: int) -> bytes:
    """``_value``'s shapes from a seeded generator: uniform bytes (every sign, zero and invalid
    dates, groups past their digits), text valid and not as UTF-8, documents."""
    if name == "STR":
        body = rng.choice(
            [
                rng.randbytes(rng.randint(0, 12)),
                "é中a😀"[: rng.randint(0, 4)].encode("utf-8"),
                b"plain",
                *NOT_UTF8,
                *UTF8_EDGES,
            ]
        )[: (1 << (8 * a)) - 1]
        return len(body).to_bytes(a, "little") + body
    if name == "JSON":
        body = encode_json_binary(
            rng.choice([{"a": [1, 2.5, None, "x"]}, [True, -(2**63)], "s", 2**64 - 1, {}])
        )
        return len(body).to_bytes(a, "little") + body
    if name == "CALL":  # a value only the column's Python decoder reads: the bytes it takes
        return _called(rng, col)
    size = _fastrows._size(name, a, b)
    return rng.choice([rng.randbytes(size), bytes(size), b"\xff" * size, b"\x80" + bytes(size - 1)])


@pytest.mark.parametrize("pick", range(len(CATALOGUE)))
def test_every_column_type_written_from_bytes(template: Transaction, pick: int) -> None:
    """Each column type of the catalogue, as a key column and not, 60 values each (each row its
    own event: one that does not decode does not hide the rest): the reference's batches."""
    rng = random.Random(pick)
    decoded = 0
    for key in ([], [0]):
        cols, _, after = layout_case([pick, 0], 3, "insert")
        tm = TableMap(1, 0, "d", "t", cols, primary_key=key)
        program = image_program(cols, after) or []
        for _ in range(30):
            data = b"\x00" + b"".join(_random_value(rng, cols[c], name, a, b) for c, name, a, b, _ in program)
            body = Rows("insert", 2, 1, 0, 2, 0, 3, table=tm, raw_rows=data, undecoded_reason=NOT_ASKED)
            decoded += not isinstance(same(with_rows(template, body), 4096), tuple)
    assert decoded > 40


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-5, 1e15 + 0.5, 1e20, -0.0, 1e-300, 123456789012345680.0])
    | st.text(max_size=8)
    | st.sampled_from(['\x00\x1f"\\\n\r\t\b\f', "é中😀", "a" * 200]),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
    max_leaves=12,
)


def _json_event(tm: TableMap, doc: bytes) -> Rows:
    data = b"\x00" + len(doc).to_bytes(4, "little") + doc
    return Rows("insert", 2, 1, 0, 1, 0, 1, table=tm, raw_rows=data, undecoded_reason=NOT_ASKED)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON_VALUES, damage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=2))
def test_json_documents_written_from_bytes(template: Transaction, value: Any, damage: list) -> None:
    """A JSON column's documents written as text straight from their binary form (``json_doc``)
    against the decoded document's text, for documents of every value kind (floats MySQL writes
    its own way, integers past int64, text to escape, nesting, large containers) and documents
    with bytes changed (the decoder's error, or its text where it still decodes)."""
    tm = TableMap(1, 0, "d", "t", [ColumnDef(0, ColumnType.JSON, 4, True)])
    doc = bytearray(encode_json_binary(value))
    for at, byte in damage:
        doc[at % len(doc)] = byte
    same(with_rows(template, _json_event(tm, bytes(doc))), 4096)


def test_json_documents_the_text_walk_leaves_to_the_decoder(template: Transaction) -> None:
    """Documents whose text needs the decoded value: an opaque value (a DECIMAL), keys out of
    order or repeated (the decoded dict keeps one), text that is not UTF-8, nothing at all."""
    tm = TableMap(1, 0, "d", "t", [ColumnDef(0, ColumnType.JSON, 4, True)])
    opaque = bytes([0x0F, 246, 4]) + bytes.fromhex("0a02810a")  # DECIMAL(10,2) 1.10 as MySQL writes it

    def small_object(keys: list[bytes], values: list[int]) -> bytes:
        """A small object of int16 values inline; keys at the offsets given, in the order given."""
        head = 4 + len(keys) * 4 + len(keys) * 3
        key_entries, at = b"", head
        for k in keys:
            key_entries += at.to_bytes(2, "little") + len(k).to_bytes(2, "little")
            at += len(k)
        value_entries = b"".join(b"\x05" + v.to_bytes(2, "little", signed=True) for v in values)
        body = key_entries + value_entries + b"".join(keys)
        return b"\x00" + len(keys).to_bytes(2, "little") + (4 + len(body)).to_bytes(2, "little") + body

    docs = [
        opaque,
        small_object([b"a", b"b"], [1, 2]),  # in order: written from the bytes
        small_object([b"b", b"a"], [1, 2]),
        small_object([b"a", b"a"], [1, 2]),
        small_object([b"\xff", b"ab"], [1, 2]),
        b"\x0c\x02\xc3\x28",  # a string that is not UTF-8
        b"",
    ]
    texts = []
    for doc in docs:
        want = same(with_rows(template, _json_event(tm, doc)), 4096)
        texts.append(None if isinstance(want, tuple) else rows_of(want[0])[0]["after"])
    assert texts[1] == {"@1": '{"a": 1, "b": 2}'}
    assert texts[2] == {"@1": '{"b": 1, "a": 2}'}  # the decoder's order: the document's
    assert texts[3] == {"@1": '{"a": 2}'}  # one key: the decoded dict's


def _two_events(t: Transaction, second: Rows) -> Transaction:
    """``t`` with a second rows event (``second``, at the next offset) after its rows event."""
    at = next(i for i, e in enumerate(t.events) if isinstance(e.body, Rows))
    ev = t.events[at]
    extra = dataclasses.replace(ev, offset=ev.offset + 1, body=second)
    return dataclasses.replace(t, events=[*t.events[: at + 1], extra, *t.events[at + 1 :]])


@pytest.mark.parametrize("damage", ["cut", "columns"])
def test_damage_in_a_later_event_gives_none_of_the_transaction(template: Transaction, damage: str) -> None:
    """Reading with row decoding on raises at the damaged event, before its transaction is whole:
    none of the transaction's changes is given. The one pass takes a transaction read with
    decoding off whole; a later event that does not decode (cut short, or of a column count its
    map does not have, which the bytes are not walked for) must not let the rows of the events
    before it out in a batch that fills first (batches of one row)."""
    body = next(e.body for e in template.events if isinstance(e.body, Rows))
    if damage == "cut":
        second = dataclasses.replace(body, raw_rows=body.raw_rows[:-1])
    else:
        second = dataclasses.replace(body, column_count=body.column_count + 1)
    t = _two_events(template, second)
    with pytest.raises(MalformedEventError):
        list(row_changes(decoded_rows(copied(t))))
    given_rows = 0
    with pytest.raises(MalformedEventError) as err:
        for b in transaction_batches([copied(t)], "", 1, compiled=True):
            given_rows += b.num_rows
    assert given_rows == 0
    assert (
        err.value.offset
        == t.events[1 + next(i for i, e in enumerate(t.events) if isinstance(e.body, Rows))].offset
    )


def test_damage_inside_a_transaction_payload_names_the_inner_event(tmp_path: Path) -> None:
    """A damaged rows event inside a compressed TRANSACTION_PAYLOAD: ``file_batches`` (rows read
    with decoding off, decoded on demand) raises what reading with decoding on raises, the inner
    event's index included."""
    zstandard = pytest.importorskip("zstandard")
    from binlake.events.payload import COMPRESSION_ZSTD, TransactionPayload, encode_transaction_payload
    from binlake.events.types import EventType
    from binlake.spark.changelog import file_batches
    from tests.test_fuzz import event, fde_file

    f = generate(tmp_path / "bin", seed=3, target_bytes=60_000).files[0]
    raw = f.read_bytes()
    evs = list(BinlogReader(f, decode_rows=False))

    def body(e: Any) -> bytes:
        return raw[e.offset + 19 : e.offset + e.header.event_size - (4 if e.checksum is not None else 0)]

    i = next(
        i
        for i, e in enumerate(evs)
        if isinstance(e.body, Rows)
        and isinstance(evs[i - 1].body, TableMap)
        and evs[i + 1].type_code == EventType.XID
    )
    begin = next(e for e in reversed(evs[:i]) if e.type_code == EventType.QUERY)
    parts = [
        (begin, body(begin)),
        (evs[i - 1], body(evs[i - 1])),
        (evs[i], body(evs[i])[:-1]),
        (evs[i + 1], body(evs[i + 1])),
    ]
    inner = b"".join(event(e.type_code, b, 0) for e, b in parts)
    compressed = zstandard.ZstdCompressor().compress(inner)
    payload = encode_transaction_payload(TransactionPayload(COMPRESSION_ZSTD, 0, len(inner), compressed))
    path = tmp_path / "payload.bin"
    path.write_bytes(fde_file() + event(EventType.TRANSACTION_PAYLOAD, payload, len(fde_file())))
    with pytest.raises(MalformedEventError) as want:
        list(BinlogReader(path))
    with pytest.raises(MalformedEventError) as got:
        list(file_batches(path))
    assert "(inner event 2 of the transaction payload)" in str(want.value)
    assert str(got.value) == str(want.value)
    assert (got.value.source, got.value.offset) == (want.value.source, want.value.offset)


def test_a_value_that_does_not_decode_gives_none_of_its_event(template: Transaction) -> None:
    """A rows event whose bytes walk whole but whose second row holds a JSON document the decoder
    refuses (an unknown value type): reading with decoding on raises at the event; the one pass,
    which writes the first row before it meets the second, must not let that row out in a batch
    that fills first (batches of one row)."""
    tm = TableMap(1, 0, "d", "t", [ColumnDef(0, ColumnType.JSON, 4, True)])
    docs = (encode_json_binary({"a": 1}), b"\x0e\x00")
    data = b"".join(b"\x00" + len(d).to_bytes(4, "little") + d for d in docs)
    t = with_rows(
        template, Rows("insert", 2, 1, 0, 1, 0, 1, table=tm, raw_rows=data, undecoded_reason=NOT_ASKED)
    )
    with pytest.raises(MalformedEventError):
        list(row_changes(decoded_rows(copied(t))))
    given_rows = 0
    with pytest.raises(MalformedEventError, match="unknown JSON type"):
        for b in transaction_batches([copied(t)], "", 1, compiled=True):
            given_rows += b.num_rows
    assert given_rows == 0


def test_a_change_not_taken_after_a_batch_filled_inside_its_event(template: Transaction) -> None:
    """Five rows of one event, the fourth a JSON document that walks whole but does not decode (an
    opaque DECIMAL cut short): in batches of 1 to 5 rows the one pass fills batches inside the
    event (its ``Cursor`` at a byte of the rows), goes on from there, and does not take the fourth
    (status 2) with the cursor's count at it — the caller's ``islice`` of the reference's changes
    then starts at that very change, no row lost or doubled — and the transaction gives the
    reference's error."""
    from binlake.arrowlog.changelog import _built, _name_images
    from binlake.arrowlog.images import image_cache
    from binlake.changes import _file_name, _layouts, file_number

    tm = TableMap(1, 0, "d", "t", [ColumnDef(0, ColumnType.JSON, 4, True)])
    cut_short = bytes([0x0F, 246, 4]) + bytes.fromhex("0a02810a")  # DECIMAL(10,2) needs 5 bytes, not 2
    docs = [encode_json_binary({"a": i}) for i in range(3)] + [cut_short, encode_json_binary([1])]
    data = b"".join(b"\x00" + len(d).to_bytes(4, "little") + d for d in docs)
    t = with_rows(
        template, Rows("insert", 2, 1, 0, 1, 0, 1, table=tm, raw_rows=data, undecoded_reason=NOT_ASKED)
    )
    for size in (1, 2, 3, 4, 5):
        t2, at, taken = copied(t), _fastvariant.Cursor(), 0
        while True:
            builder = _fastvariant.BatchBuilder(image_cache(True), _name_images, {})
            status = builder.add_transaction(t2, "", at, size, _layouts, file_number, _file_name)
            taken += _built(builder).num_rows
            if status != 1:
                break
            assert at.byte > 0 and at.taken == taken
        assert (status, at.taken, taken) == (2, 3, 3), size
        assert isinstance(same(t, size), tuple)


# a JSON document of an opaque DECIMAL(10,2) 1.10: precision, scale, the binary decimal's 5 bytes
OPAQUE_DECIMAL = bytes([0x0F, 246, 7]) + bytes.fromhex("0a02800000010a")


@pytest.mark.parametrize("op", ["delete", "update"])
@pytest.mark.parametrize(
    "second, error",
    [(b"\x0e\x00", "unknown JSON type"), (OPAQUE_DECIMAL, None), (b"", None)],
    ids=["refused", "opaque", "empty"],
)
def test_a_before_image_left_out_is_decoded_as_the_reference(
    template: Transaction, op: str, second: bytes, error: str | None
) -> None:
    """A keyed DELETE or UPDATE whose second row's before image holds a JSON document (not a key
    column) that only decoding reads: read as a sync reads it (``Trim(keyed_before=False)``: a
    keyed change's ``before`` is not written) the one pass decodes it all the same (review 30:
    it passed a document decoding refuses). Refused: the reference's error and none of the
    transaction given; one decoding reads (an opaque value, nothing at all): the reference's
    batches."""
    cols = [ColumnDef(0, ColumnType.LONG, 0, False), ColumnDef(1, ColumnType.JSON, 4, True)]
    tm = TableMap(1, 0, "d", "t", cols, primary_key=[0])

    def image(key: int, doc: bytes) -> bytes:
        return b"\x00" + key.to_bytes(4, "little") + len(doc).to_bytes(4, "little") + doc

    befores = [image(0, encode_json_binary({"a": 1})), image(1, second)]
    after = image(9, encode_json_binary([1]))
    data = b"".join(bi + after if op == "update" else bi for bi in befores)
    present = 3 if op == "update" else 0
    t = with_rows(
        template, Rows(op, 2, 1, 0, 2, 3, present, table=tm, raw_rows=data, undecoded_reason=NOT_ASKED)
    )
    trim = Trim(keyed_before=False)
    want = outcome(
        lambda: list(changelog_batches(row_changes(decoded_rows(copied(t))), 4096, compiled=False, trim=trim))
    )
    given: list[pa.RecordBatch] = []

    def one_pass() -> list[pa.RecordBatch]:
        for b in transaction_batches([copied(t)], "", 4096, compiled=True, trim=trim):
            given.append(b)
        return given

    got = outcome(one_pass)
    if error is not None:
        assert isinstance(want, tuple) and want[0] is MalformedEventError and error in want[1]
        assert got == want and not given
    else:
        assert not isinstance(want, tuple) and sum(b.num_rows for b in want) == 2
        assert pa.Table.from_batches(got).equals(pa.Table.from_batches(want))


def test_a_key_column_past_the_image_raises_as_the_reference(template: Transaction) -> None:
    """A table map (made in memory: the parser refuses it) whose key names a column past its
    columns: ``row_changes`` raises IndexError finding the key; the one pass from the bytes gave a
    change with a NULL key."""
    cols = [ColumnDef(0, ColumnType.LONG, 0, True), ColumnDef(1, ColumnType.LONG, 0, True)]
    tm = TableMap(1, 0, "d", "t", cols, primary_key=[5])
    data = b"\x00" + (7).to_bytes(4, "little") + (8).to_bytes(4, "little")
    body = Rows("insert", 2, 1, 0, 2, 0, 3, table=tm, raw_rows=data, undecoded_reason=NOT_ASKED)
    assert same(with_rows(template, body), 4096)[0] is IndexError


def test_events_the_raw_path_declines_are_decoded_in_place(tmp_path: Path) -> None:
    """With the compiled row decoder not chosen (its pure twin decodes), no event is written from
    its bytes: each is decoded where the one pass meets it and taken as decoded rows; the batches
    are the reference's, the same as the compiled decoder's raw path gives."""
    f = generate(tmp_path / "bin", seed=9, target_bytes=100_000).files[0]

    def read() -> list[Transaction]:  # a reader of its own: table maps (and their decoders) of its own
        g = TransactionGrouper(keep_events=True)
        return [t for ev in BinlogReader(f, decode_rows=False) for t in g.feed(1, ev) if t.kind == "commit"]

    raw = read()
    fast = list(transaction_batches(read(), "", 64, compiled=True))
    from binlake.values.plan import ROWS

    ROWS.choose(False)
    try:
        declined = read()
        got = list(transaction_batches(declined, "", 64, compiled=True))
    finally:
        ROWS.choose(True)
    changes = (c for t in raw for c in row_changes(decoded_rows(copied(t))))
    want = list(changelog_batches(changes, 64, compiled=False))
    assert got and pa.Table.from_batches(got).equals(pa.Table.from_batches(want))
    assert pa.Table.from_batches(fast).equals(pa.Table.from_batches(want))
    # each event was decoded in place (its transaction's list holds it decoded)
    assert all(
        e.body.undecoded_reason is None for t in declined for e in t.events if isinstance(e.body, Rows)
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON_VALUES, damage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3))
def test_json_doc_text_is_the_decoded_documents_text(value: Any, damage: list) -> None:
    """``json_doc`` alone: its text of a document is the decoded document's ``Json.text()`` where it
    gives one, and it gives none where the decoder fails or the text needs the decoded value."""
    from binlake.values._fastjson import decode_json_column

    doc = bytearray(encode_json_binary(value))
    for at, byte in damage:
        doc[at % len(doc)] = byte
    text = _fastvariant.json_doc_text(bytes(doc))
    try:
        decoded = decode_json_column(bytes(doc))
    except ValueError:
        assert text is None
        return
    if text is not None:
        assert decoded.plain and text.decode("utf-8") == decoded.text()
