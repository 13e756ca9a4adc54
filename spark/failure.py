"""What made a Spark job fail, in one line, from the text py4j carries.

Why a module: a failed job reaches Python as one exception whose text holds the Java stack of every
task and, for a task of ours, the Python traceback of the worker. The operator needs its innermost
cause ("No space left on device"), which both the export and the rebuild front ends print.
"""

from __future__ import annotations

import re

# The last line of a Python traceback inside a worker failure: "OSError: [Errno 28] No space left on device".
_PYTHON_ERROR = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception)): (.+)$", re.MULTILINE)
_JAVA_CAUSE = re.compile(r"Caused by: ([\w.$]+): ([^\n\t]+)")
_PLAIN_IO = ("java.io.IOException", "java.io.FileNotFoundException")


def failure_cause(error: BaseException) -> str:
    """The innermost cause: a Python task's own exception when a worker raised one, else the last
    Java "Caused by", else the first line of the text."""
    text = str(error)
    if "Python worker" in text or "PythonException" in text:
        raised = [m for m in _PYTHON_ERROR.finditer(text) if not m.group(1).startswith(("org.", "java."))]
        if raised:
            return f"{raised[-1].group(1)}: {raised[-1].group(2).strip()}"
    causes = _JAVA_CAUSE.findall(text)
    if causes:
        kind, message = causes[-1]
        return message.strip() if kind in _PLAIN_IO else f"{kind}: {message.strip()}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first[:500] or type(error).__name__
