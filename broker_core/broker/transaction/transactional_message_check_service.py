"""The periodic side of transactions: check-back scans, op-marker batches, metric and offset persistence.

Why one service: RocketMQ runs TransactionalMessageCheckService (every transactionCheckInterval),
TransactionalOpBatchService (every transactionOpBatchInterval or when a batch fills) and
TransactionMetricsFlushService (every transactionMetricFlushInterval) as three threads. They all just
wait for a time and call into TransactionalMessageService, so one ``tick(now)`` decides which are due
(deterministic under a fake clock) and one thread calls it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker_core.broker.transaction.transactional_message_service import (
    CheckReport,
    TransactionalMessageService,
)
from broker_core.common.round_failures import RoundFailures

log = logging.getLogger("rmqops.transaction")

POLL_INTERVAL_MS = 100


class TransactionalMessageCheckService:
    def __init__(self, service: TransactionalMessageService, clock: Callable[[], int] | None = None,
                 poll_interval_ms: int = POLL_INTERVAL_MS) -> None:
        self.service = service
        self.clock = clock or service.clock
        self.poll_interval_ms = poll_interval_ms
        now = self.clock()
        self._last_check = now
        self._last_metrics_flush = now
        self.last_report: CheckReport | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        service.op_batch_wakeup = self._wake.set

    def tick(self, now: int | None = None) -> CheckReport | None:
        """Run whatever is due at ``now``; the check report when a check ran."""
        now = self.clock() if now is None else now
        svc = self.service
        cfg = svc.config
        svc.batch_send_op_message(now)
        report = None
        if now - self._last_check >= cfg.transaction_check_interval:
            self._last_check = now
            report = self.last_report = svc.check(now)
        if now - self._last_metrics_flush >= cfg.transaction_metric_flush_interval:
            self._last_metrics_flush = now
            svc.persist()
        return report

    def start(self) -> TransactionalMessageCheckService:
        if self._thread is None:
            self.service.load()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="TransactionalMessageCheckService",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        failures = RoundFailures(log, "transaction service tick")
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as e:
                failures.failed(e)
            else:
                failures.succeeded()
            self._wake.wait(self.poll_interval_ms / 1000)
            self._wake.clear()

    def shutdown(self) -> None:
        """Stop the thread, write queued op markers, persist offsets and metrics."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.service.close()
