"""The event envelope (header + typed body + origin) and the state decoding needs."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from binlake import sizes
from binlake.events.types import type_name

HEADER_V4 = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
HEADER_V1 = struct.Struct("<IBII")  # timestamp, type, server_id, event_size
HEADER_V4_LEN = 19
HEADER_V1_LEN = 13


@dataclass(slots=True)
class EventHeader:
    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int


@dataclass(slots=True)
class Event:
    """One binlog event: its header, its decoded body, and where it came from.

    ``offset`` is the event's start in its file. Events unpacked from a TRANSACTION_PAYLOAD share the
    payload's offset and carry ``inner_index`` (0, 1, …) so every event still has a unique position.
    """

    header: EventHeader
    body: Any
    source: str
    offset: int
    checksum: int | None = None
    inner_index: int | None = None
    kind: int = -1  # the type code as we understand it (differs from the header only in a_drop trees)

    def __post_init__(self) -> None:
        if self.kind < 0:
            self.kind = self.header.type_code

    @property
    def type_code(self) -> int:
        return self.kind

    @property
    def type_name(self) -> str:
        return type_name(self.kind)

    @property
    def end_offset(self) -> int:
        return self.offset + self.header.event_size


@dataclass(slots=True)
class UnknownEvent:
    """An event type we do not decode: kept whole, never dropped."""

    raw: bytes


@dataclass(slots=True)
class Skipped:
    """An event whose body was not read (header-only scans): only its header is known."""


@dataclass(slots=True)
class FormatDescription:
    """How the rest of the file is laid out (FORMAT_DESCRIPTION, or implied by START_V3)."""

    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: int | None  # 0 off, 1 CRC32, None when the server predates checksums
    is_mariadb: bool = False
    event_type_permutation: tuple[int, ...] | None = None  # pre-release 5.1 numbering -> ours

    def effective_type(self, code: int) -> int:
        perm = self.event_type_permutation
        if perm is None:
            return code
        return perm[code] if code < len(perm) else 0

    def post_header_len(self, type_code: int, default: int = 0) -> int:
        i = type_code - 1
        if 0 <= i < len(self.post_header_lengths):
            return self.post_header_lengths[i]
        return default

    @property
    def checksum_size(self) -> int:
        return 4 if self.checksum_alg == 1 else 0


@dataclass
class DecodeState:
    """What a decoder must remember between events of one stream."""

    fde: FormatDescription | None = None
    table_maps: dict[int, Any] = field(default_factory=dict)
    verify_checksum: bool = True
    decode_rows: bool = True
    # with decode_rows off: count each rows event's rows by their lengths (``Rows.counted``)
    count_rows: bool = False
    # the most bytes one event may make us hold, as read or uncompressed (see ``binlake.sizes``)
    max_payload: int = field(default_factory=sizes.max_payload)
    # called with every decoded event before it is returned (e.g. a schema tracker completing table
    # maps); one with an ``event_kinds`` attribute (type codes) with those events only (``observers_of``)
    observers: list[Any] = field(default_factory=list)
    # ``observers`` by event type (``observers_of``), and the observers they were made from
    routed: tuple[Any, ...] = field(default=(), repr=False)
    routes: tuple[tuple[Any, ...], ...] = field(default=(), repr=False)
    # the last TABLE_MAP body decoded per table id, with its bytes: every transaction maps its tables
    # again, almost always with the same bytes, and decoding a map (metadata, decoders) is costly
    table_map_bytes: dict[int, tuple[bytes, Any]] = field(default_factory=dict)

    def observers_of(self, kind: int) -> tuple[Any, ...]:
        """The observers an event of type ``kind`` is given to, in their order: every one, but one
        with an ``event_kinds`` attribute only those (a schema tracker needs QUERY and TABLE_MAP
        events, not the rows events that are most of a binlog, and calling it cost ~2.5 µs each).
        Made again whenever ``observers`` holds other objects than it was made from."""
        if not self.observers:
            return ()
        if len(self.observers) != len(self.routed) or any(
            a is not b for a, b in zip(self.observers, self.routed, strict=True)
        ):
            self.routed = tuple(self.observers)
            self.routes = observer_routes(self.routed)
        return self.routes[kind]


def observer_routes(observers: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
    """Per type code (256), the ``observers`` an event of that type is given to (``observers_of``)."""
    wants = [getattr(o, "event_kinds", None) for o in observers]
    return tuple(
        tuple(o for o, kinds in zip(observers, wants, strict=True) if kinds is None or kind in kinds)
        for kind in range(256)
    )
