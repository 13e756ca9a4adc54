"""updateTopicList / updateSubGroupList: a JSON file of configs, checked, then sent to the -b or -c brokers.

Why one module: both commands read the same kind of file (a JSON array of Java config objects), check
each field with the same precise ``file[i]: name must be ...`` errors, take ``attributes`` the same
way and answer the same "submit batch" lines; the topic and group modules keep only what differs
(which fields a config has and which Admin call applies it). The -b/-c options are in targets.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from mqadmin.errors import AdminError, NotFoundError

if TYPE_CHECKING:  # start-up: mqadmin.admin loads when a command runs
    from mqadmin.admin import Admin, BrokerIdentity
    from mqadmin.cli import Cmd

C = TypeVar("C")


def read_json_list(path_text: str, what: str) -> Iterator[tuple[str, dict[str, object]]]:
    """The -f file's objects, each with ``file[i]`` to name it in errors; or one line saying what is wrong.

    The whole file is read and checked before the first object is given, so a bad file changes nothing.
    """
    from pathlib import Path

    path = Path(path_text)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFoundError(f"the file path {path} does not exists") from None
    except OSError as e:
        raise AdminError(f"{path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AdminError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise AdminError(f"{path}: expected a JSON array of {what} objects")
    for i, obj in enumerate(data):
        yield f"{path_text}[{i}]", obj


def field(obj: dict[str, object], name: str, kind: type, default: object, where: str) -> object:
    """``obj[name]`` (``default`` when absent) if it has the JSON type ``kind``, else an error naming it."""
    value = obj.get(name, default)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise AdminError(f"{where}: {name} must be an integer, got {value!r}")
    if kind is bool and not isinstance(value, bool):
        raise AdminError(f"{where}: {name} must be true or false, got {value!r}")
    if kind is str and not isinstance(value, str):
        raise AdminError(f"{where}: {name} must be a string, got {value!r}")
    return value


def signed_attributes(obj: dict[str, object], where: str) -> dict[str, str]:
    """The config's ``attributes`` object as the ``+key`` -> value map the Admin update calls take."""
    attrs = obj.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise AdminError(f"{where}: attributes must be an object")
    return {("+" + k.lstrip("+")): str(v) for k, v in attrs.items()}


def submit_config_list(cmd: Cmd, broker: str | None, cluster: str | None, configs: Sequence[C],
                       update: Callable[[Admin, Sequence[C], list[BrokerIdentity]], object],
                       names: tuple[str, list[str]], what: str, labels: Sequence[str] = (),
                       check: Callable[[Admin, C, list[BrokerIdentity]], str | None] | None = None) -> None:
    """Send every config to the target brokers in one list request each, then print mqadmin's line per broker.

    ``update`` sends the whole list to every target (UPDATE_AND_CREATE_TOPIC_LIST /
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, as Apache's commands send the file: one request a broker,
    which the broker applies all or none). ``names`` is the output record's key and the configs'
    names; ``what`` is the word Java prints. ``check`` says why the brokers would refuse a config
    (None: they would not); every config is checked before the list is sent, so a bad entry (named by
    its ``labels`` entry, which the broker's refusal could not name) changes nothing on any broker.
    """
    admin = cmd.admin()
    targets = admin.check_target(cluster_name=cluster, broker_addr=broker)
    if check is not None:
        for label, config in zip(labels, configs, strict=True):
            problem = check(admin, config, targets)
            if problem is not None:
                raise AdminError(f"{label}: {problem} (nothing was changed)")
    if configs:  # an empty file changes nothing: no request, as before the list codes
        update(admin, configs, targets)
    addrs = [b.broker_addr for b in targets]
    key, listed = names
    cmd.emit({"brokers": addrs, key: listed}, lambda: [cmd.print(
        f"submit batch of {what} config to {a} success, please check the result later.") for a in addrs])
