"""updateSubGroup and deleteSubGroup under ACL 2.0 need only what Apache's commands need.

Why: both used to read the group's config first (to merge attributes, to say "not found"), which
needs Group [Get]; Apache's send only UPDATE_AND_CREATE_SUBSCRIPTIONGROUP / DELETE_SUBSCRIPTIONGROUP,
so an account granted just Update (or just Delete) on the group was refused. The attribute merge is
the broker's now, so a group's stored attributes must survive an update that names none.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.connect import open_remote_admin
from mqadmin.transport.base import SubscriptionGroupInfo
from tests.cli.test_cli_acl_admin_fixes import SUPER, acl_conf, as_super, mqadmin
from tests.remoting_broker import BrokerProcess, running_broker


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("acl-group")), acl_conf()) as b:
        yield b


def _account(b: BrokerProcess, name: str, group: str, action: str) -> tuple[str, ...]:
    """A user allowed only ``action`` on Group:``group``; the mqadmin options that sign as it."""
    as_super(b, "createUser", "-c", "DefaultCluster", "-u", name, "-p", f"{name}pw")
    as_super(b, "createAcl", "-c", "DefaultCluster", "-s", f"User:{name}", "-r", f"Group:{group}",
             "-a", action, "-d", "Allow")
    return ("-n", b.namesrv_addr, "--ak", name, "--sk", f"{name}pw")


def _stored(b: BrokerProcess, group: str) -> SubscriptionGroupInfo | None:
    return open_remote_admin(b.namesrv_addr, access_key=SUPER[0], secret_key=SUPER[1]).get_sub_group(group)


def test_update_with_only_group_update_keeps_the_stored_attributes(secured: BrokerProcess) -> None:
    b = secured
    # a group with an attribute (mqadmin refuses every key, as RocketMQ supports none: set over the API)
    open_remote_admin(b.namesrv_addr, access_key=SUPER[0], secret_key=SUPER[1]).update_sub_group(
        SubscriptionGroupInfo("GU", attributes={"+team": "ops"}))
    who = _account(b, "updater", "GU", "Update")
    r = mqadmin("updateSubGroup", *who, "-b", b.broker_addr, "-g", "GU", "-r", "5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"create subscription group to {b.broker_addr} success.\n"), r.stdout
    assert r.stdout.endswith("attributes={}}\n"), r.stdout  # the config sent, as Apache's prints it
    stored = _stored(b, "GU")
    assert stored is not None and stored.retry_max_times == 5
    assert stored.attributes == {"team": "ops"}  # merged by the broker: none given, they stay
    # the account still may not read the group: the command no longer needed to
    denied = mqadmin("getConsumerConfig", *who, "-g", "GU")
    assert denied.returncode != 0


def test_delete_with_only_group_delete_and_not_found_still_said(secured: BrokerProcess) -> None:
    b = secured
    as_super(b, "updateSubGroup", "-b", b.broker_addr, "-g", "GD")
    who = _account(b, "deleter", "GD", "Delete")
    r = mqadmin("deleteSubGroup", *who, "-b", b.broker_addr, "-g", "GD")
    assert (r.returncode, r.stdout) == (0, f"delete subscription group [GD] from broker [{b.broker_addr}] success.\n"), \
        r.stderr
    assert _stored(b, "GD") is None
    again = mqadmin("deleteSubGroup", *who, "-b", b.broker_addr, "-g", "GD")
    assert again.returncode == 3 and again.stdout == "", again
    assert "subscription group [GD] does not exist" in again.stderr



def test_delete_in_a_cluster_needs_no_get_on_the_retry_and_dlq_topics(secured: BrokerProcess) -> None:
    """-c also deletes the group's %RETRY%/%DLQ% topics, directly as Apache's adminExt.deleteTopic does:
    reading their configs first needed Get, so an account allowed only to delete them was refused.
    Under ACL 2.0 %RETRY%G is the group's resource and %DLQ%G a topic (Apache's authorization
    builder), so deleting both needs Delete on Group:G and on Topic:%DLQ%G; nothing else."""
    b = secured
    as_super(b, "updateSubGroup", "-b", b.broker_addr, "-g", "GDC")
    as_super(b, "updateTopic", "-b", b.broker_addr, "-t", "%RETRY%GDC", "-r", "1", "-w", "1")
    as_super(b, "createUser", "-c", "DefaultCluster", "-u", "clusterdeleter", "-p", "clusterdeleterpw")
    as_super(b, "createAcl", "-c", "DefaultCluster", "-s", "User:clusterdeleter",
             "-r", "Group:GDC,Topic:%DLQ%GDC", "-a", "Delete", "-d", "Allow")
    who = ("-n", b.namesrv_addr, "--ak", "clusterdeleter", "--sk", "clusterdeleterpw")
    r = mqadmin("deleteSubGroup", *who, "-c", "DefaultCluster", "-g", "GDC")
    assert (r.returncode, r.stdout) == (
        0, f"delete subscription group [GDC] from broker [{b.broker_addr}] in cluster [DefaultCluster] success.\n"), \
        r.stderr
    assert _stored(b, "GDC") is None
    gone = mqadmin("topicStatus", "-n", b.namesrv_addr, "--ak", SUPER[0], "--sk", SUPER[1], "-t", "%RETRY%GDC")
    assert gone.returncode == 3, gone.stdout + gone.stderr


def test_delete_in_a_cluster_refused_on_the_dlq_topic_says_the_group_is_gone(secured: BrokerProcess) -> None:
    """Delete on Group:GDX only: the group and its %RETRY% topic (the group's resource under ACL 2.0) are
    deleted, %DLQ%GDX (a Topic resource) is refused. As Apache's command, which prints that failure and
    returns: exit 0, the success line, and a one-line warning naming the topic left behind."""
    b = secured
    as_super(b, "updateSubGroup", "-b", b.broker_addr, "-g", "GDX")
    who = _account(b, "groupdeleter", "GDX", "Delete")
    r = mqadmin("deleteSubGroup", *who, "-c", "DefaultCluster", "-g", "GDX")
    assert (r.returncode, r.stdout) == (
        0, f"delete subscription group [GDX] from broker [{b.broker_addr}] in cluster [DefaultCluster] success.\n"), r
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Topic:%DLQ%GDX" in line, line
    assert line.startswith("mqadmin deleteSubGroup: warning: subscription group GDX deleted, but topic %DLQ%GDX not"), \
        line
    assert _stored(b, "GDX") is None
