"""A progress bar for long syncs, in place of Spark's console bar: what the sink is doing (reading,
merging which table) and how far Spark's running stages are (tasks done of total), with elapsed time.

Spark reports progress per task, and the change log's tasks are binlog ranges, so tasks done of the
reading stage is the share of the source read; the bytes shown are that share of the source's size.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn


class SyncProgress:
    """Use as a context manager; ``phase(text)`` says what the sink does now."""

    def __init__(
        self, spark: Any, total_bytes: int, console: Console | None = None, every: float = 0.3
    ) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.total_bytes = total_bytes
        self.every = every
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("starting", total=None, detail="")
        self.tasks_done = 0  # completed Spark tasks seen, over the whole run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def phase(self, text: str) -> None:
        self.progress.update(self.task, description=text)

    def poll_once(self) -> tuple[int, int]:
        """Tasks done and total over the stages running now."""
        done = total = 0
        for sid in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        if total:
            self.tasks_done = max(self.tasks_done, done)
            share = done / total
            self.progress.update(
                self.task,
                total=total,
                completed=done,
                detail=f"Spark tasks {done}/{total}, ~{share * self.total_bytes / 1e6:,.1f} of "
                f"{self.total_bytes / 1e6:,.1f} MB",
            )
        return done, total

    def _poll(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.poll_once()
            except Exception:  # the JVM going away at shutdown must not kill the sync
                return

    def __enter__(self) -> SyncProgress:
        self.progress.start()
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if exc_type is None:
            detail = f"{self.total_bytes / 1e6:,.1f} MB of binlogs"
            self.progress.update(self.task, description="done", total=1, completed=1, detail=detail)
        else:
            self.phase("failed")
        self.progress.stop()
