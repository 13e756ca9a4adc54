"""A two-broker cluster for the per-broker ACL tests: broker-a with ACL off, broker-b with ACL 2.0 on
(authentication and authorization), where the user ``ops`` may Sub/Get/List any topic and group and
Get/List the cluster, and ``rocketmq`` is the Super user. In process, on free ports of 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mqadmin.app import app as mqadmin_app
from tests.net.harness import Servers

SUPER = ("rocketmq", "12345678")
ACL_ON = {"authenticationEnabled": "true", "authorizationEnabled": "true",
          "initAuthenticationUser": json.dumps({"username": SUPER[0], "password": SUPER[1]})}


def mqadmin(*argv: str):  # noqa: ANN201 - typer's Result
    return CliRunner().invoke(mqadmin_app, list(argv), env={"NAMESRV_ADDR": "", "RMQ_STORE": ""})


class AclCluster:
    def __init__(self, root: Path) -> None:
        self.servers = Servers(root)
        try:
            _, _, self.addr_a = self.servers.add_broker("broker-a", register_period_ms=1000)
            _, _, self.addr_b = self.servers.add_broker("broker-b", props=ACL_ON, register_period_ms=1000)
            self.namesrv = self.servers.namesrv_addr
            creds = ("--ak", SUPER[0], "--sk", SUPER[1])
            for argv in (("createUser", "-u", "ops", "-p", "opspw"),
                         ("createAcl", "-s", "User:ops", "-r", "Topic:*,Group:*", "-a", "Sub,Get,List",
                          "-d", "Allow"),
                         ("createAcl", "-s", "User:ops", "-r", "Cluster:*", "-a", "Get,List", "-d", "Allow")):
                r = mqadmin(*argv, "-n", self.namesrv, "-b", self.addr_b, *creds)
                assert r.exit_code == 0, (argv, r.stdout, r.stderr)
        except BaseException:
            self.servers.close()
            raise

    def close(self) -> None:
        self.servers.close()
