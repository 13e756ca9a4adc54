"""The CLI's failure vocabulary: every error maps to one line on stderr and one exit code.

Why a module: the Admin implementations (embedded, remote) raise these, and ``app.py`` turns them
into RocketMQ-flavoured one-line messages with the documented exit codes (1 failure, 3 not found),
so no command needs its own try/except.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3

DEFAULT_NAMESRV = "127.0.0.1:9876"


class AdminError(Exception):
    """A command failed for a reason the operator can act on; ``exit_code`` is what the shell sees."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def refused_by(self, addr: str) -> AdminError:
        """The same failure, naming the broker it came from: a broker's remark ("check signature
        failed.") does not say which of a cluster's brokers refused. Left as is when it names it already
        (a broker that cannot be reached)."""
        if addr not in self.message:
            self.message = f"refused by {addr}: {self.message}"
            self.args = (self.message,)
        return self

    def noting(self, note: str) -> AdminError:
        """The same failure with ``note`` added in parentheses (e.g. where a change was made already)."""
        self.message = f"{self.message} ({note})"
        self.args = (self.message,)
        return self

    def after_changes_on(self, done: list[str]) -> AdminError:
        """The same failure, also naming the brokers a multi-broker change had already been made on."""
        return self.noting(f"already changed on {', '.join(done)}; not on the brokers after it") if done else self


class NotFoundError(AdminError):
    """The thing asked for (topic, message, user...) does not exist: exit 3."""

    exit_code = EXIT_NOT_FOUND


class NotAStoreError(NotFoundError):
    """The store directory target is not a store (missing, a file, empty): the CLI adds where the path
    came from when nobody gave it (the default ./store), which a first run otherwise cannot tell."""


class UsageProblem(AdminError):
    """Options that parse but do not fit together (mqadmin's option groups): exit 2 like a parse error."""

    exit_code = EXIT_USAGE


class StoreBusyError(AdminError):
    """A running broker holds the store; the operator should talk to it over the network instead."""

    def __init__(self, store_dir: str, namesrv: str | None = None, holder: str = "a running broker",
                 remedy: str | None = None) -> None:
        """``remedy``: what to do instead, for a command that cannot go over -n (it works on files)."""
        namesrv = namesrv or DEFAULT_NAMESRV
        if holder.startswith("another mqadmin"):
            # -n would not help: no broker serves this store; the other command has to finish first.
            text = f"store {store_dir} is being changed by {holder}; retry when it has finished"
        elif remedy is not None:
            text = f"store {store_dir} is held by {holder}; {remedy}"
        else:
            text = f"store {store_dir} is held by {holder}; run this command against it with -n {namesrv}"
        super().__init__(text)


class RemoteUnavailableError(AdminError):
    """-n (or $NAMESRV_ADDR) where the remoting transport module is not installed (a stripped build):
    ``open_remote_admin`` raises it. A broker address in copyUser/copyAcl -f/-t without -n is a usage
    error instead (``Cmd.open_target``): remote mode is there, the name server is missing."""

    def __init__(self, target: str) -> None:
        super().__init__(f"remote mode (-n {target}) is not available in this build (its remoting transport "
                         "is not installed); use --store DIR on a store directory")


class UnreachableError(AdminError):
    """No answer at all from a server (connection refused, timed out), as opposed to a refusal: a
    command given a broker address (-b) says the broker cannot be reached rather than how it refused."""


class SilentBrokersError(AdminError):
    """Brokers of a command that asks several did not answer (timed out, refused): raised after what the
    others answered is printed, so a script still sees the outage (exit 1) and the operator sees which
    brokers the output lacks, in one line. ``silent``: each as "brokerName (brokerAddr): why"."""

    def __init__(self, silent: list[str]) -> None:
        super().__init__(f"{len(silent)} broker(s) did not answer: {'; '.join(silent)}")
        self.silent = silent

    @staticmethod
    def entry(broker_name: str, broker_addr: str, why: str) -> str:
        """One silent broker as the line names it."""
        return f"{broker_name} ({broker_addr}): {why}"


class NoPermissionError(AdminError):
    """The broker refused what was asked with NO_PERMISSION (16): ACL does not let this user do it (e.g.
    Get a topic its policies do not name). Exit 1 as any refusal; typed so a reader of many things (the
    dashboard) can leave out the ones it may not read instead of failing on the first."""


class WrongTargetError(NotFoundError):
    """``-c``/``-b`` name a cluster or broker that is not there: not found, exit 3."""


def refusal(remark: str, no_permission: bool = False) -> AdminError:
    """A broker's refusal by its remark: the ACL 2.0 handlers answer NO_PERMISSION for a user, subject
    or ACL that is not there ("The user is not exist", "The subject is not exist."), which is
    not found (exit 3) like every other missing thing; anything else is a failure (exit 1), a
    NoPermissionError when the answer's code was NO_PERMISSION (``no_permission``)."""
    if "not exist" in remark:
        return NotFoundError(remark)
    return NoPermissionError(remark) if no_permission else AdminError(remark)
