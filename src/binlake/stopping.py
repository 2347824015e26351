"""Stopping a command that follows a source forever (``sync --stream``, ``mirror``) when asked —
Ctrl-C, or SIGTERM from a service manager — so it ends with its summary, not a traceback."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_flag(*signals: signal.Signals) -> Iterator[threading.Event]:
    """An Event that ``signals`` set, instead of an exception in the main thread. For a Spark driver:
    pyspark's own Ctrl-C handler raises in the middle of a py4j call, which breaks the connection
    and logs two tracebacks; a flag lets the wait loop stop the query between calls. The previous
    handlers come back on exit."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    with _handlers(signals or STOP_SIGNALS, handler):
        yield stop


@contextmanager
def interrupt_on(*signals: signal.Signals) -> Iterator[None]:
    """``signals`` raise KeyboardInterrupt in the main thread, as Ctrl-C does: a blocking read (a
    replica waiting for the server) ends at once and the command's Ctrl-C path runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    with _handlers(signals, handler):
        yield


@contextmanager
def _handlers(signals: tuple[signal.Signals, ...], handler: signal._HANDLER) -> Iterator[None]:
    """``handler`` for ``signals`` for the duration, then the previous handlers again."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; a caller on another thread stops its own way
        return
    before = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in before.items():
            signal.signal(s, old)
