"""Fixtures for the playbook tests: an in-process ``mqadmin playbook`` runner, seeded stores, a real sshd."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from broker_core.broker.broker import Broker
from mqadmin.app import app

from .sshd import Sshd, available, start_sshd

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "playbooks" / "examples"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict:
        return json.loads(self.stdout)


class Playbooks:
    """``pb.run(file, "-e", "k=v", ...)``: ``mqadmin playbook run`` in-process, JSON output, log in tmp."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runner = CliRunner()
        self.log = tmp / "run.jsonl"

    def run(self, file: Path | str, *args: str, output: str = "json", env: dict[str, str] | None = None) -> Run:
        argv = ["playbook", "run", str(file), *args, "--log", str(self.log)]
        if output:
            argv += ["--output", output]
        r = self.runner.invoke(app, argv, env={"NAMESRV_ADDR": "", "RMQ_STORE": "", **(env or {})})
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            raise r.exception
        return Run(r.exit_code, r.stdout, r.stderr)

    def check(self, file: Path | str, *args: str) -> Run:
        r = self.runner.invoke(app, ["playbook", "check", str(file), *args])
        return Run(r.exit_code, r.stdout, r.stderr)

    def write(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text, encoding="utf-8")
        return path


@pytest.fixture
def pb(tmp_path: Path) -> Playbooks:
    return Playbooks(tmp_path)


def seed_store(store: Path, topic: str = "orders-events", group: str = "orders-billing", queues: int = 2,
               messages: int = 20, consumed: int | None = None) -> Path:
    """A store with one topic, ``messages`` messages spread over its queues, and the group's offsets."""
    broker = Broker(store)
    try:
        broker.create_or_update_topic(topic, queues, queues)
        for i in range(messages):
            broker.send_message(topic, f"m{i}".encode(), {"KEYS": f"k{i}"}, queue_id=i % queues)
        per_queue = messages // queues if consumed is None else consumed
        broker.create_or_update_subscription_group(group)  # a commit never creates its group
        for q in range(queues):
            broker.commit_offset(group, topic, q, per_queue)
    finally:
        broker.shutdown()
    return store


def remote_mqadmin() -> str:
    """How a step on the SSH host (this machine) runs this checkout's mqadmin."""
    return f"env PYTHONPATH={shlex.quote(str(REPO))} {shlex.quote(sys.executable)} -m mqadmin.app"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    why = available()
    if why:
        pytest.skip(why)
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()


def ssh_vars(server: Sshd, **extra: str) -> list[str]:
    """-e options naming the test sshd (host, port, user, key, known_hosts) and the remote mqadmin."""
    values = {"host": "127.0.0.1", "port": str(server.port), "user": server.user, "key_file": str(server.user_key),
              "known_hosts": str(server.known_hosts), "mqadmin": remote_mqadmin(), **extra}
    out: list[str] = []
    for k, v in values.items():
        out += ["-e", f"{k}={v}"]
    return out
