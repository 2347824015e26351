"""A SparkSession set up the way binlake needs it (local by default, the same code on a cluster).

On a cluster (any master but ``local``/``local[N]``) the executors must import binlake to run the
``binlog`` data source: the driver zips the very ``binlake`` package it imported (a dev checkout
ships itself, not whatever is installed on the workers) and adds it with ``addPyFile``. Its
dependencies (pyarrow, zstandard, sqlglot, …) are not shipped: every host runs the same Python
environment (``PYSPARK_PYTHON``), or a packed one via ``spark.archives`` (see the README).
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# JDBC drivers from Debian packages (libpostgresql-jdbc-java, libmariadb-java): on the classpath when present
JDBC_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")

LOOPBACK = ("localhost", "::1")


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: driver and executors are one process,
    so nothing needs shipping. ``local-cluster[…]`` starts separate executor JVMs: it is a cluster."""
    return master == "local" or master.startswith("local[")


def on_loopback(master: str) -> bool:
    """Whether every host of a ``spark://`` (or other URL) master is this machine's loopback: a
    cluster confined to this host, where binding the driver to 127.0.0.1 is right."""
    urls = master.partition("://")[2].split(",")
    hosts = [h for h in (urlsplit(f"//{u}").hostname for u in urls if u) if h]
    return bool(hosts) and all(h in LOOPBACK or h.startswith("127.") for h in hosts)


def set_up_environment(master: str) -> None:
    """Environment the JVM and Python workers start with; whatever the caller set wins.

    ``SPARK_LOCAL_IP=127.0.0.1`` only for a local master or one on loopback: with a remote master
    the driver must listen on an address the executors on other hosts can reach (Spark picks the
    host's own; set ``SPARK_LOCAL_IP`` or ``BINLAKE_DRIVER_HOST`` to choose another)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need pyarrow: use this interpreter
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if is_local(master) or on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if os.path.isdir("/usr/lib/jvm/java-17-openjdk-amd64") and "JAVA_HOME" not in os.environ:
        os.environ["JAVA_HOME"] = "/usr/lib/jvm/java-17-openjdk-amd64"


@functools.cache
def package_zip() -> str:
    """A zip of the ``binlake`` package this driver imported (built once per process, into a
    private temporary directory, so each session ships exactly the driver's code)."""
    import binlake

    package = Path(binlake.__file__).resolve().parent
    out = Path(tempfile.mkdtemp(prefix="binlake-pyfiles-")) / "binlake.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(package.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
                zf.write(f, f.relative_to(package.parent).as_posix())
    return str(out)


# Spark's own log, as the command line sets it: a failure Spark logs (an executor's task, the
# job it aborts: the Python traceback and the Java stack) also reaches the command as an exception,
# which it says in one line (``cli.common.run``); the log would print it again, whole, before that
CLI_LOG_LEVEL = "OFF"


def spark_session(master: str = "local[*]", app: str = "binlake", log_level: str = "ERROR") -> Any:
    """The session with the ``binlog`` data source registered; on a cluster master, binlake itself
    shipped to the executors (they import ``binlake.spark.source`` to run the data source).
    ``log_level``: Spark's own log's (``CLI_LOG_LEVEL`` from the command line)."""
    set_up_environment(master)
    from pyspark.sql import SparkSession

    from binlake.spark.source import register

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        # many shuffle partitions so a big batch sorts in small pieces; adaptive execution coalesces
        # them again when the batch is small (BINLAKE_SHUFFLE_PARTITIONS: fewer, for small batches
        # where each task's start-up is the cost: the tests, low-latency streaming)
        .config("spark.sql.shuffle.partitions", str(int(os.environ.get("BINLAKE_SHUFFLE_PARTITIONS", "64"))))
        .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.jars", ",".join(j for j in JDBC_JARS if os.path.exists(j)))
        # the change log is cached while a sink runs several actions over it; its rows carry whole
        # row images as JSON, so cached column batches are kept small (the default 10,000 rows of
        # a 32 MB binlog range grow buffers past a 1 GB heap)
        .config("spark.sql.inMemoryColumnarStorage.batchSize", "1000")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.driver.memory", os.environ.get("BINLAKE_DRIVER_MEMORY", "2g"))
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .config("spark.sql.constraintPropagation.enabled", "false")
    )
    if os.environ.get("BINLAKE_DRIVER_HOST"):  # the address executors reach the driver at
        builder = builder.config("spark.driver.host", os.environ["BINLAKE_DRIVER_HOST"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if not is_local(master):
        spark.sparkContext.addPyFile(package_zip())
    register(spark)
    return spark
