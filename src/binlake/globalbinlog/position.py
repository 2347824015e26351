"""Where to start reading a global binlog for a commit TSO (``binlake find-position --tso``): the
first transaction whose virtual TSO mark (``CTS::<vtso>``) is at or after it. Marks only go up in a
global binlog, so the file is found from each file's first mark and only that file is scanned."""

from __future__ import annotations

from pathlib import Path

from binlake.errors import BinlogError
from binlake.events.control import RowsQuery
from binlake.globalbinlog.output import CTS_MARK
from binlake.globalbinlog.vtso import TSO_NODE, Vtso, make, parse
from binlake.gtid import GtidSet, parse_gtid
from binlake.position import Found
from binlake.reader import BinlogReader
from binlake.series import BinlogSeries
from binlake.txn import UNFINISHED, Transaction, TransactionGrouper

VTSO_DIGITS = 54


def target_vtso(tso: str) -> Vtso:
    """A commit TSO (a number: the first vtso of that TSO) or a whole 54-digit vtso."""
    text = tso.strip()
    if not text.isdigit():
        raise ValueError(f"{tso!r} is not a TSO (a number) nor a 54-digit vtso")
    return text if len(text) == VTSO_DIGITS else make(int(text), 0, 0, TSO_NODE)


def _first_mark(path: Path) -> Vtso | None:
    for ev in BinlogReader(path, decode_rows=False):
        if isinstance(ev.body, RowsQuery) and ev.body.query.startswith(CTS_MARK):
            return ev.body.query.removeprefix(CTS_MARK)
    return None


def mark_of(t: Transaction) -> Vtso | None:
    for e in t.events:
        if isinstance(e.body, RowsQuery) and e.body.query.startswith(CTS_MARK):
            return e.body.query.removeprefix(CTS_MARK)
    return None


def describe(found: Found, vtso: Vtso | None) -> str:
    """What ``find-position --tso`` prints: where, the GTIDs before it, the transaction there."""
    lines = [f"file: {found.position.file}", f"position: {found.position.offset}"]
    if found.executed is not None:
        lines.append(f"executed before: {str(found.executed) or '(empty)'}")
    t = found.transaction
    if t is None or vtso is None:
        lines.append("no transaction at or after that TSO yet: this is the end of the series")
    else:
        tso, txn_id, seq, _ = parse(vtso)
        kind = "its commit TSO" if seq == 0 else "a transaction without TSO, after the TSO commit"
        lines.append(f"first transaction: {t.gtid or 'anonymous'} vtso {vtso} ({kind} {tso})")
    return "\n".join(lines)


def find_by_tso(series: BinlogSeries, tso: str) -> tuple[Found, Vtso | None]:
    """The position of the first transaction at or after ``tso`` (and its vtso; None: the end).
    The GTIDs executed before it are the series' numbers below its own (binlake writes them
    ``UUID:1, 2, 3, ...``)."""
    target = target_vtso(tso)
    first, marked = 0, False
    for i, f in enumerate(series.files):
        mark = _first_mark(f)
        marked = marked or mark is not None
        if mark is not None and mark <= target:
            first = i
        elif mark is not None:
            break
    last_gtid: str | None = None
    for seq in range(first, len(series.files)):
        g = TransactionGrouper(keep_events=True)
        for ev in BinlogReader(series.files[seq], decode_rows=False):
            for t in g.feed(seq, ev):
                if t.kind == UNFINISHED:
                    continue
                mark = mark_of(t)
                marked = marked or mark is not None
                if mark is not None and mark >= target:
                    return Found(series.position(seq, t.start), _before(t.gtid), t, False), mark
                last_gtid = t.gtid or last_gtid
    if not marked:
        raise BinlogError(
            f"{series.files[0]} is not a global binlog: no CTS:: mark (written by binlake merge)"
        )
    last = len(series.files) - 1
    end = series.position(last, series.files[last].stat().st_size)
    executed = _before(last_gtid, through=True) if last_gtid else None
    return Found(end, executed, None, True), None


def _before(gtid: str | None, through: bool = False) -> GtidSet | None:
    """UUID:1-(n-1) for the transaction ``UUID:n`` (UUID:1-n ``through`` it); None without GTIDs."""
    if gtid is None:
        return None
    sid, tag, gno = parse_gtid(gtid)
    top = gno if through else gno - 1
    return GtidSet.from_dict({(sid, tag): [(1, top)]} if top else {})
