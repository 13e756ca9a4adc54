"""A warning when the process's open files near RLIMIT_NOFILE: new connections are then refused unseen.

Why: at the limit uvloop (libuv's EMFILE trick) accepts each new connection and closes it at once, and
nothing is logged, so a broker run with ``ulimit -n 128`` dropped every new client with no trace of
why. Apache's Netty logs the accept failure. Here the check is cheap: the accepted socket's descriptor
number says how close the process is (Linux hands out the lowest free one), and only a number near
the limit, or the server's periodic look, counts ``/proc/self/fd``. One warning a minute at most.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import time

log = logging.getLogger("rmqops.net")

WARN_INTERVAL_S = 60.0
"""At most one warning in this many seconds (every refused client would otherwise log one)."""
CHECK_INTERVAL_S = 5.0
"""How often a server looks without an accept (at the limit no connection is made to look on)."""


def headroom(soft_limit: int) -> int:
    """Descriptors left below the limit at which the warning starts: 1/32 of it, at least 8."""
    return max(8, soft_limit // 32)


def soft_limit() -> int | None:
    """RLIMIT_NOFILE's soft limit now (``prlimit`` may change it while the process runs); None if unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def open_files(limit: int) -> int | None:
    """Descriptors open in this process; ``limit`` when even the count cannot open one; None off Linux."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself held
    except OSError as e:
        if e.errno in (errno.EMFILE, errno.ENFILE):
            return limit
        return None


class FdLimitWatch:
    """Shared by the servers of one process (name server, broker) so one shortage logs once."""

    def __init__(self) -> None:
        # per state (near the limit, at it): a "near" warning does not hide the "refused" one after it
        self._last_warning = {False: -WARN_INTERVAL_S, True: -WARN_INTERVAL_S}

    def accepted(self, fd: int) -> None:
        """A connection was accepted on descriptor ``fd``: look closer only when ``fd`` is near the limit."""
        limit = soft_limit()
        if limit is not None and fd >= limit - headroom(limit):
            self.check(limit)

    def check(self, limit: int | None = None) -> None:
        """Count the open files and warn (rate-limited) when they are within ``headroom`` of the limit."""
        limit = soft_limit() if limit is None else limit
        if limit is None:
            return
        now = time.monotonic()
        if min(self._last_warning.values()) > now - WARN_INTERVAL_S:
            return  # both warned lately: not even a count
        count = open_files(limit)
        if count is None or count < limit - headroom(limit):
            return
        at_limit = count >= limit - 1
        if now - self._last_warning[at_limit] < WARN_INTERVAL_S:
            return
        self._last_warning[at_limit] = now
        if at_limit:
            state = "new connections are being refused"
        else:
            state = f"new connections will be refused at the limit ({limit - count} left)"
        log.warning("open files %d of %d (RLIMIT_NOFILE): %s; raise ulimit -n", count, limit, state)


WATCH = FdLimitWatch()
"""The process's one watch (module state: the servers in one process share the descriptor table)."""
