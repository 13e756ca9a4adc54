"""Broker handlers for ACL 2.0 administration: AUTH_CREATE/UPDATE/DELETE/GET/LIST_USER and _ACL (spec B.8).

Why the remark rules here: RocketMQ answers a metadata error with its message (NO_PERMISSION by
default, the code travels with the error), a body that is missing or not UserInfo/AclInfo with
SYSTEM_ERROR, and a GET of nothing with SUCCESS and no body.
"""

from __future__ import annotations

from broker_core.auth.converter import acl_from_info, acl_to_info, user_to_info
from broker_core.broker.request_context import RequestContext
from broker_core.remoting import RemotingCommand, RequestCode, ResponseCode, fastjson
from broker_core.remoting.headers import (
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)

from .broker_context import BrokerContext, BrokerHandler
from .channel import Channel
from .remoting_server import RequestError

SYSTEM_ERROR_TEXT = "An system error occurred, please try again later."


def _object_body(req: RemotingCommand, what: str) -> dict[str, object]:
    try:
        obj = fastjson.loads(req.body) if req.body else None
    except fastjson.JsonDialectError as e:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"The body of {what} is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"The body of {what} is null")
    return obj


def _str(obj: dict[str, object], key: str) -> str | None:
    v = obj.get(key)
    return v if isinstance(v, str) else None


class AuthHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.broker = ctx.broker

    def table(self) -> dict[int, BrokerHandler]:
        return {
            RequestCode.AUTH_CREATE_USER: self.create_user,
            RequestCode.AUTH_UPDATE_USER: self.update_user,
            RequestCode.AUTH_DELETE_USER: self.delete_user,
            RequestCode.AUTH_GET_USER: self.get_user,
            RequestCode.AUTH_LIST_USER: self.list_users,
            RequestCode.AUTH_CREATE_ACL: self.create_acl,
            RequestCode.AUTH_UPDATE_ACL: self.create_acl,
            RequestCode.AUTH_DELETE_ACL: self.delete_acl,
            RequestCode.AUTH_GET_ACL: self.get_acl,
            RequestCode.AUTH_LIST_ACL: self.list_acls,
        }

    async def create_user(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = UserRequestHeader.from_ext_fields(req.ext_fields)
        info = _object_body(req, "user") if req.body else {}
        username = h.username or _str(info, "username") or ""
        await self.ctx.run(self.broker.create_user, username, _str(info, "password") or "", _str(info, "userType"),
                           _str(info, "userStatus"), auth=auth)
        return req.response()

    async def update_user(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = UserRequestHeader.from_ext_fields(req.ext_fields)
        info = _object_body(req, "user")
        username = h.username or _str(info, "username") or ""
        await self.ctx.run(self.broker.update_user, username, _str(info, "password"), _str(info, "userType"),
                           _str(info, "userStatus"), auth=auth)
        return req.response()

    async def delete_user(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = UserRequestHeader.from_ext_fields(req.ext_fields)
        await self.ctx.run(self.broker.delete_user, h.username or "", auth=auth)
        return req.response()

    async def get_user(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = UserRequestHeader.from_ext_fields(req.ext_fields)
        if not (h.username or "").strip():
            return req.response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = await self.ctx.run(self.broker.get_user, h.username or "", auth=auth)
        return req.response(body=fastjson.dumps(user_to_info(user)) if user is not None else b"")

    async def list_users(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = ListUsersRequestHeader.from_ext_fields(req.ext_fields)
        users = await self.ctx.run(self.broker.list_users, h.filter or None, auth=auth)
        return req.response(body=fastjson.dumps([user_to_info(u) for u in users]) if users else b"")

    async def create_acl(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        """AUTH_CREATE_ACL and AUTH_UPDATE_ACL are the same create-or-merge (spec B.8)."""
        h = AclRequestHeader.from_ext_fields(req.ext_fields)
        info = _object_body(req, "acl")
        subject = h.subject or _str(info, "subject") or ""
        if not subject.lower().startswith("user:"):
            raise RequestError(ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_TEXT)
        acl = acl_from_info(info, subject)
        op = self.broker.create_acl if req.code == RequestCode.AUTH_CREATE_ACL else self.broker.update_acl
        await self.ctx.run(op, acl, auth=auth)
        return req.response()

    async def delete_acl(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = DeleteAclRequestHeader.from_ext_fields(req.ext_fields)
        await self.ctx.run(self.broker.delete_acl, h.subject or "", h.resource or None, h.policy_type, auth=auth)
        return req.response()

    async def get_acl(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = AclRequestHeader.from_ext_fields(req.ext_fields)
        # authorized first, then "The subject is not exist." (AuthManager.get_acl): asking whether the user
        # exists before told a caller without Cluster [Get] which usernames exist, and went unaudited
        acl = await self.ctx.run(self.broker.get_acl, h.subject or "", auth=auth)
        return req.response(body=fastjson.dumps(acl_to_info(acl)) if acl is not None else b"")

    async def list_acls(self, ch: Channel, req: RemotingCommand, auth: RequestContext) -> RemotingCommand:
        h = ListAclsRequestHeader.from_ext_fields(req.ext_fields)
        acls = await self.ctx.run(self.broker.list_acls, h.subject_filter or None, h.resource_filter or None,
                                  auth=auth)
        return req.response(body=fastjson.dumps([acl_to_info(a) for a in acls]) if acls else b"")
