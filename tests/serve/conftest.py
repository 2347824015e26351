"""``binlake serve`` on the sockets: a server in a thread per test, on a free loopback port, over a
global binlog the simulator and ``binlake merge`` make, or over copies of real corpus files."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from binlake.serve.server import BinlogServer, Limits
from binlake.serve.session import ServeConfig

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "binlogs"
USER, PASSWORD = "repl", "s3cret-pw"


@contextmanager
def serving(directory: Path, limits: Limits | None = None, **config: object) -> Iterator[int]:
    """A server on ``directory``; yields its port, shuts it down after."""
    cfg = ServeConfig(str(config.pop("user", USER)), str(config.pop("password", PASSWORD)), **config)  # type: ignore[arg-type]
    server = BinlogServer(str(directory), cfg, "127.0.0.1", 0, limits or Limits(poll_interval=0.05))
    server.start()
    try:
        yield server.address[1]
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def global_binlog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A merged global binlog of 4 simulated nodes in 3 files."""
    from binlake.globalbinlog.merge import merge_nodes
    from binlake.globalbinlog.output import write_binlog
    from binlake.shardsim import simulate

    root = tmp_path_factory.mktemp("serve-global")
    res = simulate(root / "nodes", seed=11, transactions=300, nodes=4, pending_at_end=0)
    out, _ = merge_nodes(res.node_files)
    files = write_binlog(out, root / "global", max_file_size=40_000)
    assert len(files) == 3
    return root / "global"


# Real series of the corpus, copied under numbered names: (directory name, [(corpus path, name)])
CORPUS_SERIES = {
    "mysql80-gtid": [
        ("mysql-server-8.0.39/std_data/replicated-bin.000001", "replicated-bin.000001"),
        ("mysql-server-8.0.39/std_data/replicated-bin.000002", "replicated-bin.000002"),
    ],
    "sakila": [("osheroff-mysql-binlog-connector-java/mysql-bin.sakila", "mysql-bin.000001")],
    "checksum-none": [("osheroff-mysql-binlog-connector-java/mysql-bin.checksum-none", "mysql-bin.000001")],
    "canal": [
        ("alibaba-canal/parse/tsdb/mysql-bin.000002", "mysql-bin.000002"),
        ("alibaba-canal/parse/tsdb/mysql-bin.000003", "mysql-bin.000003"),
    ],
    "mariadb103": [("mariadb-server-10.3/std_data/rpl/master-bin-seq_10.3.36.000001", "master-bin.000001")],
}


def corpus_series(name: str, root: Path) -> Path:
    """A directory holding the corpus series ``name`` (skips when the corpus is absent)."""
    target = root / name
    if target.exists():
        return target
    sources = CORPUS_SERIES[name]
    if not all((CORPUS / src).exists() for src, _ in sources):
        pytest.skip(f"the binlog corpus is not at {CORPUS}")
    target.mkdir(parents=True)
    for src, dst in sources:
        shutil.copyfile(CORPUS / src, target / dst)
        (target / dst).chmod(0o644)
    return target


needs_mariadb_binlog = pytest.mark.skipif(
    shutil.which("mariadb-binlog") is None,
    reason="mariadb-binlog is not installed (apt-get install mariadb-client)",
)
