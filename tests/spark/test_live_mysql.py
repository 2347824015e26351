"""Issue #16's ``binlake sync mysql://…`` against MySQL itself (9.x, a private server): the
snapshot's position is read under a short global read lock there (MySQL has no
``binlog_snapshot_*`` status), the catalog's types are MySQL 8/9's, GTIDs are on and the handshake
is ``caching_sha2_password``. The same matrix scenario as on MariaDB (``test_live_matrix``): the
binlogs that wrote the existing rows purged, a workload during the snapshot (inserts, updates of
rows copied and not yet copied, deletes, a primary-key change, an ALTER ADD COLUMN), and after
``--available-now`` every table equals ``SELECT *``, and again after a second run continues from the
binlog (killing and restarting are the MariaDB matrix's: the code is the same)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.test_live_matrix import (
    Run,
    Workload,
    assert_delta_equals,
    load,
    snapshot_with_workload,
    url,
)

pytestmark = pytest.mark.slow

# MySQL has no sequence engine: the same rows from a recursive CTE
_SEQ = "WITH RECURSIVE s (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s WHERE seq < {n}) "
FILL = {
    "orders": _SEQ + "SELECT seq, seq / 4, CONCAT('o', seq) FROM s",
    "items": _SEQ + "SELECT seq DIV 2 + 1, seq % 2, CONCAT('sku', seq % 97), seq % 9 FROM s",
    "people": _SEQ
    + "SELECT seq, CONCAT('p', seq), TIMESTAMP('2020-01-01 00:00:00.125') + INTERVAL seq MINUTE FROM s",
}
DEPTH = "SET SESSION cte_max_recursion_depth = {n}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One private MySQL for the module (its binlogs are purged)."""
    from binlake.sandbox import PrivateMySQL, mysql_available, mysql_home

    if not mysql_available():
        pytest.skip(f"MySQL is not at {mysql_home()} (scripts/fetch-mysql; ./dev setup runs it)")
    with PrivateMySQL(tmp_path_factory.mktemp("mysql-live")) as db:
        yield db


def test_available_now_into_delta_during_a_workload_then_continued(server: Any, tmp_path: Path) -> None:
    load(server, "m", FILL, DEPTH)
    work, lake = Workload(server, "m", 5), tmp_path / "lake"
    run = Run(url(server, "m"), f"delta:{lake}", "--available-now")
    snapshot_with_workload(run, work)
    out = run.finish()
    assert "applied" in out
    assert_delta_equals(server, "m", lake)
    # more changes, then a second run continues from the binlog position the first one reached
    for _ in range(2):
        work.burst()
    again = Run(url(server, "m"), f"delta:{lake}", "--available-now")
    m = again.wait_for(r"in (\d+) chunks \((\d+) applied before\)")
    assert m[1] == m[2]  # the snapshot is complete: only the binlog is read
    again.finish()
    assert_delta_equals(server, "m", lake)
