"""Audit log lines, ACL 1.0 migration and broker property loading."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from small_fs import fill

from broker_core.auth import (
    Acl,
    Action,
    AuthConfig,
    AuthConfigError,
    AuthenticationContext,
    AuthenticationError,
    AuthorizationContext,
    AuthorizationError,
    Decision,
    PolicyType,
    Strategy,
    UserType,
)
from broker_core.auth.audit import AuditLog
from broker_core.auth.signer import sign_remoting

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - broken
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - "%RETRY%groupC=SUB"
  - accessKey: rocketmq2
    secretKey: "12345679"
    admin: true
  - accessKey: existing
    secretKey: from-v1-file
    topicPerms:
      - topicZ=PUB
"""


def read_log(path: Path) -> str:
    for handler in logging.Logger.manager.loggerDict.values():
        if isinstance(handler, logging.Logger):
            for h in handler.handlers:
                h.flush()
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_audit_lines_in_the_documented_form(make_manager, audit_path: Path) -> None:
    m = make_manager()
    m.create_user("rocketmq", "secret-pw-42")
    m.create_acl(Acl.of("User:rocketmq", ["Topic:TPTEST"], ["Pub"]))
    fields = sign_remoting({"topic": "TPTEST"}, None, "rocketmq", "secret-pw-42")
    m.authenticate(AuthenticationContext.from_remoting(fields, None, 10))
    bad = dict(fields, Signature="eMX/+tH/7Bc0TObtDYMcK9Ls+xx=")
    with pytest.raises(AuthenticationError):
        m.authenticate(AuthenticationContext.from_remoting(bad, None, 10))
    m.authorize(AuthorizationContext("User:rocketmq", "Topic:TPTEST", "Pub", "192.168.0.2:6000", 10))
    with pytest.raises(AuthorizationError):
        m.authorize(AuthorizationContext("User:rocketmq", "Topic:GIDTEST", "Sub", "192.168.0.2", 10))
    m.audit.flush()
    log = read_log(audit_path)
    assert f"[AUTHENTICATION] User:rocketmq is authenticated success with Signature = {fields['Signature']}." in log
    assert "[AUTHENTICATION] User:rocketmq is authenticated failed with Signature = eMX/+tH/7Bc0TObtDYMcK9Ls+xx=." in log
    assert ("[AUTHORIZATION] Subject = User:rocketmq is Allow Action = Pub from sourceIp = 192.168.0.2 "
            "on resource = Topic:TPTEST for request = 10.") in log
    assert ("[AUTHORIZATION] Subject = User:rocketmq is Deny Action = Sub from sourceIp = 192.168.0.2 "
            "on resource = Topic:GIDTEST for request = 10.") in log
    assert "secret-pw-42" not in log


def test_a_request_without_a_signature_is_audited_with_null_as_java_prints_it(make_manager, audit_path: Path) -> None:
    m = make_manager()
    m.create_user("rocketmq", "secret-pw-42")
    with pytest.raises(AuthenticationError):
        m.authenticate(AuthenticationContext.from_remoting({"topic": "T", "AccessKey": "rocketmq"}, None, 10))
    m.audit.flush()
    log = read_log(audit_path)
    assert "[AUTHENTICATION] User:rocketmq is authenticated failed with Signature = null." in log, log
    assert "None" not in log


def test_an_access_key_with_a_newline_cannot_forge_an_audit_line(make_manager, audit_path: Path) -> None:
    """The AccessKey is the caller's text, written before it is checked: a newline in it used to start a
    second line of the caller's choosing (a fake "success" for the Super user)."""
    m = make_manager()
    forged = "x\n2026-11-27 [AUTHENTICATION] User:rocketmq is authenticated success with Signature = s"
    fields = sign_remoting({"topic": "T"}, None, forged, "whatever")
    with pytest.raises(AuthenticationError):
        m.authenticate(AuthenticationContext.from_remoting(fields, None, 10))
    m.audit.flush()
    lines = read_log(audit_path).splitlines()
    assert len(lines) == 1 and "User:x\\n2026-11-27 [AUTHENTICATION] User:rocketmq" in lines[0], lines
    assert lines[0].endswith("is authenticated failed with Signature = " + fields["Signature"] + ".")


def test_passwords_never_in_logs_errors_or_reprs(make_manager, audit_path: Path, caplog) -> None:
    secret = "Sup3r-Secret-Value"
    config = AuthConfig(
        authentication_enabled=True, authorization_enabled=True,
        init_authentication_user='{"username":"admin","password":"' + secret + '"}',
    )
    caplog.set_level(logging.DEBUG)
    m = make_manager(config)
    m.create_user("alice", secret + "2")
    texts = [repr(m.get_user("admin")), repr(m.get_user("alice")), repr(config.init_user())]
    for ctx_fields in ({"AccessKey": "admin", "Signature": "x"}, {"AccessKey": "alice"}, {}):
        with pytest.raises(AuthenticationError) as info:
            m.authenticate(AuthenticationContext.from_remoting(ctx_fields, None, 10))
        texts.append(str(info.value))
    with pytest.raises(AuthorizationError) as info:
        m.authorize(AuthorizationContext("User:alice", "Topic:T", "Pub", "1.1.1.1"))
    texts.append(str(info.value))
    with pytest.raises(AuthConfigError) as cfg_info:
        AuthConfig(init_authentication_user='{"username":"admin","password":"' + secret + '"')  # broken JSON
    texts.append(str(cfg_info.value))
    m.audit.flush()
    texts += [read_log(audit_path), caplog.text]
    for text in texts:
        assert secret not in text


def test_audit_file_rotates(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "auth_audit.log", max_bytes=300, backup_count=2)
    for i in range(20):
        log.authorization(None, Decision.DENY, [Action.PUB], "1.1.1.1", Acl.of("User:x", "Topic:T", "Pub").policies[0]
                          .entries[0].resource, str(i))
    log.close()
    assert (tmp_path / "auth_audit.log.1").exists()
    assert not (tmp_path / "auth_audit.log.3").exists()


def test_audit_file_on_a_full_disk_drops_lines_saying_so_once(small_fs: Path, caplog, capsys) -> None:
    """Every line written while the disk is full printed "--- Logging error ---", a traceback and the
    line to stderr, once per request. Now the broker's log says once that lines are dropped and, when
    the file takes lines again, how many were; a line the disk cut short is ended before the next."""
    path = small_fs / "logs" / "auth_audit.log"
    audit = AuditLog(path)
    audit.authentication("alice", "sig-before", True)
    audit.flush()
    fill(small_fs / "filler")
    try:
        for _ in range(5):
            audit.authentication("alice", "s" * 6000, True)  # more than the page cache buffer takes
        audit.flush()
        assert "Logging error" not in capsys.readouterr().err
        assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "rmqops.auth"] == [
            ("ERROR", f"audit log {path} cannot be written: No space left on device; audit lines are dropped "
                      "until it can")]
    finally:
        (small_fs / "filler").unlink()
    audit.authentication("alice", "sig-after", True)
    audit.close()
    assert caplog.records[-1].getMessage() == (f"audit log {path} is written again; 5 line(s) were dropped while "
                                               "it could not be (No space left on device)")
    lines = path.read_text().splitlines()
    assert lines[0].endswith("Signature = sig-before.") and lines[-1].endswith("Signature = sig-after.")
    assert all(line.startswith("20") and "[AUTHENTICATION] User:alice" in line for line in lines)


def test_migration_from_plain_acl_yml(make_manager, tmp_path: Path) -> None:
    home = tmp_path / "rocketmq_home"
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    (home / "conf" / "acl" / "tools.yml").write_text("accessKey: tool\nsecretKey: tool-secret\n")
    (home / "conf" / "acl" / "extra.yml").write_text("accounts:\n  - accessKey: extra\n    secretKey: extra-secret\n")
    config = AuthConfig(authorization_enabled=True, migrate_auth_from_v1_enabled=True)

    # A user that already exists in ACL 2.0 is never overwritten, nor are its policies.
    first = make_manager(AuthConfig())
    first.create_user("existing", "v2-password")
    first.create_acl(Acl.of("User:existing", ["Topic:mine"], ["Sub"]))
    first.close()

    m = make_manager(config, rocketmq_home=home)
    report = m.migration_report
    assert report is not None
    assert sorted(report.users_created) == ["RocketMQ", "extra", "rocketmq2"]
    assert report.users_skipped == ["existing"]
    assert m.get_user("existing").password == "v2-password"
    assert [e.resource.key for e in m.get_acl("User:existing").policies[0].entries] == ["Topic:mine"]
    assert m.get_user("tool") is None  # tools.yml is the client's credentials, not an account
    assert m.get_user("rocketmq2").user_type is UserType.SUPER
    assert m.get_user("RocketMQ").user_type is UserType.NORMAL and m.get_user("RocketMQ").password == "12345678"

    acl = m.get_acl("User:RocketMQ")
    custom = {e.resource.key: ([a.value for a in e.actions], e.decision.value, e.source_ips)
              for e in acl.policy(PolicyType.CUSTOM).entries}
    assert custom == {
        "Topic:topicA": (["All"], "Deny", ()),
        "Topic:topicB": (["Pub", "Sub"], "Allow", ()),
        "Topic:topicC": (["Sub"], "Allow", ()),
        "Group:groupA": (["All"], "Deny", ()),
        "Group:groupB": (["Pub", "Sub"], "Allow", ()),
        "Group:groupC": (["Sub"], "Allow", ()),
    }
    default = {e.resource.key: ([a.value for a in e.actions], e.decision.value)
               for e in acl.policy(PolicyType.DEFAULT).entries}
    assert default == {"Topic:*": (["All"], "Deny"), "Group:*": (["Sub"], "Allow")}
    assert any("whiteRemoteAddress of RocketMQ" in w for w in report.whitelists_not_migrated)
    assert any("globalWhiteRemoteAddresses" in w for w in report.whitelists_not_migrated)
    assert m.get_acl("User:rocketmq2") is None

    # The migrated policies behave as in 1.0: unlisted topics fall to defaultTopicPerm=DENY.
    ok = AuthorizationContext("User:RocketMQ", "Topic:topicB", "Pub", "192.168.0.9")
    assert m.authorize(ok).allowed
    with pytest.raises(AuthorizationError, match="the decision is deny"):
        m.authorize(AuthorizationContext("User:RocketMQ", "Topic:other", "Sub", "192.168.0.9"))
    assert m.authorize(AuthorizationContext("User:RocketMQ", "Group:any", "Sub", "192.168.0.9")).allowed

    # Running again changes nothing.
    again = make_manager(config, rocketmq_home=home)
    assert again.migration_report.users_created == []
    assert again.get_acl("User:RocketMQ") == acl


def test_config_from_properties() -> None:
    props = {
        "brokerClusterName": "C1",
        "authenticationEnabled": "true",
        "authorizationEnabled": "TRUE",
        "authenticationStrategy": "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy",
        "authorizationStrategy": "stateless",
        "initAuthenticationUser": '{"username":"rocketmq","password":"12345678"}',
        "innerClientAuthenticationCredentials": '{"accessKey":"rocketmq","secretKey":"12345678"}',
        "migrateAuthFromV1Enabled": "false",
        "authenticationWhitelist": "10, 11",
        "statefulAuthorizationCacheExpiredSecond": "5",
        "listenPort": "10911",
    }
    cfg = AuthConfig.from_properties(props)
    assert cfg.authentication_enabled and cfg.authorization_enabled and cfg.cluster_name == "C1"
    assert cfg.authentication_strategy is Strategy.STATEFUL and cfg.authorization_strategy is Strategy.STATELESS
    assert cfg.init_user().username == "rocketmq" and cfg.inner_client_user().password == "12345678"
    assert cfg.authentication_whitelist_codes() == {"10", "11"}
    assert cfg.stateful_authorization_cache_expired_second == 5
    assert AuthConfig.from_properties(cfg.to_properties()) == cfg
    assert AuthConfig() == AuthConfig.from_properties({})
    for bad, message in [
        ({"authenticationEnabled": "yes"}, "authenticationEnabled must be true or false"),
        ({"authorizationStrategy": "sometimes"}, "authorizationStrategy must be stateless or stateful"),
        ({"userCacheMaxNum": "many"}, "userCacheMaxNum must be an integer"),
        ({"initAuthenticationUser": '{"username":"x"}'}, "initAuthenticationUser has no password"),
        ({"innerClientAuthenticationCredentials": "[1]"}, "must be a JSON object"),
    ]:
        with pytest.raises(AuthConfigError, match=message):
            AuthConfig.from_properties(bad)
