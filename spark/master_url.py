"""Check a Spark master URL before a SparkSession is built for it.

Why: a mistyped or unreachable master makes Spark spend ~90 s retrying and print a multi-KB Java
stack trace plus pages of log; a URL Spark does not know prints a Java trace too. The operator needs
one line, at once: what is wrong with the URL, or that nothing answers at host:port.
"""

from __future__ import annotations

import re
import socket

CONNECT_TIMEOUT_S = 3.0

_LOCAL = re.compile(r"local(\[(\*|\d+)(,\s*\d+)?\])?")
# Exit statuses of the spark-submit front ends, as mqadmin's: a failure, a usage error.
EXIT_FAILURE, EXIT_USAGE = 1, 2
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


class MasterUrlError(ValueError):
    """The master URL is malformed, of a kind rmqops does not run on, or nothing answers there."""


class MasterUrlUsageError(MasterUrlError):
    """The URL itself is wrong (no port, ``local[x]``, ``yarn``): a usage error (exit 2), not a failure."""


def parse_master(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` addresses of a ``spark://`` URL ([] for a local master); MasterUrlUsageError
    for anything else."""
    url = master.strip()
    local = _LOCAL.fullmatch(url)
    if local:
        if local.group(2) is not None and local.group(2) != "*" and int(local.group(2)) < 1:
            # Spark refuses it only once the session starts ("Asked to run locally with 0 threads"), and
            # that reaches Python as "An error occurred while calling None...".
            raise MasterUrlUsageError(f"bad Spark master {master!r}: the thread count of local[N] must be >= 1 "
                                      f"(or * for one per core)")
        return []
    if not url.startswith("spark://"):
        raise MasterUrlUsageError(f"unsupported Spark master {master!r}: use local[*], local[N] or spark://host:port")
    addrs = []
    for h in url[len("spark://"):].split(","):
        m = _HOST_PORT.fullmatch(h.strip())
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise MasterUrlUsageError(f"bad Spark master {master!r}: expected spark://host:port[,host:port]")
        addrs.append((m.group(1).strip("[]"), int(m.group(2))))
    return addrs


def check_master(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` pass; ``spark://h:p[,h:p...]`` passes when one
    of its masters accepts a TCP connection within ``timeout_s``. A malformed URL raises
    MasterUrlUsageError, an address where nothing answers MasterUrlError."""
    addrs = parse_master(master)
    if not addrs:
        return
    reasons = []
    for host, port in addrs:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except TimeoutError:
            reasons.append(f"{host}:{port} did not answer within {timeout_s:g} s")
        except OSError as e:
            reasons.append(f"{host}:{port}: {e.strerror or e}")
    raise MasterUrlError(f"cannot reach Spark master {master}: {'; '.join(reasons)}")


def master_exit(master: str, prog: str) -> int | None:
    """For the ``spark-submit`` entry points: :func:`check_master`, with its refusal printed as one line
    ``prog: reason`` on stderr and returned as the exit status (2 malformed, 1 nothing answers); None: go on.

    Why here: mqadmin checks --master before Spark starts; the scripts did not, so ``--master yarn`` left
    Spark waiting ~20 min for a YARN ResourceManager and ``local[0]`` failed with a Java trace.
    """
    import sys

    try:
        check_master(master)
    except MasterUrlUsageError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except MasterUrlError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return EXIT_FAILURE
    return None
