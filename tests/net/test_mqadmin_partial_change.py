"""A cluster-wide mqadmin change that fails on one broker names the brokers it had already changed.

Why: ``updateTopic -c``, ``updateSubGroup -c``, ``createUser -c`` and the like change broker after
broker. When one of them does not answer (here: stopped with SIGSTOP, still registered at the name
server), the command fails there. The operator must learn that the brokers before it were changed
(Java's mqadmin has printed their success lines by then); the error used to name the failed broker only.
clusterList, the command an operator runs to see what is wrong, lists such a broker instead of failing.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from net_util import run_mqadmin as mqadmin

from tests.remoting_broker import running_broker


def test_a_change_that_fails_on_one_broker_names_the_brokers_already_changed(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as a, \
            running_broker(tmp_path / "b", broker_name="broker-b", namesrv=a.namesrv_addr) as b:
        n = a.namesrv_addr
        listed = mqadmin("clusterList", "-n", n)
        assert "broker-b" in listed.stdout, listed.stdout + listed.stderr
        os.kill(b.proc.pid, signal.SIGSTOP)  # registered, but answers nothing: brokers are changed a, then b
        try:
            # each of the three waits out its own timeout on b, and none touches what another changes
            # (topic Half, user half, nothing): run side by side, they wait once instead of three times
            with ThreadPoolExecutor(3) as pool:
                topic_f = pool.submit(mqadmin, "updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "Half")
                user_f = pool.submit(mqadmin, "createUser", "-n", n, "-c", "DefaultCluster", "-u", "half", "-p", "pw")
                health_f = pool.submit(mqadmin, "clusterList", "-n", n)
                topic, user, health = topic_f.result(), user_f.result(), health_f.result()
            on_a = mqadmin("topicRoute", "-n", n, "-t", "Half")  # after updateTopic has given up
        finally:
            os.kill(b.proc.pid, signal.SIGCONT)
    assert user.returncode == 1, user.stdout + user.stderr
    line = user.stderr.strip()
    assert b.broker_addr in line and f"already changed on {a.broker_addr}; not on the brokers after it" in line
    # updateTopic asks every broker before it writes (topic_update_problem): the silent broker is named
    # and no broker got the topic
    assert topic.returncode == 1, topic.stdout + topic.stderr
    assert b.broker_addr in topic.stderr and "nothing was changed" in topic.stderr, topic.stderr
    assert "Traceback" not in topic.stderr + user.stderr
    assert on_a.returncode == 3, on_a.stdout + on_a.stderr
    # clusterList, the health check, still lists every broker (the silent one not activated), and its exit
    # code and one line name the broker that did not answer; it used to fail with no table at all
    rows = {line.split()[1]: line.split() for line in health.stdout.splitlines()[1:]}
    assert health.returncode == 1 and set(rows) == {"broker-a", "broker-b"}, health.stdout + health.stderr
    assert rows["broker-a"][4] == "V5_3_3" and rows["broker-a"][-1] == "true" and rows["broker-b"][-1] == "false"
    assert health.stderr.startswith("mqadmin clusterList: 1 broker(s) did not answer: broker-b (")
