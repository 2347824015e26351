"""``generate``, ``simulate-shards`` and ``demo``: workloads with their truth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from binlake.cli.common import Command, Options, size_arg
from binlake.console import ByteProgress


@dataclass(frozen=True)
class GenerateOptions(Options):
    out: str
    size: int = 10**7
    flavor: str = "mysql80"
    seed: int = 1
    max_file_size: int = 256 * 10**6
    json_as_text: bool = False


def cmd_generate(o: GenerateOptions) -> int:
    from binlake.generate import GenConfig, Generator

    cfg = GenConfig(
        seed=o.seed,
        flavor=o.flavor,
        target_bytes=o.size,
        max_file_size=o.max_file_size,
        json_type=not o.json_as_text,
        keep_transactions=False,  # the truth goes to truth/transactions.jsonl: memory stays bounded
    )
    with ByteProgress(o.size, "generating", streams_output=False) as progress:
        result = Generator(cfg).run(o.out, on_progress=progress.advance_to)
    total = sum(f.stat().st_size for f in result.files)
    with open(result.truth_dir / "transactions.jsonl") as f:
        count = sum(1 for _ in f)
    print(f"{len(result.files)} binlog file(s), {total:,} bytes, {count:,} transactions in {o.out}")
    print(f"truth (final tables, every committed transaction): {result.truth_dir}")
    return 0


@dataclass(frozen=True)
class SimulateOptions(Options):
    out: str
    nodes: int = 4
    transactions: int = 1000
    carrier: str = "sequence80"
    heartbeat_every: int = 25
    max_file_size: int = 10**6
    seed: int = 1


def cmd_simulate(o: SimulateOptions) -> int:
    from binlake.shardsim import ShardSimulator, SimConfig

    cfg = SimConfig(
        seed=o.seed,
        nodes=o.nodes,
        transactions=o.transactions,
        carrier=o.carrier,
        heartbeat_every=o.heartbeat_every,
        max_file_size=o.max_file_size,
    )
    result = ShardSimulator(cfg).run(o.out)
    kinds: dict[str, int] = {}
    for t in result.transactions:
        kinds[f"{t.kind} {t.outcome}"] = kinds.get(f"{t.kind} {t.outcome}", 0) + 1
    print(f"{o.nodes} data nodes in {o.out}/dn*: " + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())))
    print(f"truth: {o.out}/truth.jsonl; conserved total {result.total}")
    return 0


@dataclass(frozen=True)
class DemoOptions(Options):
    workdir: str = "out/demo"


def cmd_demo(o: DemoOptions) -> int:
    from binlake.demo import run_demo

    return run_demo(o.workdir)


def add_generate(sub: Any) -> None:
    gen = sub.add_parser("generate", help="write a deterministic workload as binlogs, with its truth")
    gen.add_argument("out", help="output directory (binlogs, index file, truth/)")
    gen.add_argument(
        "--size", type=size_arg, default=10**7, help="total binlog size to write (e.g. 500MB, 1GB)"
    )
    gen.add_argument("--flavor", choices=("mysql57", "mysql80", "mariadb"), default="mysql80")
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument(
        "--max-file-size", type=size_arg, default=256 * 10**6, help="rotate files past this size"
    )
    gen.add_argument(
        "--json-as-text",
        action="store_true",
        help="JSON documents in a LONGTEXT column (for tools without binary JSON)",
    )
    gen.set_defaults(handler=Command(GenerateOptions, cmd_generate))


def add_simulate(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate-shards", help="binlogs of a sharded database (XA with commit TSO, holes), with truth"
    )
    sim.add_argument("out")
    sim.add_argument("--nodes", type=int, default=4)
    sim.add_argument("--transactions", type=int, default=1000)
    sim.add_argument(
        "--carrier",
        choices=("sequence80", "gcn105", "qstatus200"),
        default="sequence80",
        help="where the commit TSO is written: PolarDB-X 5.7 sequence events, 8.0 GCN events, or query status",
    )
    sim.add_argument(
        "--heartbeat-every", type=int, default=25, help="ticks between heartbeat transactions (0: none)"
    )
    sim.add_argument("--max-file-size", type=size_arg, default=10**6)
    sim.add_argument("--seed", type=int, default=1)
    sim.set_defaults(handler=Command(SimulateOptions, cmd_simulate))


def add_demo(sub: Any) -> None:
    m = sub.add_parser(
        "demo",
        help="generate a MySQL 8 binlog series, sync it into Delta on local Spark, check it against its truth",
        description="Generate a seeded MySQL 8 binlog series (with DDL: columns added, dropped and "
        "renamed, tables renamed) and its truth, apply it to Delta tables with the Spark pipeline, "
        "and compare every table with the truth (exit 1 if one differs). Needs Java 17, no server.",
    )
    m.add_argument(
        "--workdir",
        default="out/demo",
        help="where the binlogs and the Delta tables go (emptied first: new, empty or an earlier demo's only)",
    )
    m.set_defaults(handler=Command(DemoOptions, cmd_demo))
