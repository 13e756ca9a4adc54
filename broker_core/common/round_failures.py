"""A background round's failure in the log: once, then again only after a quiet minute or a change.

Why: a flush thread on a full disk fails the same write every round (every 5 s for consumer offsets),
and a traceback each time buried everything else in the broker's log. An OSError (a full disk, a
config file that cannot be written) is an operating condition, logged as one line naming the file,
also when a layer translated it into its own error (``raise BrokerSystemError(...) from e``: a pop
revive round that cannot write topics.json); anything else is a bug and keeps its traceback.
Recovery is logged too, so the log says when the condition ended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RoundFailures:
    """What one background round (``what``) last failed with; ``every_s`` between two equal lines."""

    def __init__(self, log: logging.Logger, what: str, every_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.what = what
        self.every_s = every_s
        self.clock = clock
        self._last: str | None = None
        self._logged_at = 0.0
        self._repeats = 0

    def failed(self, exc: BaseException) -> None:
        text = str(exc) or type(exc).__name__
        if self._quiet(text):
            return
        if is_operating_condition(exc):
            self.log.error("%s failed: %s%s", self.what, text, self._again())
        else:
            self.log.exception("%s failed%s", self.what, self._again())
        self._reported(text)

    def failed_with(self, text: str) -> None:
        """A failure the round learns as an answer, not an exception (a put refused on a full disk)."""
        if self._quiet(text):
            return
        self.log.error("%s failed: %s%s", self.what, text, self._again())
        self._reported(text)

    def _quiet(self, text: str) -> bool:
        if text == self._last and self.clock() - self._logged_at < self.every_s:
            self._repeats += 1
            return True
        return False

    def _again(self) -> str:
        return f" (failed {self._repeats} more time(s) since the last report)" if self._repeats else ""

    def _reported(self, text: str) -> None:
        self._last, self._logged_at, self._repeats = text, self.clock(), 0

    def succeeded(self) -> None:
        if self._last is not None:
            self.log.warning("%s works again (it had failed: %s)", self.what, self._last)
            self._last, self._repeats = None, 0


def is_operating_condition(exc: BaseException) -> bool:
    """Whether ``exc`` is an OSError, or was raised explicitly ``from`` one (its ``__cause__`` chain).

    Why the explicit cause only: a layer that turns a failed write into its own error (the broker's
    BrokerSystemError naming the config file and what did not happen) says so with ``from``; an error
    raised while handling an OSError without ``from`` (its ``__context__``) is a bug in the handler,
    and keeps its traceback.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, OSError):
            return True
        seen.add(id(cur))
        cur = cur.__cause__
    return False
