"""The RocketMQ remoting protocol, pure: frames, header codecs, codes, typed headers and bodies.

Why no sockets here: the asyncio servers (broker_core/net) and our client (broker_core/client) share
every byte rule through this package, and tests can check it against the spec's vectors without a
network. Start with ``RemotingCommand``, ``encode_frame`` / ``FrameDecoder``, the ``headers`` and
``bodies`` modules, and ``fastjson`` for the Java JSON dialect.
"""

from .codes import CURRENT_VERSION, LanguageCode, RequestCode, ResponseCode, SerializeType
from .command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from .errors import RequestDecodeError
from .frame import (
    DEFAULT_FRAME_MAX_LENGTH,
    FrameDecoder,
    FrameError,
    FrameTooLargeError,
    decode_frame,
    encode_frame,
)
from .header_base import CommandHeader, HeaderError
from .header_codec import HeaderDecodeError

__all__ = [
    "CURRENT_VERSION", "DEFAULT_FRAME_MAX_LENGTH", "FLAG_ONEWAY", "FLAG_RESPONSE", "CommandHeader", "FrameDecoder",
    "FrameError", "FrameTooLargeError", "HeaderDecodeError", "HeaderError", "LanguageCode", "RemotingCommand",
    "RequestCode", "RequestDecodeError", "ResponseCode", "SerializeType", "decode_frame", "encode_frame",
]
