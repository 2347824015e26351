"""Where to start reading: the position for a point in time or for a GTID set, over a series.

By time, the answer is the earliest transaction boundary such that every transaction that committed
at or after T starts at or after it. Binlog order is commit order, so that is the start of the first
transaction whose commit time is at or after T:

- MySQL 8.0.1+ writes each transaction's commit time in microseconds (GTID ``immediate_commit_timestamp``):
  the rule is exact.
- Older servers and MariaDB write no commit time; header timestamps are statement *start* times
  (seed 000). The event that ends a transaction (XID / COMMIT / DDL) starts before the commit and in
  the same second or, for a statement, within its ``exec_time``; so the commit happened before that
  header second + exec_time + 1 s (``Transaction.latest_commit_us``). The safe rule starts at the
  first transaction whose latest possible commit is at or after T: nothing committed at or after T
  is missed, and what is included committed at most a second or so before T.

Files are skipped without reading them: file i+1 is created after file i's last commit, so when file
i+1's FORMAT_DESCRIPTION time is before T, no transaction of file i can qualify. Within a file only
headers and small control events are read (``HEADER_ONLY``): row images are never decoded.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from binlake.errors import IncompleteTailError
from binlake.events.base import HEADER_V4_LEN
from binlake.events.gtid import MariaGtidList, PreviousGtids
from binlake.events.types import ROWS_EVENT_KINDS, EventType
from binlake.gtid import GtidAccumulator, GtidSet, MariaGtidPos, parse_gtid
from binlake.reader import BinlogReader
from binlake.series import BinlogSeries, Position
from binlake.txn import GTID_EVENTS, UNFINISHED, Transaction, TransactionGrouper

# what a file the server is still writing ends in, after its last complete transaction
EVENT_CUT, NO_COMMIT = "an event cut short", "a transaction without its commit"


def cut_note(path: str | Path, unfinished: str, at: int) -> str:
    """A live file's unfinished tail, said the same by ``find-position`` and ``index``."""
    return f"{path} ends in {unfinished} at offset {at} (a file still being written?)"


# Event types a header-only scan does not read: row images and their companions.
HEADER_ONLY = frozenset(
    {
        EventType.TABLE_MAP,
        EventType.ROWS_QUERY,
        EventType.MARIA_ANNOTATE_ROWS,
        EventType.TRANSACTION_PAYLOAD,
        EventType.APPEND_BLOCK,
        EventType.BEGIN_LOAD_QUERY,
        *ROWS_EVENT_KINDS,
    }
)


@dataclass
class FileStart:
    """What the first events of a file say: when it was created and what ran before it."""

    path: Path
    created: int  # FORMAT_DESCRIPTION header time (seconds)
    previous_gtids: GtidSet | None
    maria_gtid_list: MariaGtidPos | None


def file_start(path: Path, live: bool = False) -> FileStart:
    """What a file's first events say. ``live``: the file may be one the server is still writing,
    cut inside those events (what they said before the cut is given; ``created`` 0: not known)."""
    created, prev, maria = 0, None, None
    try:
        for ev in BinlogReader(path, skip=HEADER_ONLY):
            if ev.type_code == EventType.FORMAT_DESCRIPTION:
                created = ev.header.timestamp
            elif isinstance(ev.body, PreviousGtids):
                prev = GtidSet.from_dict(ev.body.sets)
            elif isinstance(ev.body, MariaGtidList):
                maria = MariaGtidPos(tuple(sorted(ev.body.gtids)))
            elif ev.type_code not in (EventType.MARIA_BINLOG_CHECKPOINT, EventType.START_V3):
                break
    except IncompleteTailError:
        if not live:
            raise
    return FileStart(path, created, prev, maria)


def _file_starts(series: BinlogSeries) -> list[FileStart]:
    """``file_start`` of each file of ``series``, the last one ``live``."""
    last = len(series.files) - 1
    return [file_start(f, live=i == last) for i, f in enumerate(series.files)]


@dataclass
class Found:
    """A start position and the GTIDs executed before it."""

    position: Position
    executed: GtidSet | MariaGtidPos | None
    transaction: Transaction | None  # the first transaction at or after the position (None: end)
    exact: bool  # the commit time came from the server (False: the safe rule was used)
    # GTIDs that ran before the series' first file (purged) and that the searched set lacks: no
    # position of these files brings a replica at that set up to date (None: nothing missing)
    missing: GtidSet | MariaGtidPos | None = None
    # the last file (still being written?) ends in something ``unfinished`` ("an event cut short",
    # "a transaction without its commit") that starts at ``cut``: the position is where the
    # complete part of the series ends (None: the series ends cleanly)
    cut: int | None = None
    unfinished: str | None = None
    warning: str | None = None  # e.g. a GTID set of the other server's kind than the series'

    def describe(self) -> str:
        lines = [f"file: {self.position.file}", f"position: {self.position.offset}"]
        if self.executed is not None:
            lines.append(f"executed before: {str(self.executed) or '(empty)'}")
        if self.missing is not None:
            lines.append(
                f"missing: {self.missing}: executed before the series' first file (purged?) and not in "
                "the GTID set: reading from this position does not bring a replica at that set up to date"
            )
        t = self.transaction
        if t is not None:
            when = dt.datetime.fromtimestamp(t.commit_time_us / 1e6, dt.UTC)
            rule = (
                "exact (server commit timestamp)"
                if self.exact
                else "safe rule (no commit timestamps in this binlog)"
            )
            lines.append(
                f"first transaction: {t.gtid or 'anonymous'} committed {when:%Y-%m-%d %H:%M:%S.%f} UTC, {rule}"
            )
        else:
            lines.append("no transaction after it yet: this is the end of the series")
        if self.warning is not None:
            lines.append(f"warning: {self.warning}")
        if self.cut is not None and self.unfinished is not None:
            note = cut_note(self.position.file, self.unfinished, self.cut)
            lines.append(f"note: {note}: the position is where its complete transactions end")
        return "\n".join(lines)


class _Executed:
    """GTIDs executed so far, MySQL or MariaDB style, starting from a file's header."""

    def __init__(self, start: FileStart) -> None:
        self.mysql = GtidAccumulator(start.previous_gtids) if start.previous_gtids is not None else None
        self.maria = start.maria_gtid_list

    def add(self, t: Transaction) -> None:
        if not t.gtid:
            return
        if self.maria is not None or "-" in t.gtid and ":" not in t.gtid:
            d, s, n = (int(x) for x in t.gtid.split("-"))
            self.maria = (self.maria or MariaGtidPos()).advance(d, s, n)
        else:
            sid, tag, gno = parse_gtid(t.gtid)
            if self.mysql is None:
                self.mysql = GtidAccumulator()
            self.mysql.add(sid, gno, tag)

    def value(self) -> GtidSet | MariaGtidPos | None:
        if self.maria is not None:
            return self.maria
        return self.mysql.freeze() if self.mysql is not None else None


class _Walk:
    """Header-only transactions from ``first_file`` on, each with the executed set before it; and
    where the series' complete part ends (``end``). The last file may be one the server is still
    writing: it may end inside an event, or inside a transaction whose commit is not written yet (or
    inside its first events). Its complete transactions are given, ``end`` is just past the last of
    them (as ``TailScan.boundary``: where a read of the file stops), ``unfinished`` says what follows
    and ``cut`` where it starts. In any earlier file a cut event is damage and raises, as reading it
    does."""

    def __init__(self, series: BinlogSeries, first_file: int) -> None:
        self.series, self.first_file = series, first_file
        last = len(series.files) - 1
        self.end = series.position(last, series.files[last].stat().st_size)
        self.unfinished: str | None = None
        self.cut: int | None = None
        self.executed: _Executed | None = None  # what ran before the walk's place

    def __iter__(self) -> Iterator[tuple[int, Transaction, _Executed]]:
        files = self.series.files
        last = len(files) - 1
        for seq in range(self.first_file, len(files)):
            executed = _Executed(file_start(files[seq], live=seq == last))
            if self.executed is not None and executed.value() is None:
                executed = self.executed  # a start cut short (or just created) says nothing: go on
            self.executed = executed
            g = TransactionGrouper(keep_events=False)
            boundary = 4  # just past the file's last complete transaction
            try:
                for ev in BinlogReader(files[seq], skip=HEADER_ONLY):
                    for t in g.feed(seq, ev):
                        yield seq, t, executed
                        executed.add(t)
                        if t.kind != UNFINISHED:
                            boundary = t.end
            except IncompleteTailError as e:
                if seq != last:
                    raise
                self._ends(seq, boundary, EVENT_CUT, e.offset or boundary)
                return
            for t in g.finish():
                if t.kind == UNFINISHED and seq == last:
                    self._ends(seq, boundary, NO_COMMIT, t.start)
                    return
                yield seq, t, executed

    def _ends(self, seq: int, boundary: int, unfinished: str, cut: int) -> None:
        self.end = self.series.position(seq, boundary)
        self.unfinished, self.cut = unfinished, cut

    def found_end(self, missing: GtidSet | MariaGtidPos | None = None) -> Found:
        """The answer when no transaction qualifies: the end of the complete part."""
        ran = self.executed.value() if self.executed is not None else None
        return Found(self.end, ran, None, True, missing, self.cut, self.unfinished)


def find_by_time(series: BinlogSeries, when: dt.datetime | int) -> Found:
    """The start position for transactions committed at or after ``when`` (aware datetime or µs)."""
    t_us = when if isinstance(when, int) else int(when.timestamp() * 1_000_000)
    starts = _file_starts(series)
    first = 0
    for i in range(len(starts) - 1):
        # file i ended before T (a file whose first events are not all written yet tells nothing)
        if _whole_start(starts[i], starts[i + 1]) and (starts[i + 1].created + 1) * 1_000_000 <= t_us:
            first = i + 1
    walk = _Walk(series, first)
    for seq, t, ex in walk:
        bound = t.commit_ts_us if t.commit_time_exact else t.latest_commit_us
        if bound is not None and bound >= t_us:
            return Found(series.position(seq, t.start), ex.value(), t, t.commit_time_exact)
    return walk.found_end()


def _whole_start(before: FileStart, start: FileStart) -> bool:
    """Whether a file's first events are all there: its FORMAT_DESCRIPTION, and its previous-GTIDs
    or GTID list where the file before it had one (a server writes them in every file; a file just
    created, or cut in them, has not yet)."""
    return bool(start.created) and all(
        b is None or s is not None
        for b, s in (
            (before.previous_gtids, start.previous_gtids),
            (before.maria_gtid_list, start.maria_gtid_list),
        )
    )


def find_by_gtid_set(series: BinlogSeries, gtids: GtidSet | MariaGtidPos) -> Found:
    """Where a replica that has executed ``gtids`` must start: the first transaction not in the set."""
    starts = _file_starts(series)
    first = 0
    for i, s in enumerate(starts):  # the last file whose start the set holds all of
        ran_before = s.previous_gtids if isinstance(gtids, GtidSet) else s.maria_gtid_list
        if ran_before is not None and _missing_before(s, gtids) is None:
            first = i
    missing = _missing_before(starts[0], gtids)
    walk = _Walk(series, first)
    for seq, t, ex in walk:
        if not _contains(gtids, t.gtid):
            at = series.position(seq, t.start)
            warning = _other_flavour(gtids, t.gtid)
            return Found(at, ex.value(), t, t.commit_time_exact, missing, warning=warning)
    return walk.found_end(missing)


def _other_flavour(gtids: GtidSet | MariaGtidPos, gtid: str | None) -> str | None:
    """A warning when ``gtids`` is of the other server's kind than the series' GTIDs (``gtid``, the
    first transaction not in it): none of the set can be in the series, so the answer is its start."""
    if not gtid or (isinstance(gtids, GtidSet) and not gtids):
        return None
    mysql = ":" in gtid
    if isinstance(gtids, MariaGtidPos) == mysql:
        given, here = ("a MariaDB GTID position", "MySQL") if mysql else ("a MySQL GTID set", "MariaDB")
        return f"{given} was given, but this series' transactions have {here} GTIDs: none of it is here"
    return None


def _missing_before(start: FileStart, gtids: GtidSet | MariaGtidPos) -> GtidSet | MariaGtidPos | None:
    """What the series ran before its first file (its previous-GTIDs / GTID list) and ``gtids`` lacks."""
    if isinstance(gtids, GtidSet):
        lack = start.previous_gtids.difference(gtids) if start.previous_gtids is not None else None
        return lack or None
    if start.maria_gtid_list is None:
        return None
    behind = tuple(g for g in start.maria_gtid_list.gtids if not gtids.contains(g[0], g[2]))
    return MariaGtidPos(behind) if behind else None


def _contains(gtids: GtidSet | MariaGtidPos, gtid: str | None) -> bool:
    if gtid is None:
        return False
    if isinstance(gtids, MariaGtidPos):
        if ":" in gtid:
            return False
        d, _, n = (int(x) for x in gtid.split("-"))
        return gtids.contains(d, n)
    return ":" in gtid and gtid in gtids


@dataclass
class FileIndex:
    """What a header-only scan learns about one file (cheap enough to build for every file)."""

    path: Path
    size: int
    events: int
    transactions: int
    first_header_ts: int | None
    last_header_ts: int | None
    first_commit_us: int | None
    last_commit_us: int | None
    commit_times_exact: bool
    previous_gtids: GtidSet | None
    maria_gtid_list: MariaGtidPos | None
    cut: int | None = None  # (a live file) where the event cut short at its end starts


def index_file(path: Path, live: bool = False) -> FileIndex:
    """What a header-only scan of ``path`` learns. ``live``: the file may be one the server is still
    writing: an event cut short at its end is not an error, and ``cut`` says where it starts."""
    start = file_start(path, live)
    g = TransactionGrouper(keep_events=False)
    events = 0
    first_ts = last_ts = None
    cut: int | None = None
    commits: list[Transaction] = []
    try:
        for ev in BinlogReader(path, skip=HEADER_ONLY):
            events += 1
            ts = ev.header.timestamp
            first_ts = ts if first_ts is None else first_ts
            last_ts = ts
            commits += g.feed(0, ev)
    except IncompleteTailError as e:
        if not live:
            raise
        cut = e.offset
    done = [t for t in commits if t.kind != UNFINISHED]
    return FileIndex(
        path=path,
        size=path.stat().st_size,
        events=events,
        transactions=len(done),
        first_header_ts=first_ts,
        last_header_ts=last_ts,
        first_commit_us=done[0].commit_time_us if done else None,
        last_commit_us=done[-1].commit_time_us if done else None,
        commit_times_exact=all(t.commit_time_exact for t in done) if done else False,
        previous_gtids=start.previous_gtids,
        maria_gtid_list=start.maria_gtid_list,
        cut=cut,
    )


class TailScan:
    """One header-only pass over a file: iterating yields the offset just past each complete
    transaction (and past a closing ROTATE/STOP); once exhausted, ``boundary`` is the last of them and
    ``unfinished`` says what follows it that is not complete yet (None: nothing, the file is whole).

    A file the server is still writing ends inside an event or inside a transaction; both are an
    unfinished tail here, never an error: whether that is allowed depends on whether the file is the
    active (last) one of its series, which the caller knows."""

    def __init__(self, path: str | Path, start: int = 4) -> None:
        self.path, self.start = str(path), start
        self.boundary = start  # just past the last complete transaction seen so far
        self.unfinished: str | None = None  # what follows the boundary that is not complete
        self.unfinished_at = 0  # where it starts
        self._done = False

    def __iter__(self) -> Iterator[int]:
        g = TransactionGrouper(keep_events=False)
        reader = BinlogReader(
            self.path, skip=HEADER_ONLY, start_position=self.start if self.start > 4 else None
        )
        try:
            for ev in reader:
                for t in g.feed(0, ev):
                    if t.kind != UNFINISHED:
                        self.boundary = t.end
                        yield t.end
                if ev.type_name in ("ROTATE", "STOP") and g.current is None:
                    self.boundary = ev.end_offset
                    yield ev.end_offset
        except IncompleteTailError as e:
            self.unfinished, self.unfinished_at = EVENT_CUT, e.offset or self.boundary
        else:
            if g.current is not None or g.pending:
                start = g.current.start if g.current is not None else g.pending[0].offset
                self.unfinished, self.unfinished_at = NO_COMMIT, start
        self._done = True

    def finish(self) -> TailScan:
        """Scan what iterating has not read yet; the scan, for chaining."""
        if not self._done:
            for _ in self:
                pass
        return self


def transaction_ends(path: str | Path, start: int = 4) -> Iterator[int]:
    """Offsets just past each complete transaction of a file from ``start`` (and past a closing
    ROTATE/STOP), header-only. An unfinished tail of a file still being written ends the scan: what
    follows the last boundary is not complete yet."""
    return iter(TailScan(path, start))


def last_boundary(path: str | Path, start: int = 4) -> int:
    """The offset just past the last complete transaction of a file, from ``start`` (header-only)."""
    return TailScan(path, start).finish().boundary


def gtid_cuts(path: str | Path, every: int) -> list[int] | None:
    """``split_points`` of a complete file without reading an event: its v4 headers are walked by
    their lengths alone (``reader.walk_headers``, no Python object per event), each cut at the first
    GTID event (which begins a transaction) at least ``every`` bytes after the last. None when it
    cannot tell: no GTID event where a cut is due (an old server's file), or a header that is not a
    v4 event's — then the caller scans as ``split_points`` does, which says what is wrong."""
    from binlake.reader import walk_headers

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(4 + HEADER_V4_LEN + 6)
        if len(head) < 4 + HEADER_V4_LEN + 6 or head[4 + 4] != EventType.FORMAT_DESCRIPTION:
            return None
        body = 4 + HEADER_V4_LEN
        if int.from_bytes(head[body : body + 2], "little") != 4 or head[body + 2 : body + 6] in (
            b"5.0.",
            b"5.1.",
        ):
            return None  # not v4, or a server whose type codes may be permuted
        points: list[int] = []
        pos = 4
        while True:  # from the last cut (or the first event) to the first event start past ``every``
            _, pos, ended = walk_headers(f, pos, pos + every, HEADER_V4_LEN)
            if pos >= size:
                return points if pos == size else None
            if ended:
                return None
            due = pos
            while True:  # event by event to the next GTID event
                f.seek(pos)
                header = f.read(HEADER_V4_LEN)
                length = int.from_bytes(header[9:13], "little") if len(header) == HEADER_V4_LEN else 0
                if length < HEADER_V4_LEN:
                    return None
                if header[4] in GTID_EVENTS:  # (they begin a transaction: MySQL 5.6+, MariaDB 10+)
                    points.append(pos)
                    break
                pos += length
                if pos >= size:
                    return points if pos == size else None
                if pos - due > every:
                    return None  # far past a due cut and not one GTID event: not a file that has them


def split_points(
    path: str | Path, every: int, start: int = 4, stop: int | None = None, ends: Iterable[int] | None = None
) -> list[int]:
    """Transaction boundaries about ``every`` bytes apart inside (start, stop), so one big file reads
    as several ranges in parallel (each range starts at a transaction, whose table maps it carries).
    ``ends``: the file's boundaries from a scan the caller also wants the tail of (a ``TailScan``)."""
    points, next_at = [], start + every
    for end in transaction_ends(path, start) if ends is None else ends:
        if stop is not None and end >= stop:
            break
        if end >= next_at:
            points.append(end)
            next_at = end + every
    return points


def starts_transaction(path: str | Path, offset: int) -> bool:
    """Whether a transaction's first event is at ``offset`` of ``path`` (header-only): a GTID event
    there is one (the reader refuses an offset that is no event start); without GTIDs (old servers)
    the file's transactions are walked up to it, and one must begin exactly there."""
    reader = BinlogReader(path, skip=HEADER_ONLY, start_position=offset if offset > 4 else None)
    # the reader gives the file's FORMAT_DESCRIPTION first, wherever it starts
    first = next((ev for ev in reader if ev.offset >= offset), None)
    if first is None or first.offset != offset:
        return False
    if first.kind in GTID_EVENTS:
        return True
    g = TransactionGrouper(keep_events=False)
    for ev in BinlogReader(path, skip=HEADER_ONLY):
        starts = [t.start for t in g.feed(0, ev)]
        if g.current is not None:
            starts.append(g.current.start)
        if g.pending:
            starts.append(g.pending[0].offset)
        if offset in starts:
            return True
        if ev.offset >= offset:
            return False
    return False
