"""One line saying which brokers a screen's figures leave out, because they are not answering or refuse
the credentials.

Why a widget: a stuck broker is left out of the refreshes (tui.snapshot.StuckBrokers), so its queues,
messages and lag are missing from every total; without a word the Topics and Consumers screens showed
a partial total as if it were the whole. Hidden while every broker answers. Broker names come from the
cluster, so the text is literal, never markup.
"""

from __future__ import annotations

from mqadmin.admin import BrokerIdentity
from tui.widgets.problem import ProblemLine


class LeftOutLine(ProblemLine):
    DEFAULT_CSS = """
    LeftOutLine {
        color: $warning;
    }
    """

    def show_left_out(self, what: str, left_out: list[BrokerIdentity], gone: list[BrokerIdentity] | None = None,
                      refusing: frozenset[str] = frozenset()) -> None:
        """``what``: the figures concerned ("Messages and put TPS"); ``left_out``: the brokers not in them,
        as not answering, or (their address in ``refusing``) as refusing the credentials; ``gone``: those
        the name server no longer lists (a broker killed with kill -9 drops out of its table: its lag
        vanished from the totals with no word on the screens showing them)."""
        parts = []
        silent = [b for b in left_out if b.broker_addr not in refusing]
        refused = [b for b in left_out if b.broker_addr in refusing]
        if silent:
            parts.append(f"{_names(silent)}: not answering, left out until it answers")
        if refused:
            parts.append(f"{_names(refused)}: refuses the credentials (give --ak/--sk of a user it knows)")
        if gone:
            parts.append(f"{_names(gone)}: no longer registered with the name server")
        self.show_line(f"{what} exclude {'; '.join(parts)}" if parts else None)


def _names(brokers: list[BrokerIdentity]) -> str:
    return ", ".join(f"{b.broker_name} ({b.broker_addr})" for b in brokers)
