"""A SparkSession set up the way binlake needs it (local by default, the same code on a cluster)."""

from __future__ import annotations

import os
import sys
from typing import Any

# JDBC drivers from Debian packages (libpostgresql-jdbc-java, libmariadb-java): on the classpath when present
JDBC_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/mariadb-java-client.jar")


def spark_session(master: str = "local[*]", app: str = "binlake") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need pyarrow: use this interpreter
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if os.path.isdir("/usr/lib/jvm/java-17-openjdk-amd64") and "JAVA_HOME" not in os.environ:
        os.environ["JAVA_HOME"] = "/usr/lib/jvm/java-17-openjdk-amd64"
    from pyspark.sql import SparkSession

    from binlake.spark.source import register

    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        # many shuffle partitions so a big batch sorts in small pieces; adaptive execution coalesces
        # them again when the batch is small
        .config("spark.sql.shuffle.partitions", "64")
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
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
