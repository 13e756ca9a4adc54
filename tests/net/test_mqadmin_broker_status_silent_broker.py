"""Commands that ask several brokers, with one that does not answer, print what the others answered and
name the silent one in one line (exit 1): brokerStatus -c, queryMsgByKey, queryMsgByUniqueKey,
queryMsgById and consumerProgress without -g.

Why: Apache's BrokerStatusSubCommand asks broker after broker, each in its own try/catch; here the first
broker that timed out failed the command with no output at all, so the health check an operator runs
when a cluster misbehaves showed nothing of the brokers that were fine (clusterList lists them). The same
for a key lookup: Apache's MQAdminImpl.queryMessage skips a broker that fails, so a message held on a
healthy broker is found during another broker's outage; here the lookup failed after 15 s, printing
nothing. queryMsgById with an offset msgId asks the broker that stored it (its store host) and no other,
as Apache's viewMessage does, so a silent broker elsewhere costs it nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
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
        assert mqadmin("sendMessage", "-n", n, "-t", "Both", "-p", "on b", "-k", "k2", "-b", "broker-b").returncode == 0
        wait_remote_dispatched(n, a.broker_addr)
        wait_remote_dispatched(n, b.broker_addr)
        offset_ids = {}  # key -> offset msgId (store host + commitlog offset), which queryMsgById reads directly
        for k in ("k1", "k2"):
            listed = mqadmin("queryMsgByKey", "-n", n, "-t", "Both", "-k", k, "--output", "json")
            assert listed.returncode == 0, listed.stdout + listed.stderr
            (record,) = json.loads(listed.stdout)
            offset_ids[k] = record["msgId"]
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
                # a unique key is read as an offset id naming no broker: each broker is asked, then the route
                "queryMsgById": _started("queryMsgById", "-n", n, "-t", "Both", "-i", uniq),
            }
            on_b = _started("queryMsgById", "-n", n, "-t", "Both", "-i", offset_ids["k2"])  # its store host is silent
            started = time.monotonic()
            on_a = mqadmin("queryMsgById", "-n", n, "-t", "Both", "-i", offset_ids["k1"])  # broker-a stored it
            on_a_took = time.monotonic() - started
            done = {name: p.communicate(timeout=90) for name, p in running.items()}
            codes = {name: p.returncode for name, p in running.items()}
            on_b_out, on_b_err = on_b.communicate(timeout=90)
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    # the named broker answered: nothing else was asked, so no 15 s wait on broker-b and no error
    assert on_a.returncode == 0 and on_a.stderr == "", on_a.stdout + on_a.stderr
    assert f"OffsetID:            {offset_ids['k1']}" in on_a.stdout and "KEYS=k1" in on_a.stdout, on_a.stdout
    # below broker-b's 15 s query timeout, which is what asking it would cost (the process start, beside
    # five other mqadmin processes on a loaded machine, took 10.7 s once)
    assert on_a_took < 14, on_a_took
    # the store host of k2's id does not answer: not "not found" (exit 3), but the silent broker named (exit 1)
    assert on_b.returncode == 1 and on_b_err.startswith(
        f"mqadmin queryMsgById: 1 broker(s) did not answer: broker-b ({b.broker_addr}): "), on_b_out + on_b_err
    assert len(on_b_err.strip().splitlines()) == 1 and "Traceback" not in on_b_err, on_b_err
    assert "Message not found" not in on_b_out, on_b_out  # it may well be there: not known while broker-b is silent
    for name, (out, err) in done.items():
        assert codes[name] == 1, (name, out, err)
        assert err.startswith(f"mqadmin {name}: 1 broker(s) did not answer: broker-b ({b.broker_addr}): "), (name, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (name, err)
    by_key = done["queryMsgByKey"][0].splitlines()
    assert len(by_key) == 2 and by_key[1].split()[0] == uniq, by_key
    by_uniq = done["queryMsgByUniqueKey"][0]
    assert "Topic:               Both" in by_uniq and f"UNIQ_KEY={uniq}" in by_uniq, by_uniq
    by_id = done["queryMsgById"][0]
    assert "Topic:               Both" in by_id and f"UNIQ_KEY={uniq}" in by_id and "KEYS=k1" in by_id, by_id
    assert "Message not found" not in by_id, by_id
    groups = [line.split()[0] for line in done["consumerProgress"][0].splitlines()[1:]]
    assert groups == ["GA"], done["consumerProgress"]
