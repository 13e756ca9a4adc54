"""Commands that ask several brokers, with one that does not answer, print what the others answered and
name the silent one in one line (exit 1): brokerStatus -c, queryMsgByKey, queryMsgByUniqueKey and
consumerProgress without -g.

Why: Apache's BrokerStatusSubCommand asks broker after broker, each in its own try/catch; here the first
broker that timed out failed the command with no output at all, so the health check an operator runs
when a cluster misbehaves showed nothing of the brokers that were fine (clusterList lists them). The same
for a key lookup: Apache's MQAdminImpl.queryMessage skips a broker that fails, so a message held on a
healthy broker is found during another broker's outage; here the lookup failed after 15 s, printing
nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from net_util import REPO
from net_util import run_mqadmin as mqadmin

from tests.remoting_broker import running_broker
from tests.waiting import wait_for, wait_remote_dispatched


def test_broker_status_of_a_cluster_prints_the_brokers_that_answer(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        n = a.namesrv_addr
        assert "broker-b" in mqadmin("clusterList", "-n", n).stdout
        os.kill(b.proc.pid, signal.SIGSTOP)  # still registered, answers nothing
        try:
            text = mqadmin("brokerStatus", "-n", n, "-c", "DefaultCluster")
            as_json = mqadmin("brokerStatus", "-n", n, "-c", "DefaultCluster", "--output", "json")
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    for r in (text, as_json):
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.startswith(f"mqadmin brokerStatus: 1 broker(s) did not answer: broker-b ({b.broker_addr}): "), \
            r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    lines = text.stdout.splitlines()
    assert lines and all(line.startswith(a.broker_addr) for line in lines), text.stdout
    assert [a.broker_addr, "brokerName", ":", "broker-a"] in [line.split() for line in lines], text.stdout
    statuses = json.loads(as_json.stdout)
    assert list(statuses) == [a.broker_addr] and statuses[a.broker_addr]["brokerName"] == "broker-a"


def _started(*args: str) -> subprocess.Popen[str]:
    """``mqadmin <args>`` started in a child process (no NAMESRV_ADDR inherited), so that commands that
    each wait out a silent broker's 15 s query timeout wait it out together."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NAMESRV_ADDR", None)
    return subprocess.Popen([sys.executable, "-m", "mqadmin.app", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def test_queries_during_a_broker_outage_print_what_the_other_brokers_answered(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        n = a.namesrv_addr
        assert mqadmin("updateTopic", "-n", n, "-b", a.broker_addr, "-t", "Both").returncode == 0
        sent = mqadmin("sendMessage", "-n", n, "-t", "Both", "-p", "hi", "-k", "k1")  # broker-a: the route's only one
        found = re.search(r"^broker-a .* SEND_OK +([0-9A-F]+)$", sent.stdout, re.M)
        assert sent.returncode == 0 and found, sent.stdout + sent.stderr
        uniq = found[1]
        for broker in (a, b):  # a group with a %RETRY% topic, which consumerProgress without -g lists
            assert mqadmin("updateTopic", "-n", n, "-b", broker.broker_addr, "-t", "%RETRY%GA").returncode == 0
        assert mqadmin("updateTopic", "-n", n, "-b", b.broker_addr, "-t", "Both").returncode == 0
        wait_for(lambda: "broker-b" in mqadmin("topicRoute", "-n", n, "-t", "Both").stdout, "broker-b in Both's route")
        wait_remote_dispatched(n, a.broker_addr)
        # groups live on brokers: a group none has is named as missing on those brokers, not at the name server
        gone = mqadmin("deleteSubGroup", "-n", n, "-c", "DefaultCluster", "-g", "NoSuchGroup")
        assert gone.returncode == 3 and gone.stderr == (
            "mqadmin deleteSubGroup: subscription group [NoSuchGroup] does not exist on brokers "
            f"broker-a ({a.broker_addr}), broker-b ({b.broker_addr})\n"), gone.stderr
        os.kill(b.proc.pid, signal.SIGSTOP)  # still registered, answers nothing
        try:
            running = {
                "queryMsgByKey": _started("queryMsgByKey", "-n", n, "-t", "Both", "-k", "k1"),
                "queryMsgByUniqueKey": _started("queryMsgByUniqueKey", "-n", n, "-t", "Both", "-i", uniq),
                "consumerProgress": _started("consumerProgress", "-n", n),
            }
            done = {name: p.communicate(timeout=90) for name, p in running.items()}
            codes = {name: p.returncode for name, p in running.items()}
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    for name, (out, err) in done.items():
        assert codes[name] == 1, (name, out, err)
        assert err.startswith(f"mqadmin {name}: 1 broker(s) did not answer: broker-b ({b.broker_addr}): "), (name, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (name, err)
    by_key = done["queryMsgByKey"][0].splitlines()
    assert len(by_key) == 2 and by_key[1].split()[0] == uniq, by_key
    by_uniq = done["queryMsgByUniqueKey"][0]
    assert "Topic:               Both" in by_uniq and f"UNIQ_KEY={uniq}" in by_uniq, by_uniq
    groups = [line.split()[0] for line in done["consumerProgress"][0].splitlines()[1:]]
    assert groups == ["GA"], done["consumerProgress"]
