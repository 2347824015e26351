"""Where a streaming micro-batch's time goes, for ``benchmarks/lag.py``: with ``$BINLAKE_TRACE`` set
to a file, each micro-batch appends one JSON line — its named steps (``span``) with their wall
times, and every Spark job it ran with the step that ran it, from Spark's own status store — and
Spark's progress of each trigger (offsets, planning, the batch, the checkpoint's commits) one more.

Off (the variable unset) every ``span`` is a bare ``yield``: nothing is timed or written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

TRACE_ENV = "BINLAKE_TRACE"


class _Batch:
    """One micro-batch being traced: its steps, and the job group its Spark jobs run in."""

    def __init__(self, spark: Any, batch_id: int) -> None:
        self.spark, self.id = spark, batch_id
        self.group = f"binlake-batch-{batch_id}-{time.time_ns()}"
        self.start = time.time()
        self.spans: list[list[Any]] = []

    def record(self, name: str, start: float, seconds: float) -> None:
        self.spans.append([name, round(start - self.start, 4), round(seconds, 4)])

    def jobs(self) -> list[list[Any]]:
        """Every Spark job of the batch: its step, start (from the batch's start), seconds, tasks."""
        sc = self.spark.sparkContext
        store = sc._jsc.sc().statusStore()
        out = []
        for i in sorted(sc.statusTracker().getJobIdsForGroup(self.group)):
            j = store.job(i)
            sub, end = j.submissionTime(), j.completionTime()
            if not (sub.isDefined() and end.isDefined()):
                continue
            t0, t1 = sub.get().getTime() / 1000, end.get().getTime() / 1000
            desc = j.description()
            run, cpu = _stage_times(store, j.stageIds())
            out.append(
                [desc.get() if desc.isDefined() else j.name(), round(t0 - self.start, 4), round(t1 - t0, 4),
                 j.numTasks(), run, cpu]
            )  # fmt: skip
        return out


def _stage_times(store: Any, stages: Any) -> tuple[float, float]:
    """The seconds a job's tasks ran in the executors, and of it on a CPU (stages it skipped: none)."""
    run = cpu = 0.0
    for k in range(stages.size()):
        try:
            s = store.lastStageAttempt(stages.apply(k))
        except Exception:  # a stage the job skipped (its output was there)
            continue
        run += s.executorRunTime() / 1000
        cpu += s.executorCpuTime() / 1e9
    return round(run, 4), round(cpu, 4)


_lock = threading.Lock()
_current: _Batch | None = None


def _write(record: dict[str, Any]) -> None:
    path = os.environ.get(TRACE_ENV)
    if path:
        with _lock, open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def enabled() -> bool:
    return bool(os.environ.get(TRACE_ENV))


def watch_progress(spark: Any) -> None:
    """Write Spark's progress of every trigger of the session's streaming queries (when tracing)."""
    if not enabled():
        return
    from pyspark.sql.streaming import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            p = event.progress
            _write({"progress": p.batchId, "timestamp": p.timestamp, "rows": p.numInputRows,
                    "durationMs": dict(p.durationMs)})  # fmt: skip

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    spark.streams.addListener(Progress())


@contextmanager
def batch(spark: Any, batch_id: int) -> Iterator[None]:
    """Trace micro-batch ``batch_id`` (its Spark jobs run in a job group of their own)."""
    global _current
    if not enabled():
        yield
        return
    b = _Batch(spark, batch_id)
    sc = spark.sparkContext
    sc.setJobGroup(b.group, f"batch {batch_id}")
    _current = b
    error = None
    try:
        yield
    except BaseException as e:
        error = repr(e)
        raise
    finally:
        _current = None
        wall = time.time() - b.start
        sc.setJobDescription(None)
        _write({"batch": batch_id, "start": b.start, "wall": round(wall, 4), "spans": b.spans,
                "jobs": b.jobs(), "error": error})  # fmt: skip


@contextmanager
def span(name: str) -> Iterator[None]:
    """A named step of the current micro-batch: its wall time, and the Spark jobs it starts."""
    b = _current
    if b is None:
        yield
        return
    sc = b.spark.sparkContext
    outer = sc.getLocalProperty("spark.job.description")
    sc.setJobDescription(name)
    t0 = time.time()
    try:
        yield
    finally:
        b.record(name, t0, time.time() - t0)
        sc.setJobDescription(outer)
