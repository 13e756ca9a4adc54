"""Host actions: ``shell`` (a command, not idempotent unless ``creates:``) and ``file.copy`` (sftp).

They run on the step's host through HostOps: this machine for a store target, the SSH host for an
SSH target. ``shell`` is reported as changed whenever it runs (it cannot know what it did), skipped
in check mode, and ok without running when the path named by ``creates:`` already exists.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from playbooks.actions.base import ActionContext, Change, Outcome, Param
from playbooks.errors import StepError

OUTPUT_TAIL = 4000


class Shell:
    name = "shell"
    params = {"cmd": Param((str,), required=True), "creates": Param((str,)),
              "timeout": Param((int, float), default=600)}
    placement = "host"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        host = ctx.host()
        creates = args.get("creates")
        if creates and host.exists(creates):
            return Outcome("ok", message=f"{creates} exists; not run")
        if check:
            return Outcome("skipped", message="shell commands are not run in check mode")
        result = host.run(args["cmd"], timeout=float(args.get("timeout") or 600))
        data = {"rc": result.rc, "stdout": result.stdout[-OUTPUT_TAIL:], "stderr": result.stderr[-OUTPUT_TAIL:]}
        if result.rc != 0:
            last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or [""]
            return Outcome("failed", message=f"command exited with {result.rc} on {host.name}: {last[0]}", data=data)
        return Outcome("changed", [Change(f"shell on {host.name}", "ran", None, args["cmd"])],
                       f"ran on {host.name}", data)


class FileCopy:
    """Copy a local file to the target host (sftp on SSH targets); idempotent by SHA-256."""

    name = "file.copy"
    params = {"src": Param((str,), required=True), "dest": Param((str,), required=True),
              "mode": Param((str, int), help="octal, e.g. '0644'")}
    placement = "host"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        src = Path(args["src"]).expanduser()
        try:
            data = src.read_bytes()
        except OSError as e:
            raise StepError(f"cannot read {src}: {e.strerror}") from None
        host = ctx.host()
        want = hashlib.sha256(data).hexdigest()
        have = host.sha256(args["dest"])
        if have == want:
            return Outcome("ok", message=f"{args['dest']} is up to date", data={"sha256": want})
        mode = args.get("mode")
        mode_bits = int(str(mode), 8) if mode is not None else None
        change = Change(f"file {args['dest']} on {host.name}", "sha256", have, want)
        if not check:
            host.put(src, args["dest"], mode_bits)
        return Outcome("changed", [change], f"{'would copy' if check else 'copied'} {src} to {args['dest']}",
                       {"sha256": want})
