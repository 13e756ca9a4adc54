"""Playbook actions: each one an Admin operation (or a host operation) with a plan and an apply.

``REGISTRY`` maps the action name used in a playbook (``topic.ensure``) to its implementation.
"""

from __future__ import annotations

from playbooks.actions.base import Action
from playbooks.actions.broker_process import BrokerStart, BrokerStop
from playbooks.actions.host import FileCopy, Shell
from playbooks.actions.resources import (
    AclAbsent,
    AclEnsure,
    BrokerAddWritePerm,
    BrokerConfigAction,
    BrokerWipeWritePerm,
    GroupAbsent,
    GroupEnsure,
    TopicAbsent,
    TopicEnsure,
    TopicPerm,
    UserAbsent,
    UserEnsure,
)
from playbooks.actions.store import OffsetReset, StoreRebuild, StoreVerify, WaitLag

REGISTRY: dict[str, Action] = {a.name: a for a in (
    TopicEnsure(), TopicAbsent(), TopicPerm(), GroupEnsure(), GroupAbsent(), UserEnsure(), UserAbsent(),
    AclEnsure(), AclAbsent(), BrokerConfigAction(), OffsetReset(), StoreVerify(), StoreRebuild(), WaitLag(),
    BrokerStart(), BrokerStop(), BrokerWipeWritePerm(), BrokerAddWritePerm(), Shell(), FileCopy(),
)}
