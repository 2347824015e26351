"""Shared fixtures: the real binlog corpus beside the project, and a private MariaDB server."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# test batches are small: a task per shuffle partition is the cost there, not the sort (CLI runs in
# subprocesses inherit it)
os.environ.setdefault("BINLAKE_SHUFFLE_PARTITIONS", "4")

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "binlogs"


def corpus_index() -> dict[str, Any]:
    index = CORPUS / "index.json"
    if not index.exists():
        return {"records": [], "companions": []}
    return json.loads(index.read_text())


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not (CORPUS / "index.json").exists():
        pytest.skip(f"real binlog corpus not found at {CORPUS} (../shared/binlogs beside the project)")
    return CORPUS


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One private MariaDB server for the whole session (binlog_row_metadata=FULL)."""
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available() or shutil.which("mariadb-install-db") is None:
        pytest.skip("mariadbd is not installed (apt-get install mariadb-server; .ci/run does it)")
    db = PrivateMariaDB(tmp_path_factory.mktemp("mariadb"))
    db.start()
    yield db
    db.stop()


@pytest.fixture(scope="session")
def mysql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One private MySQL server (9.x) for the whole session: GTIDs on, binlog_row_metadata=FULL."""
    from binlake.sandbox import PrivateMySQL, mysql_available, mysql_home

    if not mysql_available():
        pytest.skip(f"MySQL is not at {mysql_home()} (scripts/fetch-mysql; ./dev setup runs it)")
    db = PrivateMySQL(tmp_path_factory.mktemp("mysql"))
    db.start()
    yield db
    db.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole run (start-up costs seconds)."""
    if shutil.which("java") is None and not Path("/usr/lib/jvm/java-17-openjdk-amd64").exists():
        pytest.skip("Java 17 is needed for Spark")
    from binlake.spark.session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """One private PostgreSQL for the session (the JDBC sink's target)."""
    from binlake.sandbox import PrivatePostgres, postgres_bin

    if postgres_bin() is None or not os.path.exists("/usr/share/java/postgresql.jar"):
        pytest.skip("PostgreSQL or its JDBC driver is not installed (./dev setup installs both)")
    with PrivatePostgres() as pg:
        yield pg


@pytest.fixture(scope="session")
def sink_mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A second private MariaDB as a sink (its own server_id, kept apart from the one whose
    binlogs tests read); ``url`` names its database ``lake``, the only one its user may write."""
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available() or not os.path.exists("/usr/share/java/mariadb-java-client.jar"):
        pytest.skip("MariaDB or its JDBC driver is not installed (./dev setup installs both)")
    with PrivateMariaDB(tmp_path_factory.mktemp("sink"), server_id="2") as db:
        db.execute(
            "CREATE USER 'binlake'@'127.0.0.1'",
            "CREATE DATABASE lake",
            "GRANT ALL ON lake.* TO 'binlake'@'127.0.0.1'",  # the sink needs nothing outside its database
        )
        db.url = f"jdbc:mariadb://127.0.0.1:{db.port}/lake?user=binlake"  # type: ignore[attr-defined]
        yield db


@pytest.fixture
def own_mariadb(tmp_path: Path) -> Iterator[Any]:
    """A private MariaDB for one test (one that purges binlogs or restarts: not the shared one)."""
    from binlake.sandbox import PrivateMariaDB, mariadb_available

    if not mariadb_available():
        pytest.skip("mariadbd is not installed (./dev setup installs it)")
    with PrivateMariaDB(tmp_path / "own-mariadb") as db:
        yield db


def select_all(db: Any, database: str, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``database.table``, sorted (names quoted: any name)."""
    conn = db.connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table.replace('`', '``')}`")
            return sorted(cur.fetchall())
    finally:
        conn.close()
