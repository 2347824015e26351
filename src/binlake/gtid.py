"""GTID set algebra: MySQL sets (``uuid:1-5:7``, tagged ``uuid:tag:1-3``) and MariaDB positions
(``0-1-100,1-2-7``). Pure values, no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

Interval = tuple[int, int]  # inclusive
Key = tuple[str, str]  # (uuid, tag); tag "" when untagged

_TAG = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")


class GtidSetError(ValueError):
    """A GTID set or position that does not parse."""


def _normalise(intervals: Iterable[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if a > b:
            continue
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _intersect(x: list[Interval], y: list[Interval]) -> list[Interval]:
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a <= b:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def _subtract(x: list[Interval], y: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    j = 0
    for a, b in x:
        while j < len(y) and y[j][1] < a:
            j += 1
        k, start = j, a
        while k < len(y) and y[k][0] <= b:
            if y[k][0] > start:
                out.append((start, y[k][0] - 1))
            start = max(start, y[k][1] + 1)
            k += 1
        if start <= b:
            out.append((start, b))
    return out


def _parse_uuid(text: str) -> str:
    try:
        import uuid  # here: it imports platform and hashlib, which a command parsing no GTID set skips

        return str(uuid.UUID(text.strip()))
    except ValueError:
        raise GtidSetError(f"{text.strip()!r} is not a server UUID") from None


def _bare_uuid_hint(part: str) -> str:
    """For a MariaDB-looking item that is a MySQL server UUID alone (as ``_parse_uuid`` reads one):
    what is missing."""
    try:
        _parse_uuid(part)
    except GtidSetError:
        return ""
    return f": a MySQL server UUID needs its transactions, as in {part}:1-100"


@dataclass(frozen=True)
class GtidSet:
    """An immutable MySQL GTID set."""

    sets: tuple[tuple[Key, tuple[Interval, ...]], ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[Key, Iterable[Interval]]) -> GtidSet:
        items = []
        for key, ivs in d.items():
            norm = _normalise(ivs)
            if norm:
                items.append((key, tuple(norm)))
        return cls(tuple(sorted(items)))

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """``uuid:1-5:7,uuid2:tag:1-3`` (whitespace and empty parts allowed, as MySQL prints it)."""
        acc: dict[Key, list[Interval]] = {}
        for part in text.replace("\n", "").split(","):
            part = part.strip()
            if not part:
                continue
            fields = part.split(":")
            sid = _parse_uuid(fields[0])
            tag = ""
            acc.setdefault((sid, ""), [])
            for f in fields[1:]:
                f = f.strip()
                if f and (f[0].isalpha() or f[0] == "_"):
                    if not _TAG.match(f.lower()):
                        raise GtidSetError(f"{f!r} is not a GTID tag")
                    tag = f.lower()
                    acc.setdefault((sid, tag), [])
                    continue
                try:
                    lo, _, hi = f.partition("-")
                    a, b = int(lo), int(hi or lo)
                except ValueError:
                    raise GtidSetError(f"{f!r} in {part!r} is not an interval") from None
                if a < 1 or b < a:
                    raise GtidSetError(f"bad interval {f!r} in {part!r}")
                acc[(sid, tag)].append((a, b))
        return cls.from_dict(acc)

    def as_dict(self) -> dict[Key, list[Interval]]:
        return {k: list(v) for k, v in self.sets}

    def __str__(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for (sid, tag), ivs in self.sets:
            text = "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs)
            by_uuid.setdefault(sid, []).append(f":{tag}{text}" if tag else text)
        return ",\n".join(sid + "".join(parts) for sid, parts in by_uuid.items())

    def __bool__(self) -> bool:
        return bool(self.sets)

    def __len__(self) -> int:
        return sum(b - a + 1 for _, ivs in self.sets for a, b in ivs)

    def __iter__(self) -> Iterator[tuple[str, str, int]]:
        for (sid, tag), ivs in self.sets:
            for a, b in ivs:
                for n in range(a, b + 1):
                    yield sid, tag, n

    def _op(self, other: GtidSet, fn: str) -> GtidSet:
        x, y = self.as_dict(), other.as_dict()
        if fn == "union":
            return GtidSet.from_dict({k: x.get(k, []) + y.get(k, []) for k in x.keys() | y.keys()})
        if fn == "intersection":
            return GtidSet.from_dict({k: _intersect(x[k], y[k]) for k in x.keys() & y.keys()})
        return GtidSet.from_dict({k: _subtract(v, y.get(k, [])) for k, v in x.items()})

    def union(self, other: GtidSet) -> GtidSet:
        return self._op(other, "union")

    def intersection(self, other: GtidSet) -> GtidSet:
        return self._op(other, "intersection")

    def difference(self, other: GtidSet) -> GtidSet:
        return self._op(other, "difference")

    __or__ = union
    __and__ = intersection
    __sub__ = difference

    def issubset(self, other: GtidSet) -> bool:
        return not self.difference(other)

    def contains(self, sid: str, gno: int, tag: str = "") -> bool:
        for key, ivs in self.sets:
            if key == (sid, tag):
                return any(a <= gno <= b for a, b in ivs)
        return False

    def __contains__(self, gtid: str) -> bool:
        sid, tag, gno = parse_gtid(gtid)
        return self.contains(sid, gno, tag)

    def add(self, sid: str, gno: int, tag: str = "") -> GtidSet:
        return self.union(GtidSet.from_dict({(sid, tag): [(gno, gno)]}))


def parse_gtid(text: str) -> tuple[str, str, int]:
    """``uuid:n`` or ``uuid:tag:n`` -> (uuid, tag, n)."""
    fields = text.strip().split(":")
    if len(fields) not in (2, 3):
        raise GtidSetError(f"{text!r} is not a GTID")
    try:
        gno = int(fields[-1])
    except ValueError:
        raise GtidSetError(f"{text!r} is not a GTID") from None
    return _parse_uuid(fields[0]), (fields[1].lower() if len(fields) == 3 else ""), gno


class GtidAccumulator:
    """A GTID set grown one transaction at a time without rebuilding it (for long streams)."""

    def __init__(self, start: GtidSet | None = None) -> None:
        self._d: dict[Key, list[Interval]] = start.as_dict() if start else {}

    def add(self, sid: str, gno: int, tag: str = "") -> None:
        ivs = self._d.setdefault((sid, tag), [])
        if ivs and ivs[-1][1] + 1 == gno:
            ivs[-1] = (ivs[-1][0], gno)
        elif ivs and ivs[-1][0] <= gno <= ivs[-1][1]:
            return
        elif not ivs or gno > ivs[-1][1]:
            ivs.append((gno, gno))
        else:
            self._d[(sid, tag)] = _normalise([*ivs, (gno, gno)])

    def freeze(self) -> GtidSet:
        return GtidSet.from_dict(self._d)


@dataclass(frozen=True)
class MariaGtidPos:
    """A MariaDB GTID position: the last GTID per replication domain (``domain-server-seq``)."""

    gtids: tuple[tuple[int, int, int], ...] = ()  # (domain, server_id, seq), one per domain

    @classmethod
    def parse(cls, text: str) -> MariaGtidPos:
        acc: dict[int, tuple[int, int]] = {}
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                d, s, n = (int(x) for x in part.split("-"))
            except ValueError:
                raise GtidSetError(
                    f"{part!r} is not a MariaDB GTID (domain-server-seq){_bare_uuid_hint(part)}"
                ) from None
            if d in acc:
                raise GtidSetError(f"domain {d} appears twice in {text!r}")
            acc[d] = (s, n)
        return cls(tuple(sorted((d, s, n) for d, (s, n) in acc.items())))

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.gtids)

    def seq(self, domain: int) -> int | None:
        for d, _, n in self.gtids:
            if d == domain:
                return n
        return None

    def contains(self, domain: int, seq: int) -> bool:
        last = self.seq(domain)
        return last is not None and seq <= last

    def advance(self, domain: int, server_id: int, seq: int) -> MariaGtidPos:
        rest = [(d, s, n) for d, s, n in self.gtids if d != domain]
        return MariaGtidPos(tuple(sorted([*rest, (domain, server_id, seq)])))

    def union(self, other: MariaGtidPos) -> MariaGtidPos:
        out = {d: (s, n) for d, s, n in self.gtids}
        for d, s, n in other.gtids:
            if d not in out or n > out[d][1]:
                out[d] = (s, n)
        return MariaGtidPos(tuple(sorted((d, s, n) for d, (s, n) in out.items())))


MariaKey = tuple[int, int]  # (domain, server_id)


@dataclass(frozen=True)
class MariaGtidSet:
    """A set of MariaDB GTIDs, for selecting transactions (not a replication position).

    Items, comma-separated: ``domain-server-seq`` is that one GTID, exactly as MariaDB prints it
    (``0-1-595``); ``domain-server-lo-hi`` is ``domain-server-lo`` … ``domain-server-hi`` inclusive.
    A GTID is the whole triple: the same sequence number from another server is another GTID.
    (MariaDB's own mariadb-binlog selects by *windows* instead — ``--start-position``/
    ``--stop-position`` GTID lists, exclusive/inclusive per domain; ``find-position --gtid-set``
    takes such a position.)"""

    sets: tuple[tuple[MariaKey, tuple[Interval, ...]], ...] = ()

    @classmethod
    def parse(cls, text: str) -> MariaGtidSet:
        acc: dict[MariaKey, list[Interval]] = {}
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            try:
                numbers = [int(x) for x in part.split("-")]
            except ValueError:
                numbers = []
            if len(numbers) not in (3, 4) or min(numbers) < 0:
                raise GtidSetError(
                    f"{part!r} is not a MariaDB GTID (domain-server-seq) or range (domain-server-lo-hi)"
                    + _bare_uuid_hint(part)
                )
            d, s, lo, hi = (*numbers, numbers[-1]) if len(numbers) == 3 else numbers
            if hi < lo:
                raise GtidSetError(f"bad range {part!r}: {hi} < {lo}")
            acc.setdefault((d, s), []).append((lo, hi))
        return cls(tuple(sorted((k, tuple(_normalise(v))) for k, v in acc.items())))

    def __str__(self) -> str:
        return ",".join(
            f"{d}-{s}-{a}" if a == b else f"{d}-{s}-{a}-{b}" for (d, s), ivs in self.sets for a, b in ivs
        )

    def __bool__(self) -> bool:
        return bool(self.sets)

    def contains(self, domain: int, server_id: int, seq: int) -> bool:
        return any(k == (domain, server_id) and any(a <= seq <= b for a, b in ivs) for k, ivs in self.sets)


def parse_maria_gtid(text: str) -> tuple[int, int, int]:
    """``domain-server-seq`` -> (domain, server_id, seq)."""
    try:
        d, s, n = (int(x) for x in text.strip().split("-"))
    except ValueError:
        raise GtidSetError(f"{text!r} is not a MariaDB GTID") from None
    return d, s, n


@dataclass(frozen=True)
class AnyGtidSet:
    """GTIDs of either flavour, as ``--include-gtids``/``--exclude-gtids`` take them: comma-separated
    items, an item with a ``:`` being MySQL (``uuid:1-5:7``, ``uuid:tag:3``), one without MariaDB
    (``0-1-595``, ``0-1-590-595``; see ``MariaGtidSet``). One set may mix both."""

    mysql: GtidSet = GtidSet()
    maria: MariaGtidSet = MariaGtidSet()

    @classmethod
    def parse(cls, text: str) -> AnyGtidSet:
        parts = [p.strip() for p in text.replace("\n", "").split(",") if p.strip()]
        if not parts:
            raise GtidSetError("an empty GTID set selects nothing")
        return cls(
            GtidSet.parse(",".join(p for p in parts if ":" in p)),
            MariaGtidSet.parse(",".join(p for p in parts if ":" not in p)),
        )

    def __str__(self) -> str:
        return ",".join(str(x).replace("\n", "") for x in (self.mysql, self.maria) if x)

    def contains_gtid(self, gtid: str) -> bool:
        """Whether a transaction's GTID (MySQL ``uuid[:tag]:n`` or MariaDB ``d-s-n``) is in the set."""
        if ":" in gtid:
            sid, tag, gno = parse_gtid(gtid)
            return self.mysql.contains(sid, gno, tag)
        return self.maria.contains(*parse_maria_gtid(gtid))


def parse_executed(text: str) -> GtidSet | MariaGtidPos:
    """The GTIDs a server has executed, as a position search takes them: a MySQL GTID set
    (``uuid:1-5``) or a MariaDB GTID position (``0-1-595``, one GTID per domain). Text that is
    neither is told it is neither (read as MariaDB's for having no ``:``, it was told only that)."""
    if not text.strip() or ":" in text:
        return GtidSet.parse(text)
    try:
        return MariaGtidPos.parse(text)
    except GtidSetError as e:
        if all(c.isdigit() or c in "-, " for c in text):  # MariaDB's form, wrong: its own message
            raise
        raise GtidSetError(
            f"{text!r} is neither a MySQL GTID set (uuid:1-5) nor a MariaDB GTID position (0-1-595)"
            f"{_bare_uuid_hint(text.strip())}"
        ) from e
