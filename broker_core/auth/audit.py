"""The auth audit log: one line per authentication and per authorization decision.

Why this module exists: operators grep these lines (seed 004 gives their exact form) to answer "who
was let in, and who was refused what". Lines go to their own rotating file, never through the root
logger, and never contain a password or secret key (only the request's signature, which is not a
secret).
"""

from __future__ import annotations

import itertools
import logging
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from broker_core.auth.model import Action, Decision, Resource, Subject

AUDIT_FILE_NAME = "auth_audit.log"
_instance_ids = itertools.count()
log = logging.getLogger("rmqops.auth")


@cache
def _audit_file_handler_class() -> type[logging.Handler]:
    """Built on first use: only an audit file needs the handlers module (and the socket, pickle it
    loads), and mqadmin's start-up time counts."""
    from logging.handlers import RotatingFileHandler

    class _AuditFileHandler(RotatingFileHandler):
        """The audit file's handler: a line that cannot be written (a full disk) is dropped and counted.

        Why: logging's default reaction printed "--- Logging error ---", a traceback and the whole line to
        stderr, for every request while the disk stayed full. As RocketMQ's logback appender, requests go
        on (auditing never refuses them); the broker's log says once that lines are being dropped, and
        again when the file takes lines again, with how many went missing in between."""

        def __init__(self, path: Path, max_bytes: int, backup_count: int) -> None:
            super().__init__(path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8")
            self.failing: str | None = None
            self.dropped = 0
            self._written = True

        def emit(self, record: logging.LogRecord) -> None:
            self._written = True
            if self.failing is not None and not self._end_cut_line():
                self.dropped += 1
                return
            super().emit(record)  # a failure lands in handleError
            if self._written and self.failing is not None:
                log.warning("audit log %s is written again; %d line(s) were dropped while it could not be (%s)",
                            self.baseFilename, self.dropped, self.failing)
                self.failing, self.dropped = None, 0

        def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
            self._written = False
            self.dropped += 1
            if self.failing is None:
                error = sys.exc_info()[1]
                self.failing = (getattr(error, "strerror", None) or str(error)) if error is not None else "unknown error"
                log.error("audit log %s cannot be written: %s; audit lines are dropped until it can",
                          self.baseFilename, self.failing)
            # Closed with what it buffered (dropped): kept, the next write would flush it after a line
            # written later, or fail again on it. The next line reopens the file.
            stream, self.stream = self.stream, None
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

        def _end_cut_line(self) -> bool:
            """After a failure the file may end inside a line (the part of it the disk took): end that
            line, so the next one starts on its own. False when even that cannot be written."""
            try:
                with open(self.baseFilename, "rb+") as f:
                    if f.seek(0, 2) and (f.seek(-1, 2), f.read(1))[1] != b"\n":
                        f.write(b"\n")
                return True
            except FileNotFoundError:
                return True
            except OSError:
                return False

    return _AuditFileHandler


# Control characters in what a caller sends (an AccessKey, a topic name) would end the line and start a
# forged one ("... User:rocketmq is authenticated success ..."): written escaped, one record a line.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]} | {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def _field(value: object) -> str:
    return str(value).translate(_CONTROL)


def authentication_line(username: str, signature: str | None, success: bool) -> str:
    outcome = "success" if success else "failed"
    return (f"[AUTHENTICATION] User:{_field(username)} is authenticated {outcome} "
            f"with Signature = {'null' if signature is None else _field(signature)}.")  # as Java prints null


def authorization_line(
    subject: Subject | None,
    decision: Decision,
    actions: Iterable[Action],
    source_ip: str | None,
    resource: Resource,
    request: str | None,
) -> str:
    subject_key = subject.key if subject else "User:null"
    action_text = ",".join(a.value for a in actions)
    return (
        f"[AUTHORIZATION] Subject = {_field(subject_key)} is {decision.value} Action = {action_text} "
        f"from sourceIp = {_field(source_ip)} on resource = {_field(resource.key)} for request = {_field(request)}."
    )


def mask_signature(signature: str | None) -> str:
    """Newer RocketMQ shows only the first and last 4 characters; optional here."""
    if not signature or len(signature) <= 8:
        return "****"
    return f"{signature[:4]}****{signature[-4:]}"


class AuditLog:
    """Writes audit lines to ``path`` (rotated by size); ``path=None`` keeps lines in memory only."""

    def __init__(
        self,
        path: Path | None,
        max_bytes: int = 100 * 1024 * 1024,
        backup_count: int = 10,
        mask_signatures: bool = False,
    ) -> None:
        self.path = path
        self.mask_signatures = mask_signatures
        self._logger = logging.getLogger(f"rmqops.auth.audit.{next(_instance_ids)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler: logging.Handler | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            handler = _audit_file_handler_class()(path, max_bytes, backup_count)  # type: ignore[call-arg]
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-5s %(message)s"))
            self._handler = handler
            self._logger.addHandler(handler)
        else:
            self._logger.addHandler(logging.NullHandler())

    def authentication(self, username: str | None, signature: str | None, success: bool) -> None:
        """Like RocketMQ, requests without a username leave no authentication line."""
        if not username:
            return
        shown = mask_signature(signature) if self.mask_signatures else signature
        self._logger.info(authentication_line(username, shown, success))

    def authorization(
        self,
        subject: Subject | None,
        decision: Decision,
        actions: Iterable[Action],
        source_ip: str | None,
        resource: Resource,
        request: str | None,
    ) -> None:
        self._logger.info(authorization_line(subject, decision, actions, source_ip, resource, request))

    def flush(self) -> None:
        if self._handler is not None:
            try:
                self._handler.flush()
            except OSError:  # a full disk: said once by the handler; what is buffered goes with a later line
                pass

    def close(self) -> None:
        if self._handler is not None:
            self._logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
