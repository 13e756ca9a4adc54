"""Connection commands (Apache tools/command/connection): consumerConnection, producerConnection.

Who is online is known only to a running broker (heartbeats); on a store directory nobody is, and the
commands say so (not found, exit 3) like Apache's broker does.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.cli import Cmd, complete_group, complete_topic, register
from mqadmin.mqversion import version_desc

app = typer.Typer()


@register(app, "consumerConnection", "Query consumer's socket connection, client version and subscription.")
def consumer_connection(
    cmd: Cmd,
    group: Annotated[str, typer.Option("-g", "--consumerGroup", help="consumer group name",
                                       autocompletion=complete_group)],
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")] = None,
) -> None:
    admin = cmd.admin()
    if broker is not None:
        admin.check_target(broker_addr=broker)
    cc = admin.consumer_connection_info(group.strip(), broker.strip() if broker else None)
    data = {"group": cc.group, "consumeType": cc.consume_type, "messageModel": cc.message_model,
            "consumeFromWhere": cc.consume_from_where,
            "connections": [{"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language,
                             "version": c.version, "versionDesc": version_desc(c.version)} for c in cc.connections],
            "subscriptions": [{"topic": s.topic, "subExpression": s.sub_string, "expressionType": s.expression_type}
                              for s in cc.subscriptions]}

    def render() -> None:
        cmd.printf("%-36s %-22s %-10s %s%n", "#ClientId", "#ClientAddr", "#Language", "#Version")
        for c in cc.connections:
            cmd.printf("%-36s %-22s %-10s %s%n", c.client_id, c.client_addr, c.language, version_desc(c.version))
        cmd.printf("%nBelow is subscription:\n")
        cmd.printf("%-20s %s%n", "#Topic", "#SubExpression")
        for s in cc.subscriptions:
            cmd.printf("%-20s %s%n", s.topic, s.sub_string)
        cmd.printf("\n")
        cmd.printf("ConsumeType: %s%n", cc.consume_type)
        cmd.printf("MessageModel: %s%n", cc.message_model)
        cmd.printf("ConsumeFromWhere: %s%n", cc.consume_from_where)

    cmd.emit(data, render)


@register(app, "producerConnection", "Query producer's socket connection and client version.")
def producer_connection(
    cmd: Cmd,
    group: Annotated[str, typer.Option("-g", "--producerGroup", help="producer group name")],
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic name", autocompletion=complete_topic)],
) -> None:
    conns = cmd.admin().producer_connection_info(group.strip(), topic.strip())

    def render() -> None:
        for i, c in enumerate(conns, 1):
            cmd.printf("%04d  %-32s %-22s %-8s %s%n", i, c.client_id, c.client_addr, c.language,
                       version_desc(c.version))

    cmd.emit([{"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version,
               "versionDesc": version_desc(c.version)} for c in conns], render)
