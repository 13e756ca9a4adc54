"""Ctrl-C (SIGINT) while a Spark job runs, without tracebacks.

Why: PySpark's own SIGINT handler calls into the JVM from inside the Py4J call the main thread is
blocked in (a ``collect``), and Py4J logs a traceback for that reentrant call, for the interrupted
read and for the connection it drops; the JVM then logs the tasks that a stopping context rejects.
The guard records the interrupt instead, cancels the running jobs from another thread (so the
blocked call returns with an error), and the driver stops at its next safe point (``check``), where
it knows what it has written. A second Ctrl-C interrupts at once, as Python would.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class InterruptGuard:
    """Context manager: while active (main thread only), SIGINT sets ``requested`` and cancels the jobs
    of the attached SparkContext instead of raising KeyboardInterrupt wherever the main thread is."""

    def __init__(self) -> None:
        self.requested = False
        self.sc = None
        self._previous: object = None
        self._installed = False

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._installed = False

    def attach(self, sc) -> None:
        """Jobs of ``sc`` are cancelled on SIGINT (also the ones running already)."""
        self.sc = sc
        if self.requested:
            self._cancel_soon()

    def is_requested(self) -> bool:
        return self.requested

    def check(self) -> None:
        """A safe point: KeyboardInterrupt when SIGINT came."""
        if self.requested:
            raise KeyboardInterrupt

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt  # a second Ctrl-C: now
        self.requested = True
        self._cancel_soon()

    def _cancel_soon(self) -> None:
        sc = self.sc
        if sc is not None:
            # Not from the handler itself: the main thread may be inside a Py4J call right now.
            threading.Thread(target=_cancel_all_jobs, args=(sc,), name="rmqops-spark-cancel", daemon=True).start()


def _cancel_all_jobs(sc) -> None:
    try:
        sc.cancelAllJobs()
    except Exception:  # noqa: BLE001 - the context may be stopping already
        pass
