"""getNamesrvConfig / updateNamesrvConfig (Apache's GET_NAMESRV_CONFIG 319 and UPDATE_NAMESRV_CONFIG 318):
a name server reports the settings it really uses as properties text, takes the ones that can change
while it runs (held to the ranges its start-up holds them to), refuses its black list and start-only
keys in one line, and writes a change to the -c file it was started with, so a restart keeps it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import LoopThread
from net_util import Mqbroker, RawClient, run_mqadmin

from broker_core.net.namesrv import NameServer, NamesrvConfig
from broker_core.remoting import RequestCode, ResponseCode


def config_of(out: str, addr: str) -> dict[str, str]:
    """One name server's block of getNamesrvConfig's text: Apache's "%-50s=  %s" lines under its header."""
    lines = out.splitlines()
    start = lines.index(f"============{addr}============") + 1
    block: dict[str, str] = {}
    for line in lines[start:]:
        key, sep, value = line.partition("=  ")
        if line.startswith("============") or not sep:  # the next block, or a failed name server's line
            break
        assert len(key) == 50, line
        block[key.strip()] = value
    return block


@pytest.fixture
def procs() -> Iterator[list[Mqbroker]]:
    started: list[Mqbroker] = []
    yield started
    for p in started:
        p.stop()


def start_namesrv(procs: list[Mqbroker], where: Path, conf: Path | None = None) -> Mqbroker:
    p = Mqbroker(where, "--namesrv-only", config=conf, expect_broker=False)
    procs.append(p)
    assert p.namesrv_addr, p.output()
    return p


def test_get_reports_what_the_name_server_uses_and_update_persists_to_its_file(tmp_path: Path,
                                                                               procs: list[Mqbroker]) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("# ops: name server\nscanNotActiveBrokerInterval=7000\nenableAllTopicList=true\n")
    ns = start_namesrv(procs, tmp_path / "s", conf)
    addr = ns.namesrv_addr or ""
    r = run_mqadmin("getNamesrvConfig", "-n", addr)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"============{addr}============"
    got = config_of(r.stdout, addr)
    assert got["scanNotActiveBrokerInterval"] == "7000"
    assert got["listenPort"] == addr.rpartition(":")[2]
    assert got["brokerChannelExpiredTime"] == "120000"
    assert got["enableAllTopicList"] == "true"
    assert got["configStorePath"] == str(conf.resolve())
    assert got["kvConfigPath"] == str(tmp_path / "s" / "namesrv" / "kvConfig.json")
    assert got["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    # Apache keys this name server has no use for are not reported as if they applied
    assert got["orderMessageEnable"] == "false"  # Apache's default: routes carry no orderTopicConf
    assert not {"rocketmqHome", "clusterTest", "serverWorkerThreads",
                "deleteTopicWithBrokerRegistration"} & got.keys()

    r = run_mqadmin("updateNamesrvConfig", "-n", addr, "-k", "scanNotActiveBrokerInterval", "-v", "3000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"update name server config success![{addr}]\nscanNotActiveBrokerInterval : 3000\n"
    assert config_of(run_mqadmin("getNamesrvConfig", "-n", addr).stdout, addr)["scanNotActiveBrokerInterval"] == "3000"
    # the file keeps its other lines; the key's line is rewritten where it stands
    assert conf.read_text() == "# ops: name server\nscanNotActiveBrokerInterval=3000\nenableAllTopicList=true\n"

    r = run_mqadmin("updateNamesrvConfig", "-n", addr, "-k", "enableAllTopicList", "-v", "false")
    assert r.returncode == 0, r.stderr
    r = run_mqadmin("topicList", "-n", addr)  # the running name server took it at once
    assert r.returncode == 1 and "disable" in r.stderr
    r = run_mqadmin("updateNamesrvConfig", "-n", addr, "-k", "orderMessageEnable", "-v", "true")
    assert r.returncode == 0, r.stderr

    ns.stop()
    again = start_namesrv(procs, tmp_path / "s", conf)  # a restart reads the file: the changes stay
    got = config_of(run_mqadmin("getNamesrvConfig", "-n", again.namesrv_addr or "").stdout, again.namesrv_addr or "")
    assert got["scanNotActiveBrokerInterval"] == "3000" and got["enableAllTopicList"] == "false"
    assert got["orderMessageEnable"] == "true"


@pytest.mark.parametrize(("key", "value", "why"), [
    ("kvConfigPath", "/tmp/elsewhere.json", "Can not update config in black list: kvConfigPath"),
    ("configStorePath", "/tmp/x.properties", "Can not update config in black list: configStorePath"),
    ("listenPort", "1", "listenPort cannot be changed on a running name server"),
    ("brokerChannelExpiredTime", "5000", "brokerChannelExpiredTime cannot be changed on a running name server"),
    ("scanNotActiveBrokerInterval", "0", "scanNotActiveBrokerInterval=0: must be an integer in [1, "),
    ("enableAllTopicList", "maybe", "enableAllTopicList: expected true or false, got 'maybe'"),
    ("orderMessageEnable", "sometimes", "orderMessageEnable: expected true or false, got 'sometimes'"),
    ("noSuchKey", "1", "unknown name server config key noSuchKey"),
    # our brokers register a topic change with only that topic: with this switch on, the name server
    # would drop every other route of the broker until its next full registration
    ("deleteTopicWithBrokerRegistration", "true", "unknown name server config key deleteTopicWithBrokerRegistration"),
])
def test_update_refusals_change_nothing(tmp_path: Path, procs: list[Mqbroker], key: str, value: str,
                                        why: str) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("scanNotActiveBrokerInterval=7000\n")
    ns = start_namesrv(procs, tmp_path / "s", conf)
    addr = ns.namesrv_addr or ""
    before = run_mqadmin("getNamesrvConfig", "-n", addr).stdout
    r = run_mqadmin("updateNamesrvConfig", "-n", addr, "-k", key, "-v", value)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert why in r.stderr and addr in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert run_mqadmin("getNamesrvConfig", "-n", addr).stdout == before
    assert conf.read_text() == "scanNotActiveBrokerInterval=7000\n"


def test_each_name_server_of_n_and_one_down_fails_naming_it(tmp_path: Path, procs: list[Mqbroker]) -> None:
    a = start_namesrv(procs, tmp_path / "a").namesrv_addr or ""
    down_proc = start_namesrv(procs, tmp_path / "b")
    down = down_proc.namesrv_addr or ""
    r = run_mqadmin("getNamesrvConfig", "-n", f"{a};{down}")
    assert r.returncode == 0, r.stderr
    assert config_of(r.stdout, a)["listenPort"] != config_of(r.stdout, down)["listenPort"]
    down_proc.stop()

    r = run_mqadmin("getNamesrvConfig", "-n", f"{a};{down}")
    assert r.returncode == 1
    assert config_of(r.stdout, a)["scanNotActiveBrokerInterval"] == "5000"  # the live one still shown
    assert f"get name server config of [{down}] failed" in r.stdout
    assert down in r.stderr and len(r.stderr.strip().splitlines()) == 1

    r = run_mqadmin("updateNamesrvConfig", "-n", f"{a};{down}", "-k", "scanNotActiveBrokerInterval", "-v", "4000")
    assert r.returncode == 1
    assert r.stdout.splitlines()[:2] == [f"update name server config success![{a}]", "scanNotActiveBrokerInterval : 4000"]
    assert f"update name server config of [{down}] failed" in r.stdout
    assert down in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert config_of(run_mqadmin("getNamesrvConfig", "-n", a).stdout, a)["scanNotActiveBrokerInterval"] == "4000"


def test_store_mode_says_the_config_is_the_name_server_s(tmp_path: Path) -> None:
    for args in (("getNamesrvConfig",), ("updateNamesrvConfig", "-k", "scanNotActiveBrokerInterval", "-v", "1")):
        r = run_mqadmin(*args, "--store", str(tmp_path / "store"), "--create")
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "a store directory has no name server; use -n <namesrv>" in r.stderr


def test_without_a_config_file_the_change_is_live_and_the_wire_answer_is_properties() -> None:
    loop = LoopThread()
    ns = NameServer(NamesrvConfig(listen_port=0))
    try:
        loop.run(ns.start())
        c = RawClient(f"127.0.0.1:{ns.port}")
        try:
            r = c.call(RequestCode.GET_NAMESRV_CONFIG)
            assert r.code == ResponseCode.SUCCESS
            assert f"listenPort={ns.port}\n" in r.body.decode() and "configStorePath=\n" in r.body.decode()
            r = c.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"scanNotActiveBrokerInterval=250\n")
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert ns.config.scan_not_active_broker_interval == 250
            r = c.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"configBlackList=\n")
            assert r.code == ResponseCode.NO_PERMISSION
        finally:
            c.close()
    finally:
        loop.run(ns.stop())
        loop.close()
