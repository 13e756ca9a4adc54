"""The one error type for "this request cannot be read as its code says" (header fields and bodies).

Why a common base: the header codec, the typed bodies and the fastjson reader each raise their own
error, and a handler may call any of them. The remoting server catches this one base in one place
and answers SYSTEM_ERROR with the error's one-line text (as a Java broker answers a header or body
that does not decode), instead of logging a traceback and leaking a Python exception name.
"""

from __future__ import annotations


class RequestDecodeError(ValueError):
    """A request's header field or body does not have the type or shape its code expects; the text
    is one line that names the field (or the body offset)."""
