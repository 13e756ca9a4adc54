"""The auth audit log: one line per authentication and per authorization decision.

Why this module exists: operators grep these lines (seed 004 gives their exact form) to answer "who
was let in, and who was refused what". Lines go to their own rotating file, never through the root
logger, and never contain a password or secret key (only the request's signature, which is not a
secret).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from pathlib import Path

from broker_core.auth.model import Action, Decision, Resource, Subject

AUDIT_FILE_NAME = "auth_audit.log"
_instance_ids = itertools.count()


def authentication_line(username: str, signature: str | None, success: bool) -> str:
    outcome = "success" if success else "failed"
    return f"[AUTHENTICATION] User:{username} is authenticated {outcome} with Signature = {signature}."


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
        f"[AUTHORIZATION] Subject = {subject_key} is {decision.value} Action = {action_text} "
        f"from sourceIp = {source_ip} on resource = {resource.key} for request = {request}."
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
            # only an audit file needs the handlers module (and the socket, pickle it loads)
            from logging.handlers import RotatingFileHandler

            path.parent.mkdir(parents=True, exist_ok=True)
            handler = RotatingFileHandler(
                path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8"
            )
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
            self._handler.flush()

    def close(self) -> None:
        if self._handler is not None:
            self._logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
