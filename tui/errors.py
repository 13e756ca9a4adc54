"""How a failed Admin call reads on screen, and which failures mean the broker is gone.

Why a module: the snapshot (a part of one refresh that cannot be read), the poller (a refresh or a
one-off question that failed) and the screens all show the same one line, as mqadmin prints it: what
failed and the file or address involved, never a Python class name or a stack trace.
"""

from __future__ import annotations

from mqadmin.errors import AdminError


class CallTimeout(AdminError):
    """An Admin call that did not answer in time: the session is dropped and the refresh fails."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} did not answer within {seconds:g} s")


def describe_error(e: BaseException) -> str:
    """One line for an operator: the error's own message (Admin and auth errors carry one; a damaged
    config file's names the file), an OS error's file and reason, else mqadmin's 'unexpected failure'."""
    message = getattr(e, "message", None)
    if isinstance(message, str) and message:
        text = message
    elif isinstance(e, OSError) and e.strerror:
        text = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    else:
        from broker_core.store.config_file import ConfigFileError

        text = str(e) if isinstance(e, ConfigFileError) else f"unexpected failure: {str(e) or type(e).__name__}"
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
