"""The session binlake makes is set for wide tables: a sink's plan over a table of hundreds of
columns (an expression or two per column) must not spend minutes on the driver before its job.

Measured with a 520-column table, one MINIMAL update synced into MariaDB (session 32): 97 s with
Spark's defaults, 43 s with both settings below. Spark's constraint propagation compares every
alias of a wide projection with every other (``ExpressionSet``); PySpark's DataFrame debugging
makes each column expression four round trips to the JVM instead of one, to record its call site."""

from __future__ import annotations

from typing import Any

import pytest


def test_constraints_are_not_propagated(spark: Any) -> None:
    """A filter on one side of a join is not copied to the other: the inference that does it is
    what makes wide projections slow to optimize."""
    a = spark.range(10).withColumnRenamed("id", "k")
    b = spark.range(10).withColumnRenamed("id", "k")
    plan = a.where("k > 3").join(b, "k")._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("Filter") == 1, plan


def test_column_expressions_record_no_call_site(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.errors import utils

    # PySpark reads the setting once per process and keeps it: what an earlier test (in this
    # worker) cached, without a session or in a thread without one, says False whatever it is
    monkeypatch.setattr(utils, "_enable_debugging_cache", None)
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not utils.is_debugging_enabled()
