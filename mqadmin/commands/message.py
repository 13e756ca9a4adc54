"""Message commands (spec E.6): queries by id / key / unique key / offset, printing, send, consume."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from broker_core.broker.limits import JAVA_INT_MAX, JAVA_LONG_MAX
from mqadmin.cli import Cmd, TopicOpt, complete_group, parse_bool, register, split_list, trimmed
from mqadmin.errors import AdminError, NotFoundError, SilentBrokersError, UsageProblem
from mqadmin.timefmt import human2, input_style, parse_millis, parse_timestamp

if TYPE_CHECKING:  # start-up: mqadmin.admin loads when a command runs
    from mqadmin.admin import MessageRecord
    from mqadmin.reports import QueueScan

app = typer.Typer()

LONG_MAX = 2**63 - 1


def _java_map(props: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in props.items()) + "}"


def _body_path(name: str) -> Path:
    import tempfile  # start-up: only the commands that write a body file need it

    return Path(tempfile.gettempdir()) / "rocketmq" / "msgbodys" / name


def _write_body(name: str, body: bytes) -> Path:
    """mqadmin stores the body next to its report, so binary bodies can be inspected with other tools.
    Raises AdminError naming the file when it cannot (a full /tmp, a file where the directory goes)."""
    path = _body_path(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    except OSError as e:
        raise AdminError(f"cannot write the message body to {path}: {e.strerror or e}") from None
    return path


def _java(value: object) -> object:
    """What Java's string concatenation prints for a field: ``null`` for a message without tags or keys."""
    return "null" if value is None else value


def _print_detail(cmd: Cmd, r: MessageRecord, offset_id: bool, body_file: str, charset: str | None) -> None:
    """The message's report; a body file that cannot be written fails the command after the report
    (the operator still sees the message, and the exit code says what is missing)."""
    try:
        body_path: object = _write_body(body_file, r.body)
        unwritten = None
    except AdminError as e:
        body_path, unwritten = "(not written, see below)", e
    lines = []
    if offset_id:
        lines.append(("OffsetID:", r.msg_id))
    lines += [
        ("Topic:", r.topic), ("Tags:", f"[{_java(r.tags)}]"), ("Keys:", f"[{_java(r.keys)}]"), ("Queue ID:", r.queue_id),
        ("Queue Offset:", r.queue_offset), ("CommitLog Offset:", r.commit_log_offset),
        ("Reconsume Times:", r.reconsume_times), ("Born Timestamp:", human2(r.born_timestamp)),
        ("Store Timestamp:", human2(r.store_timestamp)), ("Born Host:", r.born_host),
        ("Store Host:", r.store_host), ("System Flag:", r.sys_flag), ("Properties:", _java_map(r.properties)),
        ("Message Body Path:", body_path),
    ]
    if r.body_error is not None:  # the body file and the body below are the stored bytes
        lines.append(("Message Body Error:", r.body_error))
    if charset is not None:
        lines.append(("Message Body:", _decode(r.body, charset)))
    for label, value in lines:
        cmd.print(f"{label:<20} {value}")
    if unwritten is not None:
        raise unwritten


def _print_tracks(cmd: Cmd, r: MessageRecord) -> None:
    """The message's consume tracks after its detail. Best-effort as Apache's (it prints the exception
    and goes on): an account that may read the message (Sub) may not ask who consumes the topic (Get),
    and the message it did find must not end in a failure."""
    try:
        tracks = cmd.admin().message_tracks(r)
    except AdminError as e:
        print(f"WARN: no message track: {e.message}", file=sys.stderr)
        return
    if not tracks:
        cmd.print("\n\nWARN: No Consumer")
        return
    cmd.print("")
    for t in tracks:
        desc = "null" if t["exceptionDesc"] is None else t["exceptionDesc"]  # Java's toString of a null
        cmd.print(f"MessageTrack [consumerGroup={t['consumerGroup']}, trackType={t['trackType']}, "
                  f"exceptionDesc={desc}]")


def _decode(body: bytes, charset: str) -> str:
    try:
        return body.decode(charset)
    except LookupError:
        raise AdminError(f"unknown charset {charset!r}") from None
    except UnicodeDecodeError:
        return body.decode(charset, "replace")


@register(app, "queryMsgById", "Query messages by offset message id (or unique id).")
def query_msg_by_id(
    cmd: Cmd,
    topic: TopicOpt,
    msg_ids: Annotated[str, typer.Option("-i", "--msgId", help="message id(s), comma separated", callback=trimmed)],
    body_format: Annotated[str | None, typer.Option("-f", "--bodyFormat", help="charset to print the body")] = None,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
    group: Annotated[str | None, typer.Option("-g", "--consumerGroup", help="consumer group name",
                                              autocompletion=complete_group, callback=trimmed)] = None,
    client_id: Annotated[str | None, typer.Option("-d", "--clientId", help="The consumer's client id")] = None,
    send_message: Annotated[str | None, typer.Option("-s", "--sendMessage", help="resend message")] = None,
    unit_name: Annotated[str | None, typer.Option("-u", "--unitName", help="unit name")] = None,
) -> None:
    resend = send_message is not None and parse_bool(send_message, "-s/--sendMessage", False)
    cmd.writes = resend and not (group is not None and client_id is not None)  # a resend writes to the store
    admin = cmd.admin()
    if cluster is not None:
        admin.check_target(cluster_name=cluster)
    ids = split_list(msg_ids) or []
    if group is not None and client_id is not None:
        _push_to_client(cmd, topic.strip(), ids, group.strip(), client_id.strip())
        return
    if send_message is not None:
        if resend:
            _resend(cmd, topic.strip(), ids, unit_name.strip() if unit_name else None)
        return
    found: list[tuple[str, MessageRecord]] = []
    missing = []
    unanswered: list[str] = []  # brokers that did not answer: named after the messages the others hold
    for msg_id in ids:
        records = admin.query_msg_by_id(topic, msg_id, unanswered=unanswered)
        if records:
            found.extend((msg_id, r) for r in records)
        else:
            missing.append(msg_id)

    def render() -> None:
        for _, r in found:
            _print_detail(cmd, r, True, r.msg_id, body_format)
            _print_tracks(cmd, r)
        for msg_id in missing if not unanswered else []:  # with a silent broker, not found is not known
            cmd.print(f"\nMessage not found! ({msg_id})")

    cmd.emit([r.to_dict() for _, r in found], render)
    if unanswered:  # what is missing may be on a silent broker: not "not found" (3), but which brokers (1)
        raise SilentBrokersError(unanswered)
    if missing:
        raise NotFoundError(f"message not found: {', '.join(missing)}")


def _push_to_client(cmd: Cmd, topic: str, ids: list[str], group: str, client_id: str,
                    not_push: str = "this {} client is not push consumer ,not support direct push ") -> None:
    """queryMsgById / queryMsgByUniqueKey -g -d: each message (an offset id or a unique key, as Apache's
    viewMessage finds it) goes to that client's listener (CONSUME_MESSAGE_DIRECTLY); Apache prints
    each ConsumeMessageDirectlyResult with no line break between them, and ``not_push`` (its wording
    differs between the two commands) for a client that is not a push consumer."""
    from mqadmin.running_info import direct_result_text

    admin = cmd.admin()
    results = [(msg_id, admin.push_message(topic, msg_id, group, client_id)) for msg_id in ids]

    def render() -> None:
        for _, r in results:
            if r is None:
                cmd.print(not_push.format(client_id))
            else:
                cmd.print(direct_result_text(r), end="")

    cmd.emit([{"msgId": m, "clientId": client_id, "pushConsumer": r is not None,
               "result": r.to_jsonable() if r is not None else None} for m, r in results], render)


def _resend(cmd: Cmd, topic: str, ids: list[str], unit_name: str | None) -> None:
    """queryMsgById -s true: each stored message is sent again by producer group ReSendMsgById (its
    unit name, with -u, is part of the producer's client id as in Java's ClientConfig)."""
    from mqadmin.commands.cluster import send_result_text

    admin = cmd.admin()
    group = "ReSendMsgById"
    done = [(msg_id, admin.resend_message(topic, msg_id, group, unit_name)) for msg_id in ids]

    def render() -> None:
        for msg_id, sent in done:
            if sent is None:
                cmd.print(f"no message. msgId={msg_id}", end="")
            else:
                cmd.print(f"prepare resend msg. originalMsgId={msg_id}", end="")
                cmd.print(send_result_text(sent[1], sent[0].topic), end="")

    cmd.emit([{"originalMsgId": m, "sendResult": s[1].to_dict() if s else None} for m, s in done], render)
    missing = [m for m, s in done if s is None]
    if missing:
        raise NotFoundError(f"message not found: {', '.join(missing)}")


@register(app, "queryMsgByKey", "Query messages by key (KEYS property).")
def query_msg_by_key(
    cmd: Cmd,
    topic: TopicOpt,
    key: Annotated[str, typer.Option("-k", "--msgKey", help="message key", callback=trimmed)],
    begin: Annotated[str | None, typer.Option("-b", "--beginTimestamp", help="epoch ms (default 0)")] = None,
    end: Annotated[str | None, typer.Option("-e", "--endTimestamp", help="epoch ms (default Long.MAX)")] = None,
    max_num: Annotated[int, typer.Option("-m", "--maxNum", help="max messages (default 64)", min=1, max=JAVA_INT_MAX)] = 64,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
) -> None:
    admin = cmd.admin()
    if cluster is not None:
        admin.check_target(cluster_name=cluster)
    b = parse_millis(begin, "-b/--beginTimestamp")
    e = parse_millis(end, "-e/--endTimestamp")
    # a broker of the route that does not answer is named after what the others hold (exit 1)
    unanswered: list[str] = []
    records = admin.query_msg_by_key(topic, key, max_num, 0 if b is None else b, LONG_MAX if e is None else e,
                                     unanswered=unanswered)
    if not records:
        raise SilentBrokersError(unanswered) if unanswered else NotFoundError(
            "query message by key finished, but no message.")

    def render() -> None:
        cmd.printf("%-50s %4s %40s%n", "#Message ID", "#QID", "#Offset")
        for r in records:
            cmd.printf("%-50s %4d %40d%n", r.display_id, r.queue_id, r.queue_offset)

    cmd.emit([r.to_dict() for r in records], render)
    if unanswered:
        raise SilentBrokersError(unanswered)


@register(app, "queryMsgByUniqueKey", "Query a message by its unique key (UNIQ_KEY / client msgId).")
def query_msg_by_unique_key(
    cmd: Cmd,
    msg_id: Annotated[str, typer.Option("-i", "--msgId", help="unique key", callback=trimmed)],
    topic: TopicOpt,
    show_all: Annotated[bool, typer.Option("-a", "--showAll", help="print every match (up to 32)")] = False,
    cluster: Annotated[str | None, typer.Option("-c", "--cluster", help="cluster name")] = None,
    group: Annotated[str | None, typer.Option("-g", "--consumerGroup", help="consumer group name",
                                              autocompletion=complete_group, callback=trimmed)] = None,
    client_id: Annotated[str | None, typer.Option("-d", "--clientId", help="The consumer's client id")] = None,
) -> None:
    admin = cmd.admin()
    if cluster is not None:
        admin.check_target(cluster_name=cluster)
    if group is not None and client_id is not None:  # push it to that consumer, as queryMsgById -g -d does
        _push_to_client(cmd, topic.strip(), [msg_id.strip()], group.strip(), client_id.strip(),
                        "get consumer info failed or this {} client is not push consumer, not support direct push ")
        return
    unanswered: list[str] = []  # brokers of the route that did not answer: named after the message
    records = admin.query_msg_by_unique_key(topic, msg_id.strip(), unanswered=unanswered)
    if not records:
        raise SilentBrokersError(unanswered) if unanswered else NotFoundError(
            f"message not found: unique key {msg_id} in topic {topic}")
    shown = records if show_all else records[:1]

    def render() -> None:
        for i, r in enumerate(shown):
            _print_detail(cmd, r, False, msg_id.strip() + (f"_{i}" if show_all else ""), None)
            _print_tracks(cmd, r)

    cmd.emit([r.to_dict() for r in shown] if show_all else shown[0].to_dict(), render)
    if unanswered:
        raise SilentBrokersError(unanswered)


@register(app, "queryMsgByOffset", "Query the message at a queue offset.")
def query_msg_by_offset(
    cmd: Cmd,
    topic: TopicOpt,
    broker_name: Annotated[str, typer.Option("-b", "--brokerName", help="broker name", callback=trimmed)],
    queue_id: Annotated[int, typer.Option("-i", "--queueId", help="queue id", min=0, max=JAVA_INT_MAX)],
    offset: Annotated[int, typer.Option("-o", "--offset", help="queue offset", min=0, max=JAVA_LONG_MAX)],
    body_format: Annotated[str | None, typer.Option("-f", "--bodyFormat", help="charset to print the body")] = None,
) -> None:
    r = cmd.admin().query_msg_by_offset(topic, broker_name, queue_id, offset)

    def render() -> None:
        _print_detail(cmd, r, True, r.msg_id, body_format)
        _print_tracks(cmd, r)

    cmd.emit(r.to_dict(), render)


def _message_line(r: MessageRecord, charset: str, print_body: bool, broker_name: str) -> str:
    ext = (f"MessageExt [brokerName={broker_name}, queueId={r.queue_id}, storeSize={r.store_size}, "
           f"queueOffset={r.queue_offset}, sysFlag={r.sys_flag}, bornTimestamp={r.born_timestamp}, "
           f"bornHost=/{r.born_host}, storeTimestamp={r.store_timestamp}, storeHost=/{r.store_host}, "
           f"msgId={r.msg_id}, commitLogOffset={r.commit_log_offset}, bodyCRC={r.body_crc}, "
           f"reconsumeTimes={r.reconsume_times}, preparedTransactionOffset={r.prepared_transaction_offset}, "
           f"toString()=Message{{topic='{r.topic}', flag={r.flag}, properties={_java_map(r.properties)}, "
           f"body=[{len(r.body)} bytes], transactionId='null'}}]")
    body = (f"({r.body_error})" if r.body_error is not None else _decode(r.body, charset)) if print_body \
        else "NOT PRINT BODY"
    return f"MSGID: {r.display_id} {ext} BODY: {body}"


def _timestamps(begin: str | None, end: str | None) -> tuple[int | None, int | None]:
    b = parse_timestamp(begin, option="beginTimestamp") if begin else None
    e = parse_timestamp(end, option="endTimestamp") if end else None
    if b is not None and e is not None and b > e:
        raise AdminError(f"beginTimestamp {b} is after endTimestamp {e}")
    return b, e


def _queue_text(scan: QueueScan) -> str:
    """Java's MessageQueue#toString, as Apache's lines name a queue."""
    return f"MessageQueue [topic={scan.topic}, brokerName={scan.broker_name}, queueId={scan.queue_id}]"


def _render_scan(cmd: Cmd, scan: QueueScan, charset: str, print_body: bool, print_messages: bool = True,
                 searched_range: bool = False) -> None:
    """``searched_range``: the header names the range read (printMsg: Apache's PrintMessageSubCommand
    replaces minOffset/maxOffset with searchOffset of -b/-e), else the queue's own offsets."""
    mq = _queue_text(scan)
    lo, hi = (scan.begin_offset, scan.end_offset) if searched_range else (scan.min_offset, scan.max_offset)
    cmd.print(f"minOffset={lo}, maxOffset={hi}, {mq}")
    if print_messages:
        for r in scan.messages:
            cmd.print(_message_line(r, charset, print_body, scan.broker_name))
    for status, offset in scan.pull_notes:  # as Java's loop: none for an empty queue or FOUND pulls
        verb = "no matched msg." if status == "NO_MATCHED_MSG" else "print msg finished."
        cmd.print(f"{mq} {verb} status={status}, offset={offset}")
    cmd.print("-" * 56)


@register(app, "printMsg", "Print the messages of every queue of a topic.")
def print_msg(
    cmd: Cmd,
    topic: TopicOpt,
    charset: Annotated[str, typer.Option("-c", "--charsetName", help="body charset")] = "UTF-8",
    sub_expression: Annotated[str, typer.Option("-s", "--subExpression", help="tag expression")] = "*",
    begin: Annotated[str | None, typer.Option("-b", "--beginTimestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")] = None,
    end: Annotated[str | None, typer.Option("-e", "--endTimestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")] = None,
    print_body: Annotated[str | None, typer.Option("-d", "--printBody", help="true/false (default true)")] = None,
    lmq_parent_topic: Annotated[str | None, typer.Option("-l", "--lmqParentTopic", help="LMQ parent topic")] = None,
) -> None:
    show_body = parse_bool(print_body, "-d/--printBody", True)
    b, e = _timestamps(begin, end)
    admin = cmd.admin()
    scans = []
    with cmd.progress(f"printMsg {topic}") as update:
        for scan in admin.iter_print_msg(topic, sub_expression, b, e, update):
            scans.append(scan)
            if not cmd.structured:
                _render_scan(cmd, scan, charset, show_body, searched_range=True)
    if cmd.structured:
        cmd.emit([r.to_dict() for s in scans for r in s.messages], lambda: None)


@register(app, "printMsgByQueue", "Print (or count by tag) the messages of one queue.")
def print_msg_by_queue(
    cmd: Cmd,
    topic: TopicOpt,
    broker_name: Annotated[str, typer.Option("-a", "--brokerName", help="broker name")],
    queue_id: Annotated[int, typer.Option("-i", "--queueId", help="queue id", min=0, max=JAVA_INT_MAX)],
    charset: Annotated[str, typer.Option("-c", "--charsetName", help="body charset")] = "UTF-8",
    sub_expression: Annotated[str, typer.Option("-s", "--subExpression", help="tag expression")] = "*",
    begin: Annotated[str | None, typer.Option("-b", "--beginTimestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")] = None,
    end: Annotated[str | None, typer.Option("-e", "--endTimestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")] = None,
    print_msg_flag: Annotated[str | None, typer.Option("-p", "--printMsg", help="true/false (default false)")] = None,
    print_body: Annotated[str | None, typer.Option("-d", "--printBody", help="true/false (default false)")] = None,
    calculate: Annotated[str | None, typer.Option("-f", "--calculate", help="count tags: true/false")] = None,
) -> None:
    show_msgs = parse_bool(print_msg_flag, "-p/--printMsg", False)
    show_body = parse_bool(print_body, "-d/--printBody", False)
    count_tags = parse_bool(calculate, "-f/--calculate", False)
    b, e = _timestamps(begin, end)
    with cmd.progress(f"printMsgByQueue {topic}/{queue_id}") as update:
        scan = cmd.admin().print_msg_by_queue(topic, broker_name, queue_id, sub_expression, b, e, update)
    counts = Counter(r.tags for r in scan.messages if r.tags and r.tags.strip())  # Apache skips untagged
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def render() -> None:
        if show_msgs:
            for r in scan.messages:
                cmd.print(_message_line(r, charset, show_body, scan.broker_name))
        if count_tags:
            for tag, n in ranked:
                cmd.print(f"Tag: {tag:<30} Count: {n}")

    if count_tags:
        cmd.emit([{"tag": t, "count": n} for t, n in ranked], render)
    else:
        cmd.emit([r.to_dict() for r in scan.messages], render)


@register(app, "sendMessage", "Send one message.", writes=True)
def send_message(
    cmd: Cmd,
    topic: TopicOpt,
    body: Annotated[str, typer.Option("-p", "--body", help="message body (UTF-8)")],
    key: Annotated[str | None, typer.Option("-k", "--key", help="message key(s)")] = None,
    tags: Annotated[str | None, typer.Option("-c", "--tags", help="message tag")] = None,
    broker_name: Annotated[str | None, typer.Option("-b", "--broker", help="broker name")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--qid", help="queue id (requires -b)", min=0, max=JAVA_INT_MAX)] = None,
    msg_trace: Annotated[str | None, typer.Option("-m", "--msgTraceEnable", help="true/false")] = None,
) -> None:
    trace = parse_bool(msg_trace, "-m/--msgTraceEnable", False)
    if queue_id is not None and broker_name is None:
        raise UsageProblem("Broker name must be set if the queue is chosen!")
    if not body:  # Java's Validators.checkMessage, on -n and --store alike (the broker itself takes it)
        raise AdminError("the message body length is zero: -p/--body must not be empty")
    result = cmd.admin().send_message(topic, body.encode("utf-8"), key, tags, broker_name, queue_id, msg_trace=trace)
    def render() -> None:
        cmd.printf("%-32s  %-4s  %-20s    %s%n", "#Broker Name", "#QID", "#Send Result", "#MsgId")
        cmd.printf("%-32s  %-4s  %-20s    %s%n", result.broker_name, result.queue_id, result.send_status,
                   result.msg_id)

    cmd.emit(result.to_dict(), render)


@register(app, "consumeMessage", "Read messages like a pull consumer (nothing is committed).")
def consume_message(
    cmd: Cmd,
    topic: TopicOpt,
    broker_name: Annotated[str | None, typer.Option("-b", "--brokerName", help="broker name")] = None,
    queue_id: Annotated[int | None, typer.Option("-i", "--queueId", help="queue id (requires -b)", min=0, max=JAVA_INT_MAX)] = None,
    offset: Annotated[int | None, typer.Option("-o", "--offset", help="queue offset (requires -i)", min=0, max=JAVA_LONG_MAX)] = None,
    group: Annotated[str, typer.Option("-g", "--consumerGroup", help="consumer group",
                                       autocompletion=complete_group, callback=trimmed)] = "TOOLS_CONSUMER",
    begin: Annotated[str | None, typer.Option("-s", "--beginTimestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")] = None,
    end: Annotated[str | None, typer.Option("-e", "--endTimestamp", help="now | ms | yyyy-MM-dd#HH:mm:ss:SSS")] = None,
    count: Annotated[int, typer.Option("-c", "--MessageNumber", help="how many messages (default 128)", min=1, max=JAVA_LONG_MAX)] = 128,
) -> None:
    if queue_id is not None and broker_name is None:
        raise UsageProblem("Please set the brokerName before queueId!")
    if offset is not None and queue_id is None:
        raise UsageProblem("Please set queueId before offset!")
    if count <= 0:
        raise UsageProblem("-c/--MessageNumber must be positive")
    b, e = _timestamps(begin, end)
    scans = cmd.admin().consume_message(topic, group, broker_name, queue_id, offset, b, e, count)

    def render() -> None:
        # Apache prints "Consume ok" for a pull that found messages only: an empty queue or an offset
        # past the end must not look like a successful read
        if any(scan.messages for scan in scans):
            cmd.print("Consume ok")
        for scan in scans:
            if scan.begin_offset > scan.end_offset:  # ConsumeMessageCommand#executeByCondition's words
                cmd.print(f"{_queue_text(scan)} no matched msg, offset={scan.begin_offset}")
            else:
                _render_scan(cmd, scan, "UTF-8", True)

    cmd.emit([r.to_dict() for s in scans for r in s.messages], render)


@register(app, "decodeMessageId", "Decode a unique message id: client ip and (nearly) the send time.")
def decode_message_id_cmd(
    cmd: Cmd,
    message_id: Annotated[str | None, typer.Option("-i", "--messageId", help="unique message id")] = None,
) -> None:
    if not message_id:
        raise UsageProblem("-i/--messageId is required")
    from mqadmin.msgid import decode_message_id

    d = decode_message_id(message_id)
    data = {"ip": d.ip, "date": input_style(d.date_ms), "dateMs": d.date_ms, "pid": d.pid,
            "offsetStoreHost": d.offset_store_host, "offsetCommitLogOffset": d.offset_commit_log_offset}
    cmd.emit(data, lambda: cmd.print(f"ip={d.ip}date={input_style(d.date_ms)}"))


@register(app, "checkMsgSendRT", "check message send response time", writes=True)
def check_msg_send_rt(
    cmd: Cmd,
    topic: TopicOpt,
    amount: Annotated[int, typer.Option("-a", "--amount", help="message amount (default 100)",
                                        min=1, max=JAVA_LONG_MAX)] = 100,
    size: Annotated[int, typer.Option("-s", "--size", help="message size in bytes (default 128)",
                                      min=0, max=4 * 1024 * 1024)] = 128,
) -> None:
    import time

    admin = cmd.admin()
    queues = [(b.broker_name, q) for b, n in admin.topic_write_queues(topic.strip()) for q in range(n)]
    if not queues:
        raise NotFoundError(f"topic [{topic}] has no writable queue")
    body = b"a" * size
    rows = []
    for i in range(amount):
        broker_name, qid = queues[i % len(queues)]
        t0 = time.perf_counter()
        try:
            ok = admin.send_message(topic.strip(), body, broker_name=broker_name, queue_id=qid).send_status == "SEND_OK"
        except AdminError:
            ok = False
        rows.append((broker_name, qid, ok, int((time.perf_counter() - t0) * 1000)))
    timed = rows[1:] if len(rows) > 1 else rows
    avg = sum(r[3] for r in timed) / len(timed)

    def render() -> None:
        cmd.printf("%-32s  %-4s  %-20s    %s%n", "#Broker Name", "#QID", "#Send Result", "#RT")
        for name, qid, ok, rt in rows:
            cmd.printf("%-32s  %-4d  %-20s    %s%n", name, qid, ok, rt)
        cmd.printf("Avg RT: %.2f%n", avg)

    cmd.emit({"rows": [{"brokerName": n, "queueId": q, "sendResult": ok, "rtMs": rt} for n, q, ok, rt in rows],
              "avgRtMs": avg}, render)


@register(app, "queryMsgTraceById", "query a message trace")
def query_msg_trace_by_id(
    cmd: Cmd,
    msg_id: Annotated[str, typer.Option("-i", "--msgId", help="Message Id", callback=trimmed)],
    trace_topic: Annotated[str | None, typer.Option("-t", "--traceTopic",
                                                    help="The name value of message trace topic")] = None,
    begin: Annotated[str | None, typer.Option("-b", "--beginTimestamp", help="Begin timestamp (ms)")] = None,
    end: Annotated[str | None, typer.Option("-e", "--endTimestamp", help="End timestamp (ms)")] = None,
    max_num: Annotated[int, typer.Option("-c", "--maxNum", help="The maximum number of messages returned",
                                         min=1, max=JAVA_INT_MAX)] = 64,
) -> None:
    """Pub lines in the order found, then one block of Sub lines per consumer group (Apache's layout)."""
    from mqadmin.timefmt import seconds_text

    topic = (trace_topic or "RMQ_SYS_TRACE_TOPIC").strip()
    key = msg_id.strip()
    b = parse_millis(begin, "-b/--beginTimestamp")
    e = parse_millis(end, "-e/--endTimestamp")
    views = cmd.admin().query_msg_trace(key, topic, 0 if b is None else b, e, max_num)
    subs: dict[str, list] = {}
    for v in views:
        if v.msg_type == "SubAfter":
            subs.setdefault(v.group_name, []).append(v)

    def render() -> None:
        fmt = "%-10s %-20s %-20s %-20s %-10s %-10s%n"
        for v in views:
            if v.msg_type == "Pub":
                cmd.printf(fmt, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
                cmd.printf(fmt, "Pub", v.group_name, v.client_host, seconds_text(v.time_stamp), f"{v.cost_time}ms",
                           v.status)
                cmd.print()
        for group_views in subs.values():
            cmd.printf(fmt, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
            for v in group_views:
                cmd.printf(fmt, "Sub", v.group_name, v.client_host, seconds_text(v.time_stamp), f"{v.cost_time}ms",
                           v.status)
            cmd.print()

    cmd.emit([v.to_dict() for v in views], render)
