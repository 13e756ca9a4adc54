"""Integer config keys are held to their Java type's range (int or long), wherever a value comes from.

Why: a key RocketMQ holds as a Java ``int`` took 10^22 here. ``updateBrokerConfig -k maxMessageSize -v
99999999999999999999999`` said success and every send failed after it (struct.error in the broker);
``flushIntervalCommitLog`` that large in a config file killed the commitlog flush thread at start
(time_t overflow) while the broker reported boot success. Java's Integer.parseInt refuses such values;
here they are refused with one line naming the key and its range, and nothing changes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker_core.config_loader import ConfigError
from broker_core.store.store_config import StoreConfig
from tests.net.net_util import run_mqadmin as mqadmin
from tests.remoting_broker import running_broker

INT = "[-2147483648, 2147483647]"
LONG = "[-9223372036854775808, 9223372036854775807]"
POSITIVE_INT = "[1, 2147483647]"

# key, value past its Java type, the range the error names (store keys with a least value name it too)
PAST_THE_TYPE = [
    ("maxMessageSize", "99999999999999999999999", POSITIVE_INT),  # MessageStoreConfig int
    ("maxMsgsNumBatch", "99999999999999999999", POSITIVE_INT),
    ("flushIntervalConsumeQueue", "-99999999999999999999", POSITIVE_INT),
    ("transactionCheckMax", "2147483648", INT),  # BrokerConfig int
    ("flushDelayOffsetInterval", "9223372036854775808", LONG),  # MessageStoreConfig long
    ("shortPollingTimeMills", "-9223372036854775809", LONG),  # BrokerConfig long
]


def _live_all(n: str, addr: str, keys: list[str]) -> dict[str, str]:
    """The running broker's values of ``keys``, from one getBrokerConfig (it prints every key)."""
    r = mqadmin("getBrokerConfig", "-n", n, "-b", addr)
    assert r.returncode == 0, r.stderr
    values = {}
    for key in keys:
        m = re.search(rf"^{key}\s+=\s+(\S*)$", r.stdout, re.M)
        assert m is not None, r.stdout
        values[key] = m.group(1)
    return values


def _live(n: str, addr: str, key: str) -> str:
    return _live_all(n, addr, [key])[key]


def test_a_running_broker_refuses_a_value_past_the_keys_java_type(tmp_path: Path) -> None:
    with running_broker(tmp_path / "a") as b:
        n, addr = b.namesrv_addr, b.broker_addr
        conf = tmp_path / "a" / "broker.conf"
        before = conf.read_bytes()
        keys = [key for key, _, _ in PAST_THE_TYPE]
        live_before = _live_all(n, addr, keys)
        # every one is refused and changes nothing, so they can be asked side by side: the wait is that of
        # the mqadmin processes' starts, which overlap
        with ThreadPoolExecutor(3) as pool:
            refused = list(pool.map(lambda kv: mqadmin("updateBrokerConfig", "-n", n, "-c", "DefaultCluster",
                                                       "-k", kv[0], "-v", kv[1]), PAST_THE_TYPE))
        for (key, value, bounds), r in zip(PAST_THE_TYPE, refused, strict=True):
            assert r.returncode == 1, r.stdout + r.stderr
            assert "success" not in r.stdout
            assert r.stderr.strip().splitlines() == [
                f"mqadmin updateBrokerConfig: invalid broker config: {key}={value}: must be an integer in {bounds}"]
        assert _live_all(n, addr, keys) == live_before
        assert conf.read_bytes() == before
        sent = mqadmin("sendMessage", "-n", n, "-t", "CT", "-p", "hello")
        assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stdout + sent.stderr
        # the ends of the ranges are values Java takes
        for key, value in (("maxMessageSize", "2147483647"), ("flushDelayOffsetInterval", "9223372036854775807")):
            r = mqadmin("updateBrokerConfig", "-n", n, "-c", "DefaultCluster", "-k", key, "-v", value)
            assert r.returncode == 0, r.stderr
            assert _live(n, addr, key) == value
        sent = mqadmin("sendMessage", "-n", n, "-t", "CT", "-p", "hello")
        assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stdout + sent.stderr
        assert "Traceback" not in b.log_text()


def test_a_store_directory_update_refuses_it_and_leaves_the_config_file(tmp_path: Path) -> None:
    store, conf = tmp_path / "zs", tmp_path / "z.conf"
    conf.write_text("brokerName=broker-z\nlistenPort=33791\n")
    made = mqadmin("updateTopic", "--store", str(store), "--create", "--config", str(conf), "-c", "DefaultCluster",
                   "-t", "A1")
    assert made.returncode == 0, made.stderr
    before = conf.read_bytes()
    for key, value, bounds in PAST_THE_TYPE:
        r = mqadmin("updateBrokerConfig", "--store", str(store), "--config", str(conf), "-c", "DefaultCluster",
                    "-k", key, "-v", value)
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.strip().splitlines() == [
            f"mqadmin updateBrokerConfig: invalid broker config: {key}={value}: must be an integer in {bounds}"]
        assert conf.read_bytes() == before


@pytest.mark.parametrize("suffix", [".conf", ".yaml"])
@pytest.mark.parametrize(("key", "value", "bounds"), [
    *PAST_THE_TYPE[:1],
    ("flushIntervalCommitLog", "99999999999999999999999", POSITIVE_INT),
    ("brokerId", "9223372036854775808", LONG),
    ("scanNotActiveBrokerInterval", "99999999999999999999", LONG),  # NamesrvConfig long (mqbroker's own)
    ("registerNameServerPeriod", "2147483648", INT),
])
def test_mqbroker_refuses_a_config_file_value_past_the_keys_java_type(tmp_path: Path, suffix: str, key: str,
                                                                    value: str, bounds: str) -> None:
    conf = tmp_path / f"broker{suffix}"
    conf.write_text(f"{key}: {value}\n" if suffix == ".yaml" else f"{key}={value}\n")
    done = subprocess.run([sys.executable, "-m", "broker_core.mqbroker", "-c", str(conf), "--store",
                           str(tmp_path / "s"), "--listenPort", "0", "--namesrvPort", "0", "--grpc-port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"mqbroker: config file {conf}: {key}={value}: must be an integer in {bounds}"]


def test_a_store_config_built_in_code_is_held_to_the_ranges_too() -> None:
    with pytest.raises(ConfigError, match=re.escape(f"maxMessageSize=2147483648: must be an integer in {POSITIVE_INT}")):
        StoreConfig(max_message_size=2**31)
    with pytest.raises(ConfigError, match=re.escape(f"timerMaxDelaySec=-2147483649: must be an integer in {INT}")):
        StoreConfig(timer_max_delay_sec=-(2**31) - 1)
    assert StoreConfig(flush_delay_offset_interval=2**63 - 1).flush_delay_offset_interval == 2**63 - 1


@pytest.mark.parametrize("key", ["reviveInterval", "maxPopPollingSize", "popLongPollingForceNotifyInterval",
                                 "transactionCheckInterval", "transactionMetricFlushInterval", "transactionTimeOut"])
def test_the_pop_and_transaction_keys_java_holds_as_long_take_a_long(key: str) -> None:
    """These BrokerConfig keys are Java longs (PopConfig and TransactionConfig carry them): a value past
    the int range (here ~12.7 days past it, in ms) was refused as past a Java int; past a long it is."""
    from broker_core.broker.broker_config import BrokerConfig

    BrokerConfig.from_properties({key: str(2 ** 40)})
    with pytest.raises(ConfigError, match=re.escape(f"{key}={2 ** 63}: must be an integer in")):
        BrokerConfig.from_properties({key: str(2 ** 63)})
