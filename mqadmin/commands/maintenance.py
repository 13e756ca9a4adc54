"""Store maintenance commands (Apache tools/command/broker): cleanExpiredCQ, deleteExpiredCommitLog,
cleanUnusedTopic.

Why they print only ``success``: that is Apache's whole answer; scripts test for it. What each broker
did (queues removed, files deleted) is in the JSON/YAML output, and on stderr with --verbose.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.cli import Cmd, register

app = typer.Typer()

BrokerAddrOpt = Annotated[str | None, typer.Option("-b", "--brokerAddr", help="Broker address")]
ClusterOpt = Annotated[str | None, typer.Option("-c", "--cluster", help="clustername")]


def _run(cmd: Cmd, what: str, broker_addr: str | None, cluster: str | None) -> None:
    done = cmd.admin().maintain_store(what, cluster.strip() if cluster else None,
                                      broker_addr.strip() if broker_addr else None)

    def render() -> None:
        """``success`` with no newline on stdout, byte for byte Apache's ``System.out.printf("success")``;
        --verbose's detail on stderr starts with a newline of its own. Why always, not only on a
        terminal: stdout and stderr often share one destination (a terminal, ``2>&1 | tee``, one log
        file), where the detail would otherwise run on from ``success``; always is the same output
        wherever it goes, and the cost elsewhere is one blank line on stderr, which no script reads."""
        cmd.print("success", end="")
        if cmd.opts.verbose and done:
            typer.echo("", err=True)
            for b, summary in done:
                typer.echo(f"{b.broker_addr}: {summary}", err=True)

    cmd.emit([{"brokerName": b.broker_name, "brokerAddr": b.broker_addr, "result": summary} for b, summary in done],
             render)


@register(app, "cleanExpiredCQ", "Clean expired ConsumeQueue on broker.", writes=True)
def clean_expired_cq(cmd: Cmd, broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None) -> None:
    _run(cmd, "cleanExpiredCQ", broker_addr, cluster)


@register(app, "deleteExpiredCommitLog", "Delete expired CommitLog files.", writes=True)
def delete_expired_commit_log(cmd: Cmd, broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None) -> None:
    _run(cmd, "deleteExpiredCommitLog", broker_addr, cluster)


@register(app, "cleanUnusedTopic", "Clean unused topic on broker.", writes=True)
def clean_unused_topic(cmd: Cmd, broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None) -> None:
    _run(cmd, "cleanUnusedTopic", broker_addr, cluster)
