"""User and ACL administration: validation messages, guards, merge rules, persistence, copies."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from broker_core.auth import (
    Acl,
    AuthConfig,
    AuthManager,
    AuthMetadataError,
    AuthStoreError,
    PolicyType,
    UserStatus,
    UserType,
)
from broker_core.auth.converter import acl_from_info, acl_to_info
from broker_core.common.response_code import ResponseCode


def test_user_crud_and_list_filter(make_manager) -> None:
    m = make_manager()
    alice = m.create_user("alice", "pw-alice-1")
    assert (alice.user_type, alice.user_status) == (UserType.NORMAL, UserStatus.ENABLE)
    m.create_user("bob", "pw-bob-1", "normal", "DISABLE")
    assert m.get_user("bob").user_status is UserStatus.DISABLE
    assert [u.username for u in m.list_users()] == ["alice", "bob"]
    assert [u.username for u in m.list_users("li")] == ["alice"]
    updated = m.update_user("alice", password="  ", user_status="disable")
    assert updated.password == "pw-alice-1" and updated.user_status is UserStatus.DISABLE
    m.update_user("alice", password="pw-alice-2")
    assert m.get_user("alice").password == "pw-alice-2"
    m.delete_user("alice")
    m.delete_user("alice")  # absent: still fine
    assert m.get_user("alice") is None


@pytest.mark.parametrize(
    ("call", "message", "code"),
    [
        (lambda m: m.create_user(" ", "x"), "The username is blank", ResponseCode.INVALID_PARAMETER),
        (lambda m: m.create_user("alice", "again"), "The user is existed", ResponseCode.NO_PERMISSION),
        (lambda m: m.create_user("carol", " "), "password can not be blank", ResponseCode.NO_PERMISSION),
        (lambda m: m.update_user("nobody", password="x"), "The user is not exist", ResponseCode.NO_PERMISSION),
        (lambda m: m.create_user("carol", "pw", "Root"), "unknown UserType 'Root'", ResponseCode.NO_PERMISSION),
    ],
)
def test_user_validation_messages(make_manager, call, message: str, code: int) -> None:
    m = make_manager()
    m.create_user("alice", "pw-alice-1")
    with pytest.raises(AuthMetadataError) as info:
        call(m)
    assert message in info.value.message and info.value.code == code
    assert "pw-alice-1" not in str(info.value)


def test_super_users_are_guarded_from_normal_callers(make_manager) -> None:
    m = make_manager()
    m.create_user("root", "pw-root-1", UserType.SUPER)
    m.create_user("alice", "pw-alice-1")
    with pytest.raises(AuthMetadataError, match="The super user can only be create by super user") as info:
        m.create_user("evil", "pw", "Super", caller="alice")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    with pytest.raises(AuthMetadataError, match="can only be update by super user"):
        m.update_user("root", password="stolen", caller="alice")
    with pytest.raises(AuthMetadataError, match="can only be update by super user"):
        m.update_user("alice", user_type="Super", caller="alice")
    with pytest.raises(AuthMetadataError, match="can only be delete by super user"):
        m.delete_user("root", caller="alice")
    m.create_user("ops", "pw-ops-1", "Super", caller="root")
    m.delete_user("ops", caller="root")


def test_acl_create_merges_and_delete_by_resource(make_manager) -> None:
    m = make_manager()
    m.create_user("alice", "pw-alice-1")
    m.create_acl(Acl.of("User:alice", ["Topic:T", "Group:G"], ["Pub", "Sub"], "Allow", ["10.0.0.0/24"]))
    m.update_acl(Acl.of("User:alice", ["Topic:T", "Topic:abc*"], ["Pub"], "Deny"))
    acl = m.get_acl("User:alice")
    entries = {e.resource.key: e for e in acl.policy(PolicyType.CUSTOM).entries}
    assert list(entries) == ["Topic:T", "Group:G", "Topic:abc*"]  # replaced in place, new appended
    assert entries["Topic:T"].decision.value == "Deny" and entries["Topic:T"].source_ips == ()
    assert entries["Group:G"].source_ips == ("10.0.0.0/24",)
    m.delete_acl("User:alice", "Topic:T")
    assert [e.resource.key for e in m.get_acl("User:alice").policies[0].entries] == ["Group:G", "Topic:abc*"]
    m.delete_acl("User:alice", "Group:G")
    m.delete_acl("User:alice", "Topic:abc*")
    assert m.get_acl("User:alice") is None  # no policy left: ACL gone
    m.create_acl(Acl.of("User:alice", ["Topic:T"], ["Pub"]))
    m.delete_acl("User:alice")
    assert m.get_acl("User:alice") is None


def test_acl_validation_messages(make_manager) -> None:
    m = make_manager()
    m.create_user("alice", "pw-alice-1")
    cases = [
        (lambda: m.create_acl(Acl.of("User:ghost", ["Topic:T"], ["Pub"])), "The subject of User:ghost is not exist."),
        (lambda: Acl.of("User:alice", ["Topic:T"], ["Any"]), "The actions can not be Any."),
        (lambda: Acl.of("User:alice", ["Topic:T"], []), "The actions is empty."),
        (lambda: Acl.of("User:alice", ["Topic:T"], ["Pub"], "Allow", ["10.0.0.0/33"]), "The source ip is invalid."),
        (lambda: Acl.of("User:alice", ["Topic:T"], ["Pub"], "Allow", ["not-an-ip"]), "The source ip is invalid."),
        (lambda: m.delete_acl("User:ghost"), "The subject is not exist."),
        (lambda: m.delete_acl("User:alice"), "The acl is not exist."),
        (lambda: m.get_acl("User:ghost"), "The subject is not exist."),
        (lambda: acl_from_info({"subject": "User:alice", "policies": []}), "The policies is empty."),
        (lambda: acl_from_info({"subject": "User:alice", "policies": [{"entries": []}]}), "The policy entries is empty."),
        (lambda: acl_from_info({"subject": "User:alice", "policies": [{"entries": [
            {"resource": "Queue:x", "actions": ["Pub"], "decision": "Allow"}]}]}), "The resource is null."),
        (lambda: acl_from_info({"subject": "User:alice", "policies": [{"entries": [
            {"resource": "Topic:x", "actions": ["Pub"], "decision": "Maybe"}]}]}), "The decision is null or illegal."),
    ]
    for call, message in cases:
        with pytest.raises(AuthMetadataError) as info:
            call()
        assert info.value.message == message
    with pytest.raises(AuthMetadataError) as info:
        m.create_acl(Acl.of("alice", ["Topic:T"], ["Pub"]))  # subject without User: prefix
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == "An system error occurred, please try again later."


def test_acl_info_round_trip_drops_unknown_actions() -> None:
    info = {"subject": "user:alice", "policies": [{"entries": [
        {"resource": "topic:abc*", "actions": ["pub", "Fly", "SUB"], "sourceIps": ["::1"], "decision": "allow"}]}]}
    acl = acl_from_info(info)
    assert acl_to_info(acl) == {"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [
        {"resource": "Topic:abc*", "actions": ["Pub", "Sub"], "sourceIps": ["::1"], "decision": "Allow"}]}]}


def test_list_acls_filters(make_manager) -> None:
    m = make_manager()
    for name in ("alice", "bob"):
        m.create_user(name, f"pw-{name}-1")
        m.create_acl(Acl.of(f"User:{name}", ["Topic:orders", "Group:billing"], ["Sub"]))
    assert [a.subject.key for a in m.list_acls()] == ["User:alice", "User:bob"]
    assert [a.subject.key for a in m.list_acls("bob")] == ["User:bob"]
    only_topics = m.list_acls(resource_filter="orders")
    assert [[e.resource.key for e in a.policies[0].entries] for a in only_topics] == [["Topic:orders"]] * 2
    assert m.list_acls(resource_filter="nothing") == []
    # Quirk: a subject key containing the resource filter keeps all entries.
    assert len(m.list_acls(resource_filter="alice")[0].policies[0].entries) == 2


def test_deleting_a_user_deletes_its_acl(make_manager) -> None:
    m = make_manager()
    m.create_user("alice", "pw-alice-1")
    m.create_acl(Acl.of("User:alice", ["Topic:T"], ["Pub"]))
    m.delete_user("alice")
    assert m.list_acls() == []


def test_state_survives_reopening(make_manager, tmp_path: Path) -> None:
    m = make_manager()
    m.create_user("alice", "pw-alice-1", "Normal", "disable")
    m.create_acl(Acl.of("User:alice", ["Topic:abc*"], ["Pub", "Sub"], "Deny", ["10.0.0.0/8"]))
    reopened = make_manager()
    assert reopened.get_user("alice") == m.get_user("alice")
    assert reopened.get_acl("User:alice") == m.get_acl("User:alice")
    users_file = tmp_path / "store" / "config" / "users.json"
    assert users_file.is_file() and (tmp_path / "store" / "config" / "acls.json").is_file()
    assert stat.S_IMODE(os.stat(users_file).st_mode) == 0o600  # it holds secret keys


def test_corrupt_users_file_is_a_clear_error_and_is_not_overwritten(make_manager, tmp_path: Path) -> None:
    config_dir = tmp_path / "store" / "config"
    config_dir.mkdir(parents=True)
    corrupt = b'{"users": {"alice": {"username": "alice", "passw'
    (config_dir / "users.json").write_bytes(corrupt)
    with pytest.raises(AuthStoreError, match=r"cannot read users file .*users\.json"):
        make_manager(AuthConfig(init_authentication_user='{"username":"rocketmq","password":"12345678"}'))
    assert (config_dir / "users.json").read_bytes() == corrupt
    assert not (config_dir / "users.json.bak").exists()
    # Valid JSON of the wrong shape is refused the same way.
    (config_dir / "users.json").write_text(json.dumps({"users": {"x": {"username": "x"}}}))
    with pytest.raises(AuthStoreError, match="password can not be blank"):
        make_manager()


def test_init_users_are_created_once_as_super(make_manager) -> None:
    config = AuthConfig(
        authentication_enabled=True,
        init_authentication_user='{"username":"rocketmq","password":"12345678"}',
        inner_client_authentication_credentials='{"accessKey":"inner","secretKey":"inner-secret"}',
    )
    m = make_manager(config)
    assert m.get_user("rocketmq").user_type is UserType.SUPER
    assert m.get_user("inner").is_super and m.get_user("inner").password == "inner-secret"
    m.update_user("rocketmq", password="changed-later")
    again = make_manager(config)
    assert again.get_user("rocketmq").password == "changed-later"  # never reset at restart


def test_copy_users_and_acls_between_stores(make_manager) -> None:
    src: AuthManager = make_manager(store="a")
    dst: AuthManager = make_manager(store="b")
    src.create_user("alice", "pw-alice-1")
    src.create_user("bob", "pw-bob-1", "Super")
    src.create_acl(Acl.of("User:alice", ["Topic:T"], ["Pub"]))
    dst.create_user("alice", "old-password", user_status="disable")
    dst.create_user("alice2", "pw-x")
    dst.create_acl(Acl.of("User:alice", ["Group:G"], ["Sub"]))
    assert src.copy_users_to(dst) == ["alice", "bob"]
    assert dst.get_user("alice") == src.get_user("alice")
    assert dst.get_user("bob").is_super
    assert src.copy_acls_to(dst) == ["User:alice"]
    keys = [e.resource.key for e in dst.get_acl("User:alice").policies[0].entries]
    assert keys == ["Group:G", "Topic:T"]  # merged, nothing lost on the target
    assert src.copy_users_to(dst, ["bob"]) == ["bob"]
    with pytest.raises(AuthMetadataError, match="The user ghost is not exist"):
        src.copy_users_to(dst, ["ghost"])
    # an ACL whose user the target has not: nothing is copied, not the ACLs before it either
    src.create_user("carol", "pw-carol-1")
    src.create_acl(Acl.of("User:carol", ["Topic:C"], ["Sub"]))
    src.create_acl(Acl.of("User:alice", ["Topic:U"], ["Pub"]))
    with pytest.raises(AuthMetadataError, match="The subject of User:carol is not exist"):
        src.copy_acls_to(dst, ["User:alice", "User:carol"])
    assert [e.resource.key for e in dst.get_acl("User:alice").policies[0].entries] == ["Group:G", "Topic:T"]


@pytest.mark.parametrize("damage", [b"", b"{garbage"])
def test_a_damaged_users_file_never_brings_back_a_deleted_user_from_its_bak(make_manager, tmp_path: Path,
                                                                           damage: bytes) -> None:
    """users.json.bak is the table before the last change: loading it when users.json is damaged brought
    a deleted Super user back with its old secret. The damage stops the start instead, naming both files;
    the same for acls.json (a revoked permission), and for a users.json gone beside its .bak."""
    m = make_manager()
    m.create_user("alice", "pw-alice")
    m.create_acl(Acl.of("User:alice", ["Topic:t"], ["Pub"], "Allow"))
    m.delete_acl("User:alice")
    m.create_user("fired", "old-secret", "Super")
    m.delete_user("fired")
    config_dir = tmp_path / "store" / "config"
    assert b"fired" in (config_dir / "users.json.bak").read_bytes()
    (config_dir / "users.json").write_bytes(damage)
    with pytest.raises(AuthStoreError, match=r"users\.json\.bak, the version before the last change, is not loaded"):
        make_manager()
    (config_dir / "users.json").unlink()
    with pytest.raises(AuthStoreError, match=r"users\.json is missing but users\.json\.bak exists"):
        make_manager()
    (config_dir / "users.json.bak").unlink()
    (config_dir / "acls.json").write_bytes(damage)
    with pytest.raises(AuthStoreError, match=r"acls\.json\.bak, the version before the last change, is not loaded"):
        make_manager()
