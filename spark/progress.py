"""Progress of a rebuild, fed by Spark's status tracker; a rich progress bar as one consumer.

Why a poller: PySpark has no task-completion callbacks on the Python side, but the status tracker
reports completed/total tasks per stage of a job group. Each phase of a rebuild runs in its own job
group, and a daemon thread turns those counts into ``callback(phase, done, total)`` calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ProgressCallback = Callable[[str, int, int], None]


class StatusPoller:
    """Polls ``sc.statusTracker()`` for the current job group and reports task counts."""

    def __init__(self, sc, callback: ProgressCallback | None, interval: float = 0.25) -> None:
        self.sc = sc
        self.callback = callback
        self.interval = interval
        self.phase = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set_phase(self, phase: str) -> None:
        """Start a new phase: subsequent Spark jobs run in the job group named ``phase``."""
        self.report()
        self.phase = phase
        if phase:
            self.sc.setJobGroup(phase, phase)
        if self.callback is not None and phase:
            self.callback(phase, 0, 0)

    def counts(self) -> tuple[int, int]:
        tracker = self.sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self.phase):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        return done, total

    def report(self) -> None:
        if self.callback is None or not self.phase:
            return
        try:
            done, total = self.counts()
        except Exception:  # the context may be stopping; progress is best-effort
            return
        self.callback(self.phase, done, total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.report()

    def __enter__(self) -> StatusPoller:
        if self.callback is not None:
            self._thread = threading.Thread(target=self._run, name="rmqops-spark-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.report()


@contextmanager
def rich_progress(console=None) -> Iterator[ProgressCallback]:
    """A rich progress bar with one task line per phase; yields the callback for ``run_rebuild``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False)
    tasks: dict[str, int] = {}
    lock = threading.Lock()

    def callback(phase: str, done: int, total: int) -> None:
        with lock:
            tid = tasks.get(phase)
            if tid is None:
                for other in tasks.values():
                    t = progress.tasks[other]
                    if t.total:
                        progress.update(other, completed=t.total)
                tid = tasks[phase] = progress.add_task(phase, total=None)
            if total:
                progress.update(tid, completed=done, total=total)

    with progress:
        yield callback
