"""The pipeline's entry points: the change log of a source, a batch of it planned once
(``binlake.spark.plan``) and applied by a sink (``binlake.spark.sinks``), exactly once, in one run or
micro-batch by micro-batch as the source grows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from binlake.spark import resume, trace
from binlake.spark.plan import Phase, SyncReport, adaptive_off, planned
from binlake.spark.sinks import Sink, sink_for

Target = Sink | Path | str  # a sink, a Delta directory, or a URL (delta:PATH, parquet:PATH, jdbc:…)


def as_sink(target: Target, *, password: str | None = None, chunk_rows: int = 50_000) -> Sink:
    """``target`` as a sink: a ``Path`` is a Delta directory, a string a ``--to`` URL (``sink_for``);
    a ``Sink`` is taken as it is (its own password and chunk size)."""
    if isinstance(target, Path):
        from binlake.spark.sinks.delta import DeltaSink

        return DeltaSink(target.absolute(), chunk_rows=chunk_rows)
    if isinstance(target, str):
        return sink_for(target, password=password, chunk_rows=chunk_rows)
    return target


# how a sync reads the change log (``arrowlog.changelog.Trim``): each layout's columns once per range
# and a ``layout`` number on every row, no before image of a keyed change (a sync finds it by its key),
# only the last change per key of each stretch of a range (``arrowlog.compact``): a kept batch of a
# wide table was mostly its columns, before images were a third of the rest, and most changes lose
SYNC_READ = {"columns": "first", "before": "keyless", "changes": "last"}


# ranges a sync's read is cut into per core (``sync_split``): enough to keep every core busy
# to the end, and no more: each range keeps about one change per key of the tables it touches
# (``arrowlog.compact`` rolls its windows over the whole range), and each kept row costs the JVM
RANGES_PER_CORE = 4
# and no range bigger than this: a session whose executors have not all registered yet counts few
# cores (``defaultParallelism`` is then at least 2), and a big series must still spread over them
MAX_SYNC_SPLIT = 256_000_000


def sync_options(
    options: dict[str, str] | None, spark: Any = None, source: str | None = None
) -> dict[str, str]:
    """A sync's read options: ``SYNC_READ`` unless ``options`` say otherwise; with ``spark`` and
    ``source``, ranges sized by ``sync_split`` unless ``options`` set ``splitSize``."""
    out = {**SYNC_READ, **(options or {})}
    if spark is not None and source is not None and not any(k.lower() == "splitsize" for k in out):
        split = sync_split(spark, source, out)
        if split is not None:
            out["splitSize"] = str(split)
    return out


def sync_split(spark: Any, source: str, options: dict[str, str]) -> int | None:
    """Bytes per range of a sync's read of ``source``: its bytes over ``RANGES_PER_CORE`` ranges per
    core of the session, between the source's default (``DEFAULT_SPLIT``) and ``MAX_SYNC_SPLIT``
    (a file smaller than that is one range whatever: ranges never span files). None: the default
    stands (a merged read of nodes, or the cores or files not known here)."""
    from binlake.errors import BinlogError
    from binlake.sizes import parse_size
    from binlake.spark.source import DEFAULT_SPLIT, resolve_files

    if any(k.lower() == "nodes" and str(v).lower() == "true" for k, v in options.items()):
        return None
    try:
        cores = int(spark.sparkContext.defaultParallelism)
        total = sum(os.path.getsize(f) for f in resolve_files(source))
    except (BinlogError, OSError, AttributeError, ValueError):
        return None  # the read itself says what is wrong with the source
    wanted = -(-total // (RANGES_PER_CORE * max(cores, 1)))
    return max(parse_size(DEFAULT_SPLIT), min(wanted, MAX_SYNC_SPLIT))


def change_log(spark: Any, source: str, options: dict[str, str] | None = None) -> Any:
    """The change log of every complete transaction of ``source`` (the ``binlog`` data source), its
    schema given here (``spark_ddl``, what the source's own ``schema()`` says): Spark asks a data
    source without one in a Python process of its own, started for that alone (1.5-2 s)."""
    from binlake.spark.changelog import spark_ddl
    from binlake.spark.source import driver_options

    options = options or {}
    schema = spark_ddl(driver_options(options))
    return spark.read.format("binlog").schema(schema).options(**options).load(source)


def apply_changes(
    df: Any,
    target: Target,
    *,
    source: str = "",
    chunk_rows: int = 50_000,
    on_phase: Phase = None,
    positioned: bool = True,
    password: str | None = None,
) -> SyncReport:
    """Apply a change-log DataFrame (a whole batch, or one streaming micro-batch) to ``target``
    exactly once. ``on_phase`` hears what it does now (for a progress display). ``positioned=False``:
    changes that are not a stretch of the binlog (a snapshot's chunks, each at its own position):
    applied under the order-key guard alone, no batch position recorded or compared."""
    sink = as_sink(target, password=password, chunk_rows=chunk_rows)
    if on_phase is not None:
        on_phase("reading the change log")
    with planned(df, source, positioned=positioned) as plan:
        return sink.apply(plan, on_phase)


def sync(
    spark: Any,
    source: str,
    target: Target,
    *,
    options: dict[str, str] | None = None,
    chunk_rows: int = 50_000,
    on_phase: Phase = None,
    password: str | None = None,
) -> SyncReport:
    """Apply every complete transaction of ``source`` to ``target``: those after the last batch
    sync of the same source and read into it, where it keeps a record of that (``resume``)."""
    sink = as_sink(target, password=password, chunk_rows=chunk_rows)
    read = resume.read_of(sink, spark, source, sync_options(options, spark, source))
    report = apply_changes(change_log(spark, source, read.options), sink, source=source, on_phase=on_phase)
    report.resumed = read.note
    resume.record_of(sink, spark, source, read.options, report)
    return report


def stream_changes(
    spark: Any,
    source: str,
    checkpoint: str | Path,
    apply: Callable[[Any], SyncReport],
    *,
    available_now: bool = True,
    interval: str = "2 seconds",
    options: dict[str, str] | None = None,
) -> Any:
    """Follow ``source`` and hand each micro-batch's change log to ``apply`` (a sink's exactly-once
    apply: it commits the batch position with the data; Spark's checkpoint holds the offsets).
    ``available_now``: process what is there and stop; else keep following every ``interval``.
    The query's ``reports`` lists what each batch did."""
    reports: list[SyncReport] = []

    def each(batch: Any, batch_id: int) -> None:
        # a micro-batch is planned without adaptive execution: it would run each stage of a plan as
        # a Spark job of its own (a small batch: 9 jobs instead of 4) to re-plan between them, and
        # the plan sizes a small batch's sort itself (``plan.sort_partitions``)
        with adaptive_off(batch.sparkSession), trace.batch(spark, batch_id):
            reports.append(apply(batch))

    trace.watch_progress(spark)
    writer = (
        spark.readStream.format("binlog")
        .options(**sync_options(options))
        .load(source)
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=interval)
    query = writer.start()
    if available_now:
        query.awaitTermination()
    query.reports = reports
    return query


def stream_to(
    spark: Any,
    source: str,
    target: Target,
    checkpoint: str | Path,
    *,
    available_now: bool = True,
    interval: str = "2 seconds",
    options: dict[str, str] | None = None,
    password: str | None = None,
) -> Any:
    """``stream_changes`` into ``target``."""
    sink = as_sink(target, password=password)
    return stream_changes(
        spark,
        source,
        checkpoint,
        lambda batch: apply_changes(batch, sink, source=source),
        available_now=available_now,
        interval=interval,
        options=options,
    )
