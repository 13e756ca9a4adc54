"""Name server KV config commands (Apache tools/command/namesrv, topic/UpdateOrderConfCommand).

The KV table lives in the name server, so these need ``-n``; on a store directory they say so.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.cli import Cmd, complete_topic, register
from mqadmin.errors import AdminError, UsageProblem

app = typer.Typer()

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


@register(app, "updateKvConfig", "Create or update KV config.")
def update_kv_config(
    cmd: Cmd,
    namespace: Annotated[str, typer.Option("-s", "--namespace", help="set the namespace")],
    key: Annotated[str, typer.Option("-k", "--key", help="set the key name")],
    value: Annotated[str, typer.Option("-v", "--value", help="set the key value")],
) -> None:
    cmd.admin().put_kv_config(namespace.strip(), key.strip(), value.strip())
    cmd.emit({"namespace": namespace.strip(), "key": key.strip(), "value": value.strip()},
             lambda: cmd.printf("create or update kv config to namespace success.%n"))


@register(app, "deleteKvConfig", "Delete KV config.")
def delete_kv_config(
    cmd: Cmd,
    namespace: Annotated[str, typer.Option("-s", "--namespace", help="set the namespace")],
    key: Annotated[str, typer.Option("-k", "--key", help="set the key name")],
) -> None:
    cmd.admin().delete_kv_config(namespace.strip(), key.strip())
    cmd.emit({"namespace": namespace.strip(), "key": key.strip()},
             lambda: cmd.printf("delete kv config from namespace success.%n"))


@register(app, "updateOrderConf", "Create or update or delete order conf.")
def update_order_conf(
    cmd: Cmd,
    topic: Annotated[str, typer.Option("-t", "--topic", help="topic name", autocompletion=complete_topic)],
    method: Annotated[str, typer.Option("-m", "--method", help="put | get | delete")],
    order_conf: Annotated[str | None, typer.Option("-v", "--orderConf",
                                                   help="brokerName1:num;brokerName2:num")] = None,
) -> None:
    admin = cmd.admin()
    name, how = topic.strip(), method.strip()
    if how == "get":
        conf = admin.get_kv_config(ORDER_TOPIC_CONFIG, name)
        cmd.emit({"topic": name, "orderConf": conf},
                 lambda: cmd.printf("get orderConf success. topic=[%s], orderConf=[%s] ", name, conf))
    elif how == "put":
        if not order_conf or not order_conf.strip():
            raise UsageProblem("please set orderConf with option -v.")
        admin.put_kv_config(ORDER_TOPIC_CONFIG, name, order_conf.strip())
        cmd.emit({"topic": name, "orderConf": order_conf.strip()},
                 lambda: cmd.printf("update orderConf success. topic=[%s], orderConf=[%s]", name, order_conf.strip()))
    elif how == "delete":
        admin.delete_kv_config(ORDER_TOPIC_CONFIG, name)
        cmd.emit({"topic": name}, lambda: cmd.printf("delete orderConf success. topic=[%s]", name))
    else:
        raise UsageProblem(f"invalid -m/--method {method!r}: expected put, get or delete")


def _operate_write_perm(cmd: Cmd, broker_name: str, wipe: bool) -> None:
    """wipeWritePerm/addWritePerm: one line per name server, "OK, <topics>" or "Failed"; any failure
    makes the exit code 1 after every name server was tried (Apache only prints it)."""
    name = broker_name.strip()
    verb = "wipe" if wipe else "add"
    results = cmd.admin().operate_write_perm(name, wipe)
    key = "wipeTopicCount" if wipe else "addTopicCount"

    def render() -> None:
        for addr, count, error in results:
            if error is None:
                cmd.printf(f"{verb} write perm of broker[%s] in name server[%s] OK, %d%n", name, addr, count)
            else:
                cmd.printf(f"{verb} write perm of broker[%s] in name server[%s] Failed%n", name, addr)

    cmd.emit([{"brokerName": name, "namesrvAddr": addr, key: count, "error": error}
              for addr, count, error in results], render)
    failed = [(addr, error) for addr, _, error in results if error is not None]
    if failed:
        raise AdminError("; ".join(f"{addr}: {error}" for addr, error in failed))


@register(app, "wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param.",
          writes=True)
def wipe_write_perm(
    cmd: Cmd,
    broker_name: Annotated[str, typer.Option("-b", "--brokerName", help="broker name")],
) -> None:
    _operate_write_perm(cmd, broker_name, wipe=True)


@register(app, "addWritePerm", "Add write perm of broker in all name server you defined in the -n param.",
          writes=True)
def add_write_perm(
    cmd: Cmd,
    broker_name: Annotated[str, typer.Option("-b", "--brokerName", help="broker name")],
) -> None:
    _operate_write_perm(cmd, broker_name, wipe=False)


def _fail_if_any(results: list[tuple[str, object, str | None]]) -> None:
    """Exit 1, in one stderr line naming each name server that failed, after every one was tried."""
    failed = [(addr, error) for addr, _, error in results if error is not None]
    if failed:
        raise AdminError("; ".join(f"name server {addr}: {error}" for addr, error in failed))


@register(app, "getNamesrvConfig", "Get configs of name server.")
def get_namesrv_config(cmd: Cmd) -> None:
    """Apache's output: each name server's block under ``============<addr>============``, one
    ``%-50s=  %s`` line per key; a name server that fails gets one line of its own (exit 1)."""
    results = cmd.admin().namesrv_configs()

    def render() -> None:
        for addr, config, error in results:
            if config is None:
                cmd.printf("get name server config of [%s] failed: %s%n", addr, error)
                continue
            cmd.printf("============%s============%n", addr)
            for key, value in config.items():
                cmd.printf("%-50s=  %s%n", key, value)

    cmd.emit([{"namesrvAddr": addr, "config": config, "error": error} for addr, config, error in results], render)
    _fail_if_any(results)


@register(app, "updateNamesrvConfig", "Update configs of name server.")
def update_namesrv_config(
    cmd: Cmd,
    key: Annotated[str, typer.Option("-k", "--key", help="config key")],
    value: Annotated[str, typer.Option("-v", "--value", help="config value")],
) -> None:
    """Sent to every name server of ``-n``, as Apache's; the ones that took it are named in Apache's
    success line, each one that refused or could not be reached in a line of its own (exit 1)."""
    k, v = key.strip(), value.strip()
    results = cmd.admin().update_namesrv_config(k, v)
    done = [addr for addr, _, error in results if error is None]

    def render() -> None:
        if done:
            cmd.printf("update name server config success![%s]%n%s : %s%n", ", ".join(done), k, v)
        for addr, _, error in results:
            if error is not None:
                cmd.printf("update name server config of [%s] failed: %s%n", addr, error)

    cmd.emit([{"namesrvAddr": addr, "key": k, "value": v, "error": error} for addr, _, error in results], render)
    _fail_if_any(results)
