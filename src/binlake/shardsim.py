"""A deterministic simulator of a sharded database (PolarDB-X style) writing one binlog series per
data node: XA two-phase transactions with commit TSO, single-node and one-phase transactions
without it, transaction holes of every prepare/commit interleaving, rollbacks, idle nodes and
heartbeat transactions (the generator of global-binlog.md §5.5), plus the ground truth.

Workload: ``transfer`` on ``acct(id BIGINT PK, bal BIGINT)`` — every committed transaction moves an
amount between two accounts, so the total over all nodes is constant at every consistent point.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlake.events.control import XaPrepare, Xid
from binlake.events.gtid import Gtid
from binlake.events.query import Query
from binlake.events.rows import Rows
from binlake.events.table_map import TableMap
from binlake.events.types import EventType
from binlake.events.vendor import PolarxGcn, PolarxSequence
from binlake.values.columns import ColumnDef
from binlake.values.types import ColumnType
from binlake.writer import BinlogWriter

KINDS = (
    "GLOBAL_TSO",
    "SINGLE_DN_TSO",
    "ONE_PHASE",
    "LOCAL",
    "NO_TSO_XA",
    "ROLLBACK",
    "PARTIAL_PREPARE_ROLLBACK",
)
CARRIERS = ("sequence80", "gcn105", "qstatus200")
GCN_SNAPSHOT, GCN_COMMIT = 0x01 | 0x02, 0x01 | 0x04


class Tso:
    """TSO oracle: ``physical_ms << 22 | logical``, strictly increasing on a virtual clock."""

    def __init__(self, start_ms: int) -> None:
        self.ms, self.logical = start_ms, 0

    def tick(self, ms: int) -> None:
        if ms > self.ms:
            self.ms, self.logical = ms, 0

    def next(self) -> int:
        self.logical += 1
        return (self.ms << 22) | self.logical

    def peek(self) -> int:
        return (self.ms << 22) | self.logical


@dataclass
class Branch:
    dn: int
    group: str
    changes: list[tuple[int, int, int]]  # (account id, balance before, balance after)
    prepared_at: tuple[str, int] | None = None
    ended_at: tuple[str, int] | None = None


@dataclass
class SimTxn:
    txid: int
    kind: str
    branches: list[Branch]
    cts: int | None = None
    outcome: str = "pending"  # committed | rolled_back | pending

    @property
    def gtrid(self) -> bytes:
        return f"drds-{self.txid:016x}@sim".encode()


@dataclass
class SimConfig:
    seed: int = 1
    nodes: int = 3
    groups_per_node: int = 2
    accounts: int = 60
    transactions: int = 300
    sessions: int = 6
    carrier: str = "sequence80"
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "GLOBAL_TSO": 5,
            "SINGLE_DN_TSO": 1,
            "ONE_PHASE": 1,
            "LOCAL": 2,
            "NO_TSO_XA": 0.5,
            "ROLLBACK": 0.5,
            "PARTIAL_PREPARE_ROLLBACK": 0.3,
        }
    )
    heartbeat_every: int = 25  # ticks between heartbeat transactions (0: none)
    idle_nodes: tuple[int, ...] = ()  # nodes that get no data (only heartbeats, if enabled)
    pending_at_end: int = 1  # global transactions left prepared, never resolved
    max_file_size: int | None = 60_000
    start_ms: int = 1_700_000_000_000
    initial_balance: int = 1000
    # PolarDB-X physical names: group g of node n is partition k = n * groups_per_node + g, a table
    # ``acct_<sfx>_<k:05d>`` in database ``db_p<k:05d>`` (logical ``db.acct``); ``implicit_id``: the
    # table also has PolarDB-X's hidden primary key ``_drds_implicit_id_`` as a last column, and its
    # table maps name their columns (binlog_row_metadata=FULL)
    shard_tables: bool = False
    implicit_id: bool = False


@dataclass
class SimResult:
    node_files: list[list[Path]]
    transactions: list[SimTxn]
    total: int  # the conserved sum of balances
    balances: dict[int, int] = field(default_factory=dict)  # every account's committed balance at the end

    def committed(self) -> list[SimTxn]:
        return [t for t in self.transactions if t.outcome == "committed"]


def _acct_columns(implicit_id: bool = False) -> list[ColumnDef]:
    cols = [
        ColumnDef(0, ColumnType.LONGLONG, 0, False, name="id"),
        ColumnDef(1, ColumnType.LONGLONG, 0, True, name="bal"),
    ]
    if implicit_id:
        cols.append(ColumnDef(2, ColumnType.LONGLONG, 0, False, name="_drds_implicit_id_"))
    return cols


SHARD_SUFFIX = "k3Zq"  # PolarDB-X gives all partitions of one logical table one random suffix


def physical_table(partition: int) -> tuple[str, str]:
    """The PolarDB-X AUTO-mode names of partition ``partition`` of the logical table ``db.acct``."""
    return f"db_p{partition:05d}", f"acct_{SHARD_SUFFIX}_{partition:05d}"


class ShardSimulator:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.tso = Tso(cfg.start_ms)
        self.clock_ms = cfg.start_ms
        data_nodes = [n for n in range(cfg.nodes) if n not in cfg.idle_nodes] or [0]
        self.home = {
            a: (self.rng.choice(data_nodes), f"G{self.rng.randrange(cfg.groups_per_node)}")
            for a in range(1, cfg.accounts + 1)
        }
        self.balance = dict.fromkeys(self.home, cfg.initial_balance)
        self.locks: dict[int, int] = {}  # account -> txid
        self.txns: list[SimTxn] = []
        self.writers: list[BinlogWriter] = []
        self.table = TableMap(70, 1, "db", "acct", _acct_columns())
        self.hb_table = TableMap(71, 1, "db", "__cdc_heartbeat__", _acct_columns())
        self.shards: dict[tuple[int, str], TableMap] = {}
        if cfg.shard_tables:
            for dn in range(cfg.nodes):
                for g in range(cfg.groups_per_node):
                    k = dn * cfg.groups_per_node + g
                    db, table = physical_table(k)
                    self.shards[dn, f"G{g}"] = TableMap(
                        100 + k,
                        1,
                        db,
                        table,
                        _acct_columns(cfg.implicit_id),
                        has_optional_metadata=cfg.implicit_id,
                    )
        self.pending_left = cfg.pending_at_end

    # ---- binlog writing -------------------------------------------------------------------------

    def _ts(self) -> int:
        return self.clock_ms // 1000

    def _q(self, dn: int, sql: str, status: dict[str, Any] | None = None) -> tuple[str, int]:
        st: dict[str, Any] = {"flags2": 0, "sql_mode": 0}
        st.update(status or {})
        return self.writers[dn].event(EventType.QUERY, Query(dn + 1, 0, 0, "db", sql, st), self._ts())[
            0
        ].name, 0

    def _ev(self, dn: int, code: int, body: Any) -> tuple[str, int]:
        path, off = self.writers[dn].event(code, body, self._ts())
        return path.name, off

    def _xid_text(self, t: SimTxn, b: Branch) -> str:
        return f"X'{t.gtrid.hex()}',X'{b.group.encode().hex()}',1"

    def _table(self, b: Branch) -> TableMap:
        return self.shards.get((b.dn, b.group), self.table)

    def _rows(self, dn: int, tm: TableMap, changes: list[tuple[int, int, int]]) -> None:
        self._ev(dn, EventType.TABLE_MAP, tm)
        n = len(tm.columns)
        r = Rows("update", 2, tm.table_id, 1, n, (1 << n) - 1, (1 << n) - 1, table=tm)
        hidden = [[a + 10**6] for a, _, _ in changes] if n == 3 else [[] for _ in changes]
        r.rows = [
            ([a, before, *h], [a, after, *h]) for (a, before, after), h in zip(changes, hidden, strict=True)
        ]
        self._ev(dn, EventType.UPDATE_ROWS_V2, r)

    def _anon_gtid(self, dn: int) -> None:
        self._ev(
            dn,
            EventType.ANONYMOUS_GTID,
            Gtid(
                0,
                "00000000-0000-0000-0000-000000000000",
                0,
                anonymous=True,
                last_committed=0,
                sequence_number=0,
            ),
        )

    def _prepare(
        self,
        t: SimTxn,
        b: Branch,
        tso_carrier: bool,
        one_phase: bool = False,
        tm: TableMap | None = None,
        commit_seq: int | None = None,
    ) -> None:
        dn, carrier = b.dn, self.cfg.carrier
        self._anon_gtid(dn)
        if tso_carrier and carrier == "gcn105":
            self._ev(dn, EventType.POLARDBX_GCN, PolarxGcn(GCN_SNAPSHOT, self.tso.peek()))
        b.prepared_at = self._q(dn, f"XA START {self._xid_text(t, b)}")
        if tso_carrier and carrier == "sequence80":
            self._ev(dn, EventType.POLARDBX_SEQUENCE, PolarxSequence(1, self.tso.peek()))
        self._rows(dn, tm or self._table(b), b.changes)
        end_status = (
            {"lizard_prepare_gcn": self.tso.peek()} if tso_carrier and carrier == "qstatus200" else None
        )
        self._q(dn, f"XA END {self._xid_text(t, b)}", end_status)
        if commit_seq is not None:  # AliSQL's XA COMMIT ... ONE PHASE with its own commit sequence
            self._ev(dn, EventType.POLARDBX_SEQUENCE, PolarxSequence(2, commit_seq))
        self._ev(dn, EventType.XA_PREPARE, XaPrepare(one_phase, 1, t.gtrid, b.group.encode()))
        self.writers[dn].maybe_rotate(self._ts())

    def _commit(self, t: SimTxn, b: Branch, tso_carrier: bool) -> None:
        dn, carrier = b.dn, self.cfg.carrier
        self._anon_gtid(dn)
        status = None
        if tso_carrier and carrier == "sequence80":
            self._ev(dn, EventType.POLARDBX_SEQUENCE, PolarxSequence(2, t.cts or 0))
        elif tso_carrier and carrier == "gcn105":
            self._ev(dn, EventType.POLARDBX_GCN, PolarxGcn(GCN_COMMIT, t.cts or 0))
        elif tso_carrier:
            status = {"lizard_commit_gcn": t.cts}
        b.ended_at = self._q(dn, f"XA COMMIT {self._xid_text(t, b)}", status)
        self.writers[dn].maybe_rotate(self._ts())

    def _ddl(self, dn: int, db: str, sql: str, snapshot: int | None) -> None:
        """A physical DDL as a PolarDB-X node writes it: the snapshot TSO the CN ran it at (GCN flag
        1 / Sequence SNAPSHOT before it, or status variable 201), then the statement alone."""
        carrier, status = self.cfg.carrier, None
        if snapshot is not None and carrier == "gcn105":
            self._ev(dn, EventType.POLARDBX_GCN, PolarxGcn(0x01, snapshot))
        elif snapshot is not None and carrier == "sequence80":
            self._ev(dn, EventType.POLARDBX_SEQUENCE, PolarxSequence(1, snapshot))
        elif snapshot is not None:
            status = {"lizard_prepare_gcn": snapshot}
        self._anon_gtid(dn)
        st: dict[str, Any] = {"flags2": 0, "sql_mode": 0, **(status or {})}
        self._ev(dn, EventType.QUERY, Query(dn + 1, 0, 0, db, sql, st))
        self.writers[dn].maybe_rotate(self._ts())

    def _rollback(self, t: SimTxn, b: Branch) -> None:
        self._anon_gtid(b.dn)
        b.ended_at = self._q(b.dn, f"XA ROLLBACK {self._xid_text(t, b)}")
        self.writers[b.dn].maybe_rotate(self._ts())

    def _local(self, t: SimTxn, b: Branch) -> None:
        self._anon_gtid(b.dn)
        b.prepared_at = self._q(b.dn, "BEGIN")
        self._rows(b.dn, self._table(b), b.changes)
        self._ev(b.dn, EventType.XID, Xid(t.txid))
        self.writers[b.dn].maybe_rotate(self._ts())

    # ---- the workload ---------------------------------------------------------------------------

    def _new_txn(self, txid: int) -> SimTxn | None:
        cfg, rng = self.cfg, self.rng
        kinds = list(cfg.weights)
        kind = rng.choices(kinds, [cfg.weights[k] for k in kinds])[0]
        a, b = rng.sample(sorted(self.home), 2)
        if any(x in self.locks for x in (a, b)):
            return None
        amount = rng.randint(1, 50)
        changes = {a: -amount, b: amount}
        by_branch: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
        for acc, delta in sorted(changes.items()):
            dn, group = self.home[acc]
            if kind in ("SINGLE_DN_TSO", "ONE_PHASE", "LOCAL"):
                dn, group = self.home[a]  # single-node kinds keep both accounts' changes on one node
            by_branch.setdefault((dn, group), []).append((acc, self.balance[acc], self.balance[acc] + delta))
        if kind in ("SINGLE_DN_TSO", "ONE_PHASE", "LOCAL") and len({self.home[a][0], self.home[b][0]}) > 1:
            kind = "GLOBAL_TSO"  # cannot stay on one node: the accounts live apart
            by_branch = {}
            for acc, delta in sorted(changes.items()):
                by_branch.setdefault(self.home[acc], []).append(
                    (acc, self.balance[acc], self.balance[acc] + delta)
                )
        for acc in changes:
            self.locks[acc] = txid
        branches = [Branch(dn, grp, ch) for (dn, grp), ch in by_branch.items()]
        return SimTxn(txid, kind, branches)

    def _script(self, t: SimTxn) -> list[Any]:
        """The steps of a transaction, each run in its own tick (so other sessions interleave)."""
        rng = self.rng
        steps: list[Any] = []
        if t.kind == "LOCAL":
            return [lambda: self._finish_local(t)]
        if t.kind == "ONE_PHASE":
            return [lambda: self._finish_one_phase(t)]
        tso = t.kind in ("GLOBAL_TSO", "SINGLE_DN_TSO")
        order = t.branches[:]
        rng.shuffle(order)
        skip = order[0] if t.kind == "PARTIAL_PREPARE_ROLLBACK" else None
        for br in order:
            if br is not skip:
                steps.append(lambda br=br: self._prepare(t, br, tso))
        if t.kind in ("ROLLBACK", "PARTIAL_PREPARE_ROLLBACK"):
            order2 = [br for br in t.branches if br is not skip]
            rng.shuffle(order2)
            steps += [lambda br=br: self._rollback(t, br) for br in order2]
            steps.append(lambda: self._end(t, "rolled_back"))
            return steps
        steps.append(lambda: self._fetch_cts(t, tso))
        order3 = t.branches[:]
        rng.shuffle(order3)
        for br in order3:
            steps += [lambda: None] * rng.randint(0, 3)  # commits spread over later ticks: holes
            steps.append(lambda br=br: self._commit_branch(t, br, tso))
        steps.append(lambda: self._end(t, "committed"))
        return steps

    def _fetch_cts(self, t: SimTxn, tso: bool) -> None:
        t.cts = self.tso.next() if tso else None

    def _commit_branch(self, t: SimTxn, br: Branch, tso: bool) -> None:
        self._commit(t, br, tso)
        for acc, _, after in br.changes:
            self.balance[acc] = after
            self.locks.pop(acc, None)

    def _finish_local(self, t: SimTxn) -> None:
        for br in t.branches:
            self._local(t, br)
            for acc, _, after in br.changes:
                self.balance[acc] = after
                self.locks.pop(acc, None)
        self._end(t, "committed")

    def _finish_one_phase(self, t: SimTxn, commit_seq: int | None = None) -> None:
        for br in t.branches:
            self._prepare(t, br, False, one_phase=True, commit_seq=commit_seq)
            for acc, _, after in br.changes:
                self.balance[acc] = after
                self.locks.pop(acc, None)
        self._end(t, "committed")

    def _end(self, t: SimTxn, outcome: str) -> None:
        t.outcome = outcome
        if outcome != "committed":
            for br in t.branches:
                for acc, _, _ in br.changes:
                    self.locks.pop(acc, None)

    def _heartbeat(self, txid: int) -> SimTxn:
        """One branch per node on the heartbeat table, committed with a TSO: a watermark for idle nodes."""
        t = SimTxn(txid, "HEARTBEAT", [Branch(dn, "HB", [(0, 0, 0)]) for dn in range(self.cfg.nodes)])
        for br in t.branches:
            self._prepare(t, br, True, tm=self.hb_table)
        t.cts = self.tso.next()
        for br in t.branches:
            self._commit(t, br, True)
        t.outcome = "committed"
        return t

    def run(self, out: str | Path) -> SimResult:
        cfg = self.cfg
        out = Path(out)
        self.writers = [
            BinlogWriter(
                out / f"dn{n}",
                flavor="mysql57",
                server_id=n + 1,
                max_file_size=cfg.max_file_size,
                created=cfg.start_ms // 1000,
            )
            for n in range(cfg.nodes)
        ]
        total = sum(self.balance.values())
        running: list[tuple[SimTxn, list[Any]]] = []
        txid, tick = 0, 0
        while txid < cfg.transactions or running:
            tick += 1
            self.clock_ms += self.rng.randint(1, 20)
            self.tso.tick(self.clock_ms)
            if cfg.heartbeat_every and tick % cfg.heartbeat_every == 0:
                txid += 1
                self.txns.append(self._heartbeat(txid))
            while len(running) < cfg.sessions and txid < cfg.transactions:
                t = self._new_txn(txid + 1)
                if t is None:
                    break
                txid += 1
                self.txns.append(t)
                running.append((t, self._script(t)))
            if running:
                i = self.rng.randrange(len(running))
                t, steps = running[i]
                steps.pop(0)()
                if not steps:
                    running.pop(i)
                elif self._pending_tail(t, txid):
                    running.pop(i)
        for w in self.writers:
            w.close(self._ts())
        result = SimResult([w.files for w in self.writers], self.txns, total, dict(self.balance))
        with open(out / "truth.jsonl", "w") as f:
            for t in self.txns:
                f.write(json.dumps(dataclasses.asdict(t)) + "\n")
        return result

    def _pending_tail(self, t: SimTxn, txid: int) -> bool:
        """The last few global transactions stay prepared forever once all their branches are prepared."""
        if t.kind != "GLOBAL_TSO" or self.pending_left <= 0 or t.txid <= self.cfg.transactions - 20:
            return False
        if all(b.prepared_at for b in t.branches) and t.cts is None:
            self.pending_left -= 1
            t.kind, t.outcome = "PENDING", "pending"
            for br in t.branches:
                for acc, _, _ in br.changes:
                    self.locks.pop(acc, None)
            return True
        return False


def simulate(out: str | Path, **options: Any) -> SimResult:
    return ShardSimulator(SimConfig(**options)).run(out)


class ScriptedCluster(ShardSimulator):
    """Exact event lists for the hand-written scenarios of global-binlog.md §5.5: every call appends
    one action's events to one node, in the order the test says. Transfers take their before-images
    from the committed balances, so the bank invariant and the replay check hold when the script
    respects row locks (no two open transactions write one account)."""

    def __init__(self, out: str | Path, nodes: int = 2, carrier: str = "sequence80", **options: Any) -> None:
        super().__init__(
            SimConfig(nodes=nodes, carrier=carrier, heartbeat_every=0, pending_at_end=0, **options)
        )
        self.out = Path(out)
        self.writers = [
            BinlogWriter(
                self.out / f"dn{n}", flavor="mysql57", server_id=n + 1, created=self.cfg.start_ms // 1000
            )
            for n in range(nodes)
        ]
        self.total = sum(self.balance.values())
        self.next_id = 0

    def tick(self, ms: int = 5) -> None:
        self.clock_ms += ms
        self.tso.tick(self.clock_ms)

    def txn(self, kind: str, branches: list[tuple[int, str, dict[int, int]]]) -> SimTxn:
        """A transaction: per branch (node, group, {account: delta})."""
        self.next_id += 1
        t = SimTxn(
            self.next_id,
            kind,
            [
                Branch(
                    dn, group, [(a, self.balance[a], self.balance[a] + d) for a, d in sorted(deltas.items())]
                )
                for dn, group, deltas in branches
            ],
        )
        self.txns.append(t)
        return t

    def _branch(self, t: SimTxn, dn: int, group: str | None) -> Branch:
        return next(b for b in t.branches if b.dn == dn and (group is None or b.group == group))

    def _write(self, b: Branch) -> None:
        """The branch writes now (under its row locks): its before-images are the balances now."""
        b.changes = [
            (a, self.balance[a], self.balance[a] + (after - before)) for a, before, after in b.changes
        ]

    def prepare(self, t: SimTxn, dn: int, group: str | None = None) -> None:
        self.tick()
        b = self._branch(t, dn, group)
        self._write(b)
        self._prepare(t, b, t.kind in ("GLOBAL_TSO", "SINGLE_DN_TSO"))

    def fetch_cts(self, t: SimTxn) -> None:
        self.tick()
        self._fetch_cts(t, t.kind in ("GLOBAL_TSO", "SINGLE_DN_TSO"))

    def commit(self, t: SimTxn, dn: int, group: str | None = None) -> None:
        self.tick()
        self._commit_branch(t, self._branch(t, dn, group), t.kind in ("GLOBAL_TSO", "SINGLE_DN_TSO"))
        t.outcome = "committed"

    def two_phase_commit(self, t: SimTxn) -> None:
        """Prepare every branch, fetch the CTS, commit every branch (in the transaction's branch
        order): the whole protocol with nothing between, for scripts that need no hole."""
        for b in t.branches:
            self.prepare(t, b.dn, b.group)
        self.fetch_cts(t)
        for b in t.branches:
            self.commit(t, b.dn, b.group)

    def rollback(self, t: SimTxn, dn: int, group: str | None = None) -> None:
        self.tick()
        self._rollback(t, self._branch(t, dn, group))
        t.outcome = "rolled_back"

    def local(self, t: SimTxn) -> None:
        self.tick()
        for b in t.branches:
            self._write(b)
        self._finish_local(t)

    def one_phase(self, t: SimTxn, commit_seq: int | None = None) -> None:
        """XA COMMIT ... ONE PHASE; ``commit_seq``: with a Sequence COMMIT in it (the AliSQL shape)."""
        self.tick()
        for b in t.branches:
            self._write(b)
        self._finish_one_phase(t, commit_seq)

    def heartbeat(self) -> SimTxn:
        self.tick()
        self.next_id += 1
        t = self._heartbeat(self.next_id)
        self.txns.append(t)
        return t

    def ddl(self, template: str, tso: bool = True, nodes: list[int] | None = None) -> None:
        """One logical DDL run on every shard (of ``nodes``) of ``db.acct``: ``template`` with
        ``{table}`` as each physical table (``shard_tables``) or ``acct``; all with one snapshot
        TSO (``tso``) as PolarDB-X's CN runs it, or none."""
        self.tick()
        snapshot = self.tso.next() if tso else None
        for (dn, _), tm in sorted(self.shards.items()) or [
            ((n, ""), self.table) for n in range(self.cfg.nodes)
        ]:
            if nodes is None or dn in nodes:
                self._ddl(dn, tm.database, template.format(table=tm.table), snapshot)

    def rotate(self, dn: int) -> None:
        self.writers[dn].rotate(self._ts())

    def finish(self) -> SimResult:
        for w in self.writers:
            w.close(self._ts())
        return SimResult([w.files for w in self.writers], self.txns, self.total, dict(self.balance))
