"""Host actions: ``shell`` (a command, not idempotent unless ``creates:``) and ``file.copy`` (sftp).

They run on the step's host through HostOps: this machine for a store target, the SSH host for an
SSH target. ``shell`` is reported as changed whenever it runs (it cannot know what it did), skipped
in check mode, and ok without running when the path named by ``creates:`` already exists.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from playbooks.actions.base import ActionContext, Change, HostOps, Outcome, Param, seconds
from playbooks.errors import StepError

OUTPUT_TAIL = 4000


class Shell:
    name = "shell"
    params = {"cmd": Param((str,), required=True), "creates": Param((str,)),
              "timeout": Param((int, float), default=600, parse=seconds)}
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


def parse_mode(value: Any) -> int:
    """A file mode as Ansible takes it: a string of octal digits ("0644", "644", "0o644"), or an int
    YAML already decoded (unquoted ``0644`` is YAML 1.1 octal, 420 = 0o644). Symbolic modes ("u+rw")
    depend on the file's current mode, so they are refused rather than guessed."""
    if isinstance(value, bool):
        raise ValueError(f"must be an octal file mode like \"0644\", got {value!r}")
    if isinstance(value, int):
        if 0o777 < value <= 777 and set(str(value)) <= set("01234567"):
            # `mode: 644` unquoted is the decimal number 644 (mode 01204), Ansible's classic trap
            raise ValueError(f"{value} is the decimal number {value} (mode {value:#o}); write \"0{value}\"")
        if not 0 <= value <= 0o7777:
            raise ValueError(f"must be a file mode between 0 and 07777, got {value}")
        return value
    text = str(value).strip()
    digits = text[2:] if text[:2] in ("0o", "0O") else text
    if not digits or len(digits) > 5 or any(c not in "01234567" for c in digits) or int(digits, 8) > 0o7777:
        raise ValueError(f"must be an octal file mode like \"0644\" (symbolic modes are not supported), "
                         f"got {text!r}")
    return int(digits, 8)


class FileCopy:
    """Copy a local file to the target host (sftp on SSH targets); idempotent by SHA-256 and mode."""

    name = "file.copy"
    params = {"src": Param((str,), required=True), "dest": Param((str,), required=True),
              "mode": Param((str, int), help="octal, e.g. '0644'", parse=parse_mode)}
    placement = "host"

    def run(self, ctx: ActionContext, args: dict[str, Any], check: bool) -> Outcome:
        src = Path(args["src"]).expanduser()
        try:
            data = src.read_bytes()
        except OSError as e:
            raise StepError(f"cannot read {src}: {e.strerror}") from None
        host = ctx.host()
        dest = args["dest"]
        mode = parse_mode(args["mode"]) if args.get("mode") is not None else None
        try:
            return self._copy(host, src, data, dest, mode, check)
        except IsADirectoryError:
            # found while planning, so --check does not promise a copy the real run must refuse
            raise StepError(f"dest {dest} on {host.name} is a directory; dest: must name the file to write") from None

    def _copy(self, host: HostOps, src: Path, data: bytes, dest: str, mode: int | None, check: bool) -> Outcome:
        want = hashlib.sha256(data).hexdigest()
        have = host.sha256(dest)
        what = f"file {dest} on {host.name}"
        changes = [] if have == want else [Change(what, "sha256", have, want)]
        current_mode = host.mode(dest) if have is not None and mode is not None else None
        if current_mode is not None and current_mode != mode:
            changes.append(Change(what, "mode", f"{current_mode:04o}", f"{mode:04o}"))
        if not changes:
            return Outcome("ok", message=f"{dest} is up to date", data={"sha256": want})
        if have != want:
            if not check:
                host.put(src, dest, mode)
            message = f"{'would copy' if check else 'copied'} {src} to {dest}"
        else:  # same content, another mode: only the mode changes (as Ansible's copy does)
            assert mode is not None
            if not check:
                host.chmod(dest, mode)
            message = f"{'would set' if check else 'set'} mode {mode:04o} on {dest}"
        return Outcome("changed", changes, message, {"sha256": want})
