"""ACL keys over UPDATE_BROKER_CONFIG on a broker with a config file: written for the next start, so
only a caller that may administer ACLs may send them.

Why: UPDATE_BROKER_CONFIG needs authentication only (as RocketMQ's). Once a broker started with -c
persists updates there (brokerConfigPath), any signed-in user could have written
authenticationEnabled=false for the next start."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.auth.model import User, UserStatus, UserType
from broker_core.broker.broker import Broker
from broker_core.broker.errors import NoPermissionError

from .conftest import small_config
from .test_acl_enforcement import ALICE, ALICE_PW, INSIDE, ROOT, ROOT_PW, _signed


def test_acl_keys_written_to_the_config_file_need_acl_administration(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKETMQ_LOG_HOME", str(tmp_path / "logs"))
    conf = tmp_path / "broker.conf"
    conf.write_text("authenticationEnabled=true\nauthorizationEnabled=true\n")
    cfg = small_config(authenticationEnabled="true", authorizationEnabled="true")
    cfg.started_with(conf)
    b = Broker(tmp_path / "store", cfg)
    try:
        b.auth_manager.create_user(ALICE, ALICE_PW)
        b.auth_manager.put_user(User(ROOT, ROOT_PW, UserType.SUPER, UserStatus.ENABLE))
        with pytest.raises(NoPermissionError):
            b.update_broker_config({"authenticationEnabled": "false"}, auth=_signed(ALICE, ALICE_PW, INSIDE))
        assert conf.read_text() == "authenticationEnabled=true\nauthorizationEnabled=true\n"
        b.update_broker_config({"maxMessageSize": "1048576"}, auth=_signed(ALICE, ALICE_PW, INSIDE))
        b.update_broker_config({"authenticationEnabled": "false"}, auth=_signed(ROOT, ROOT_PW, INSIDE))
        assert conf.read_text() == "authenticationEnabled=false\nauthorizationEnabled=true\nmaxMessageSize=1048576\n"
        assert b.config.auth.authentication_enabled  # for the next start
    finally:
        b.shutdown()
