"""The playbook runner's failure vocabulary.

Why a module: validation errors must name the file and line (exit 2, nothing run), while a step that
fails at run time is an ordinary outcome recorded in the report (exit 1). Keeping the two apart lets
the CLI map them to exit codes without guessing.
"""

from __future__ import annotations


class PlaybookError(Exception):
    """The playbook is invalid (schema, types, templates, unknown names): one line with file:line."""

    def __init__(self, message: str, line: int | None = None, source: str | None = None) -> None:
        self.message = message
        self.line = line
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        # An error of the command line (-e, --limit) has no file: the CLI's own prefix says enough
        # ("mqadmin playbook: -e ..."), a placeholder "playbook:" would only double it.
        if self.source is None and self.line is None:
            return self.message
        where = self.source or "playbook"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}"


class StepError(Exception):
    """An action could not do its work; the message is what the report shows for the step."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TransportError(StepError):
    """The target could not be reached or refused us (SSH connect, auth, host key)."""
