"""Mutants of real binlog files for the fuzz campaign: bit flips, truncations, and forged length
fields aimed where the decoder trusts a length (event sizes, column counts, length-encoded integers,
TRANSACTION_PAYLOAD sizes, the events inside a compressed payload).

Every mutant is a pure function of (file, seed, index), so a failure names the one input to replay.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from binlake.errors import BinlogError
from binlake.events.payload import TransactionPayload, decode_transaction_payload, encode_transaction_payload
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.reader import BinlogReader
from binlake.wire import Cursor, ShortRead, crc32

# Values a forged length takes: the edges of every width a binlog uses.
FORGED = [0, 1, 2, 0xFB, 0xFF, 0xFFFF, 0xFFFFFF, 1 << 30, (1 << 31) - 1, 1 << 31, 0xFFFFFFFF, (1 << 64) - 1]
FORGED_LENENC = [
    b"\x00",
    b"\x01",
    b"\xfb",
    b"\xff",
    b"\xfc\xff\xff",
    b"\xfd\xff\xff\xff",
    b"\xfe" + (1 << 31).to_bytes(8, "little"),
    b"\xfe" + (0xFFFFFFFF).to_bytes(8, "little"),
    b"\xfe" + ((1 << 64) - 1).to_bytes(8, "little"),
]


@dataclass(frozen=True)
class Span:
    """One top-level event of the pristine file."""

    offset: int
    size: int
    type_code: int
    header_length: int
    table_id_width: int  # 4 or 6 (TABLE_MAP and rows events)
    checksum_size: int


@dataclass
class Seed:
    path: Path
    raw: bytes
    spans: list[Span]


def load_seed(path: Path) -> Seed:
    """The file's bytes and where its events are (read with our own reader on the pristine file)."""
    spans = []
    reader = BinlogReader(path, verify_checksum=False, decode_rows=False)
    try:
        for ev in reader:
            fde = reader.decoder.fde
            if ev.inner_index is not None or fde is None:
                continue
            width = 4 if fde.post_header_len(ev.type_code, 8) == 6 else 6
            spans.append(
                Span(
                    ev.offset, ev.header.event_size, ev.type_code, fde.header_length, width, fde.checksum_size
                )
            )
    except BinlogError:
        pass  # a damaged seed still gives the events before the damage
    return Seed(path, path.read_bytes(), spans)


def _put(raw: bytearray, at: int, data: bytes) -> None:
    raw[at : at + len(data)] = data[: max(0, len(raw) - at)]


def _body_range(s: Span) -> tuple[int, int]:
    return s.offset + s.header_length, s.offset + s.size - s.checksum_size


def _replace_event(raw: bytearray, s: Span, body: bytes) -> None:
    """Swap an event's body, fixing its length field and CRC (later events keep their bytes)."""
    head = bytearray(raw[s.offset : s.offset + s.header_length])
    size = s.header_length + len(body) + s.checksum_size
    head[9:13] = size.to_bytes(4, "little")
    event = bytes(head) + body
    if s.checksum_size:
        event += crc32(event).to_bytes(4, "little")
    raw[s.offset : s.offset + s.size] = event


def flip_bits(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    spots = [rng.randrange(4, len(raw)) for _ in range(rng.randint(1, 8))]
    for i in spots:
        raw[i] ^= 1 << rng.randrange(8)
    return f"flip bits at {spots}"


def truncate(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    cut = rng.randrange(4, len(raw))
    if seed.spans and rng.random() < 0.5:  # cut next to an event boundary
        cut = max(4, min(len(raw) - 1, rng.choice(seed.spans).offset + rng.randint(-1, 20)))
    del raw[cut:]
    return f"truncate at {cut}"


def event_length(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    s = rng.choice(seed.spans)
    value = rng.choice([*FORGED[:11], s.size - 1, s.size + 1, s.header_length]) & 0xFFFFFFFF
    _put(raw, s.offset + 9, value.to_bytes(4, "little"))
    return f"event length of {s.type_code}@{s.offset} := {value}"


def _body_spot(rng: random.Random, seed: Seed) -> tuple[Any, int] | None:
    """A random event and a random offset in its body (None: it has no body)."""
    s = rng.choice(seed.spans)
    lo, hi = _body_range(s)
    return (s, rng.randrange(lo, hi)) if hi > lo else None


def body_int(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    spot = _body_spot(rng, seed)
    if spot is None:
        return "no body"
    s, at = spot
    width = rng.choice([1, 2, 3, 4, 8])
    value = rng.choice(FORGED) & ((1 << width * 8) - 1)
    _put(raw, at, value.to_bytes(width, "little"))
    return f"{width}-byte int at {at} in {s.type_code}@{s.offset} := {value}"


def lenenc(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    spot = _body_spot(rng, seed)
    if spot is None:
        return "no body"
    s, at = spot
    forged = rng.choice(FORGED_LENENC)
    _put(raw, at, forged)
    return f"lenenc at {at} in {s.type_code}@{s.offset} := {forged.hex()}"


def _column_count_at(raw: bytes, s: Span) -> int:
    """Where the length-encoded column count of a TABLE_MAP or rows event starts."""
    lo, hi = _body_range(s)
    c = Cursor(raw[:hi], lo)
    c.skip(s.table_id_width + 2)
    if s.type_code == EventType.TABLE_MAP:
        c.skip(c.u8() + 1)
        c.skip(c.u8() + 1)
    elif ROWS_EVENT_KINDS[s.type_code][1] == 2:
        c.skip(c.u16() - 2)
    return c.pos


def _mapped(seed: Seed) -> list[Span]:
    return [s for s in seed.spans if s.type_code == EventType.TABLE_MAP or s.type_code in ROWS_EVENT_KINDS]


def _rows(seed: Seed) -> list[Span]:
    return [s for s in seed.spans if s.type_code in ROWS_EVENT_KINDS]


def column_count(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    s = rng.choice(_mapped(seed))
    at = _column_count_at(bytes(raw), s)
    forged = rng.choice(FORGED_LENENC + [bytes([raw[at] + 1]), bytes([max(raw[at] - 1, 0)])])
    _put(raw, at, forged)
    return f"column count of {s.type_code}@{s.offset} := {forged.hex()}"


def columns_present(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    """A rows event's columns-present bitmaps: none present, all, or any."""
    s = rng.choice(_rows(seed))
    at = _column_count_at(bytes(raw), s)
    ncols = Cursor(bytes(raw), at).lenenc() or 0
    if ncols > 8 * len(raw):
        return f"not applicable (column count {ncols} already forged)"
    at += 1 if ncols < 0xFB else 3 if ncols < 1 << 16 else 4 if ncols < 1 << 24 else 9
    nbytes = (ncols + 7) // 8 * (2 if ROWS_EVENT_KINDS[s.type_code][0] == "update" else 1)
    bits = rng.choice([0, (1 << nbytes * 8) - 1, rng.getrandbits(nbytes * 8)])
    _put(raw, at, bits.to_bytes(nbytes, "little"))
    return f"columns present of {s.type_code}@{s.offset} := {bits:#x}"


def _payloads(seed: Seed) -> list[Span]:
    return [s for s in seed.spans if s.type_code == EventType.TRANSACTION_PAYLOAD]


def _payload(raw: bytes, s: Span) -> TransactionPayload:
    lo, hi = _body_range(s)
    return decode_transaction_payload(raw[lo:hi], None, None)  # type: ignore[arg-type]


def payload_size(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    """The payload's header fields (uncompressed size, payload size) set to forged values."""
    s = rng.choice(_payloads(seed))
    p = _payload(bytes(raw), s)
    field = rng.choice(["uncompressed_size", "payload_size"])
    value = rng.choice(FORGED[:-1] + [p.uncompressed_size + 1, 5 << 29])
    setattr(p, field, value)
    _replace_event(raw, s, encode_transaction_payload(p))
    return f"{field} of payload@{s.offset} := {value}"


def inner_bytes(rng: random.Random, seed: Seed, raw: bytearray) -> str:
    """Bit flips or forged lengths inside the compressed events, recompressed so they get read."""
    s = rng.choice(_payloads(seed))
    p = _payload(bytes(raw), s)
    inner = bytearray(zstandard.ZstdDecompressor().decompress(p.payload, max_output_size=1 << 24))
    spots = []
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(inner))
        if rng.random() < 0.5:
            inner[at] ^= 1 << rng.randrange(8)
        else:
            _put(inner, at, rng.choice(FORGED_LENENC))
        spots.append(at)
    data = zstandard.ZstdCompressor().compress(bytes(inner))
    p.payload, p.payload_size, p.uncompressed_size = data, len(data), len(inner)
    _replace_event(raw, s, encode_transaction_payload(p))
    return f"inner bytes {spots} of payload@{s.offset}"


Mutator = Callable[[random.Random, Seed, bytearray], str]
# each mutator with the events it needs the seed to have
MUTATORS: list[tuple[Mutator, Callable[[Seed], list[Span]] | None]] = [
    (flip_bits, None),
    (truncate, None),
    (event_length, None),
    (body_int, None),
    (lenenc, None),
    (column_count, _mapped),
    (columns_present, _rows),
    (payload_size, _payloads),
    (inner_bytes, _payloads),
]


def mutant(seed: Seed, base: int, index: int) -> tuple[bytes, str]:
    """The ``index``-th mutant of ``seed`` for the campaign seeded ``base`` (one to three mutations)."""
    rng = random.Random(f"{base}:{seed.path.name}:{index}")
    raw = bytearray(seed.raw)
    usable = [m for m, needs in MUTATORS if needs is None or needs(seed)]
    done = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if len(raw) <= 4:
            break
        mutate = rng.choice(usable)
        try:
            done.append(f"{mutate.__name__}: {mutate(rng, seed, raw)}")
        except (BinlogError, ShortRead, ValueError, IndexError, zstandard.ZstdError) as e:
            done.append(f"{mutate.__name__}: not applicable ({e})")  # an earlier mutation broke the layout
    return bytes(raw), "; ".join(done)
