"""RemotingCommand: one request or response of the remoting protocol (spec A.3/A.4).

Why a plain mutable dataclass: the servers and the client build a command, fill ``ext_fields``
(typed headers convert to and from them, see ``headers``), sign it, and hand it to ``frame`` for
the bytes. Nothing here knows about sockets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codes import CURRENT_VERSION, LanguageCode, ResponseCode, SerializeType

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: LanguageCode = LanguageCode.PYTHON
    version: int = CURRENT_VERSION
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(cls, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"", *,
                opaque: int = 0, oneway: bool = False,
                serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
        return cls(code, opaque, FLAG_ONEWAY if oneway else 0, None, dict(ext_fields or {}), body,
                   serialize_type=serialize_type)

    def response(self, code: int = ResponseCode.SUCCESS, remark: str | None = None,
                 ext_fields: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        """The answer to this request: same opaque and serialize type, RESPONSE bit set (spec A.4)."""
        return RemotingCommand(int(code), self.opaque, FLAG_RESPONSE, remark, dict(ext_fields or {}), body,
                               LanguageCode.PYTHON, CURRENT_VERSION, self.serialize_type)
