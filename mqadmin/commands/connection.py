"""Connection commands (Apache tools/command/connection and consumer): consumerConnection,
producerConnection, consumerStatus, getConsumerStatus — the last two ask the clients themselves
(the broker relays GET_CONSUMER_RUNNING_INFO / GET_CONSUMER_STATUS_FROM_CLIENT to them).

Who is online is known only to a running broker (heartbeats); on a store directory nobody is, and the
commands say so (not found, exit 3) like Apache's broker does.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from broker_core.remoting.mqversion import version_desc
from mqadmin.cli import Cmd, complete_group, complete_topic, front, register, trimmed
from mqadmin.errors import AdminError

app = typer.Typer()


@register(app, "consumerConnection", "Query consumer's socket connection, client version and subscription.")
def consumer_connection(
    cmd: Cmd,
    group: Annotated[str, typer.Option("-g", "--consumerGroup", help="consumer group name",
                                       autocompletion=complete_group, callback=trimmed)],
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
    group: Annotated[str, typer.Option("-g", "--producerGroup", help="producer group name", callback=trimmed)],
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic name", autocompletion=complete_topic,
                                       callback=trimmed)],
) -> None:
    conns = cmd.admin().producer_connection_info(group.strip(), topic.strip())

    def render() -> None:
        for i, c in enumerate(conns, 1):
            cmd.printf("%04d  %-32s %-22s %-8s %s%n", i, c.client_id, c.client_addr, c.language,
                       version_desc(c.version))

    cmd.emit([{"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language, "version": c.version,
               "versionDesc": version_desc(c.version)} for c in conns], render)


@register(app, "consumerStatus", "Query consumer's internal data structure.")
def consumer_status(
    cmd: Cmd,
    group: Annotated[str, typer.Option("-g", "--consumerGroup", help="consumer group name",
                                       autocompletion=complete_group, callback=trimmed)],
    client_id: Annotated[str | None, typer.Option("-i", "--clientId", help="The consumer's client id")] = None,
    broker: Annotated[str | None, typer.Option("-b", "--brokerAddr", help="broker address")] = None,
    jstack: Annotated[bool, typer.Option("-s", "--jstack", help="Run jstack command in the consumer progress")] = False,
) -> None:
    """Without -i: every client's running info is written to ``<now>/<clientId>`` (as Apache, under the
    current directory), then the clients are compared; with -i: that client's report is printed."""
    from mqadmin.running_info import analyze_process_queue, analyze_subscription, format_running_info

    admin = cmd.admin()
    if broker is not None:
        admin.check_target(broker_addr=broker)
    addr = broker.strip() if broker else None
    if client_id is not None:
        info = admin.consumer_running_info(group.strip(), client_id, addr, jstack)
        cmd.emit(info.to_jsonable(), lambda: cmd.print(format_running_info(info), end=""))
        return
    rows = admin.consumer_running_infos(group.strip(), addr, jstack)
    now = int(time.time() * 1000)
    table = {}
    written = []
    for conn, info, _ in rows:
        if info is None:
            continue
        path = Path(str(now)) / conn.client_id
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(format_running_info(info), encoding="utf-8")
        except OSError as e:
            raise AdminError(f"cannot write {path}: {e.strerror or e}") from None
        table[conn.client_id] = info
        written.append((conn, info, f"{now}/{conn.client_id}"))
    same = analyze_subscription(table) if table else None
    analysis = [a for cid in sorted(table) if (a := analyze_process_queue(cid, table[cid]))]
    failed = [(conn.client_id, error) for conn, _, error in rows if error is not None]

    def render() -> None:
        cmd.printf("%-10s %-40s %-20s %s%n", "#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")
        for i, (conn, _, path) in enumerate(written, 1):
            cmd.printf("%-10d %-40s %-20s %s%n", i, conn.client_id, version_desc(conn.version), path)
        if same is True:
            cmd.printf("%n%nSame subscription in the same group of consumer")
            cmd.printf("%n%nRebalance %s%n", "OK")
            for text in analysis:
                cmd.print(text, end="")
        elif same is False:
            cmd.printf("%n%nWARN: Different subscription in the same group of consumer!!!")

    cmd.emit({"clients": [{"index": i, "clientId": conn.client_id, "version": version_desc(conn.version),
                           "file": path, "runningInfo": info.to_jsonable()}
                          for i, (conn, info, path) in enumerate(written, 1)],
              "failed": [{"clientId": cid, "error": error} for cid, error in failed],
              "sameSubscription": same, "rebalanceOK": same, "processQueueAnalysis": analysis}, render)
    if failed:
        raise AdminError("; ".join(f"{cid}: {error}" for cid, error in failed))


@register(app, "getConsumerStatus", "Get consumer status from client.")
def get_consumer_status(
    cmd: Cmd,
    group: Annotated[str, typer.Option("-g", "--group", help="set the consumer group",
                                       autocompletion=complete_group, callback=trimmed)],
    topic: Annotated[str, typer.Option("-t", "--topic", help="set the topic", autocompletion=complete_topic)],
    origin_client_id: Annotated[str | None, typer.Option("-i", "--originClientId",
                                                         help="set the consumer clientId")] = None,
) -> None:
    g, t, origin = group.strip(), topic.strip(), (origin_client_id or "").strip()
    table = cmd.admin().consume_status(t, g, origin or None)

    def render() -> None:
        cmd.printf("get consumer status from client. group=%s, topic=%s, originClientId=%s%n", g, t, origin)
        cmd.printf("%-50s  %-15s  %-15s  %-20s%n", "#clientId", "#brokerName", "#queueId", "#offset")
        for cid, queues in table.items():
            for (broker_name, queue_id), offset in queues.items():
                cmd.printf("%-50s  %-15s  %-15d  %-20d%n", front(cid, 50), broker_name, queue_id, offset)

    cmd.emit({"group": g, "topic": t, "originClientId": origin,
              "consumerTable": {cid: [{"brokerName": b, "queueId": q, "offset": o} for (b, q), o in queues.items()]
                                for cid, queues in table.items()}}, render)
