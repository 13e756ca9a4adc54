"""Config JSON files as RocketMQ's ConfigManager keeps them.

Why this module exists: every JSON config file under ``<store>/config`` must survive a crash at any
moment (write temp, fsync, rename; the previous content is kept as ``<name>.bak`` as Java does), and
must read the Java dialect fastjson writes (unquoted integer map keys such as ``{0:250,1:251}``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("rmqops.store")

# fastjson writes Integer/Long-keyed maps with bare numeric keys: `{0:250,` or `,\n\t\t1:251`.
T = TypeVar("T")
_BARE_NUMERIC_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


class ConfigFileError(Exception):
    """A config file (and its .bak) exists but cannot be parsed."""


class ConfigWriteError(OSError):
    """A config file could not be written (a full disk, a read-only or vanished directory); the file
    still holds its previous content and no temporary file is left behind.

    Why its own type: callers that apply a change only once it is on disk (or undo it when it is not)
    catch exactly this, and its text names the file, so an operator reads "disk full: cannot write
    <store>/config/topics.json" instead of an errno."""

    def __init__(self, path: Path, cause: OSError) -> None:
        reason = cause.strerror or str(cause)
        text = f"{'disk full: ' if cause.errno in (errno.ENOSPC, errno.EDQUOT) else ''}cannot write {path}: {reason}"
        super().__init__(text)
        self.errno = cause.errno
        self.strerror = reason
        self.filename = str(path)
        self.path = path
        self.message = text

    def __str__(self) -> str:
        return self.message


def loads_java_json(text: str) -> Any:
    """Parse fastjson output, accepting unquoted integer map keys (outside string literals)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    out: list[str] = []
    # Quote bare keys only outside string literals: split on JSON strings and fix the gaps.
    pos = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"', text):
        out.append(_BARE_NUMERIC_KEY.sub(r'\1"\2"\3', text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_BARE_NUMERIC_KEY.sub(r'\1"\2"\3', text[pos:]))
    return json.loads("".join(out))


def _fastjson_value(value: Any, indent: int) -> str:
    tab = "\t"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = []
        for k, v in value.items():
            if v is None:
                continue
            key = str(k) if isinstance(k, int) and not isinstance(k, bool) else json.dumps(str(k), ensure_ascii=False)
            items.append(f"{tab * (indent + 1)}{key}:{_fastjson_value(v, indent + 1)}")
        return "{\n" + ",\n".join(items) + "\n" + tab * indent + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        items = [f"{tab * (indent + 1)}{_fastjson_value(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + tab * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def dumps_java_json(value: Any) -> str:
    """Serialize like fastjson's pretty printer: TAB indentation, no space after ':', int keys bare.

    Dict keys that are Python ints are written unquoted (Java Integer/Long-keyed maps); string keys
    are quoted. Callers order bean fields alphabetically themselves where it matters.
    """
    return _fastjson_value(value, 0)


class _PathLock:
    """One file's write lock (a class, not a bare Lock, so the registry can hold it weakly)."""

    __slots__ = ("lock", "__weakref__")

    def __init__(self) -> None:
        self.lock = threading.Lock()


_PATH_LOCKS: weakref.WeakValueDictionary[str, _PathLock] = weakref.WeakValueDictionary()
_PATH_LOCKS_GUARD = threading.Lock()

# Files read_config_json found damaged and answered from their .bak. Why remembered: the next write
# would copy the damaged file over the good .bak (the only copy of what it held) and then replace the
# damaged file itself, so the damaged bytes and the good previous version were both gone. The write
# keeps the damaged file aside instead (``<name>.corrupt.<time>``) and leaves the .bak as it is.
_LOADED_FROM_BACKUP: set[str] = set()


def _path_lock(path: Path) -> _PathLock:
    with _PATH_LOCKS_GUARD:
        key = os.path.abspath(path)
        entry = _PATH_LOCKS.get(key)
        if entry is None:
            entry = _PATH_LOCKS[key] = _PathLock()
        return entry


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, keep_backup: bool = True) -> None:
    """Write ``data`` so that ``path`` holds either the old or the new content after any crash.

    Writers of one path in this process take turns: they share ``<name>.tmp`` (a crash leaves at most
    that one file behind), and two at once made one's rename fail or, one truncating the temp file
    under the other, renamed a mix of both contents into place. (Other processes cannot write the
    same store's files: the store lock.) Which content lands last is the callers' order: a manager
    that snapshots its table outside this call holds its own lock across snapshot and write.
    """
    path = Path(path)
    entry = _path_lock(path)
    with entry.lock:
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_synced(tmp, data)
        except OSError as e:
            raise ConfigWriteError(path, e) from e
        damaged = _take_loaded_from_backup(path)
        if damaged:
            _keep_damaged_aside(path)
        elif keep_backup and path.exists():
            try:
                _copy_for_backup(path, path.with_name(path.name + ".bak"))
            except OSError:  # the backup is a courtesy: the new content still goes in whole
                pass
        try:
            os.replace(tmp, path)
        except OSError as e:
            _remove_quietly(tmp)
            raise ConfigWriteError(path, e) from e
        _fsync_dir(path.parent)


def _take_loaded_from_backup(path: Path) -> bool:
    key = os.path.abspath(path)
    with _PATH_LOCKS_GUARD:
        if key not in _LOADED_FROM_BACKUP:
            return False
        _LOADED_FROM_BACKUP.discard(key)
        return True


def _keep_damaged_aside(path: Path) -> None:
    """Copy the damaged ``path`` to ``<name>.corrupt.<time>`` before it is replaced (a copy, not a
    rename: ``path`` never disappears). The .bak it was loaded from stays the previous version."""
    if not path.exists():
        return
    stamp = time.strftime("%Y%m%d%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt.{stamp}")
    n = 0
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt.{stamp}.{n}")
    try:
        _copy_for_backup(path, aside)
    except OSError as e:
        log.warning("config file %s was damaged and could not be kept aside as %s (%s); it is replaced by the "
                    "new content, and %s.bak still holds the version it was loaded from", path, aside.name,
                    e.strerror or e, path.name)
        return
    log.warning("config file %s was damaged: kept aside as %s before writing it anew (%s.bak still holds the "
                "version it was loaded from)", path, aside.name, path.name)


def _write_synced(tmp: Path, data: bytes) -> None:
    """``data`` in ``tmp``, on disk; on failure no ``tmp`` is left (a full disk keeps its last blocks
    for what can still be written, and the next attempt starts clean)."""
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _copy_for_backup(src: Path, dst: Path) -> None:
    # Copy (not rename) so `path` never disappears, even for an instant.
    tmp = dst.with_name(dst.name + ".tmp")
    _write_synced(tmp, src.read_bytes())
    os.replace(tmp, dst)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_config_json(path: str | os.PathLike[str], value: Any) -> None:
    """Persist a config object in fastjson's dialect, atomically, keeping ``<name>.bak``."""
    atomic_write_bytes(path, dumps_java_json(value).encode("utf-8"))


# What a loader's decode step may raise for a value of the wrong shape (a list where an object is due...).
_SHAPE_ERRORS = (ConfigFileError, ValueError, TypeError, AttributeError, KeyError)


def read_config_json(path: str | os.PathLike[str], decode: Callable[[Any], T] | None = None, *,
                     previous_version: bool = True) -> T | Any | None:
    """Load a config file, falling back to ``<name>.bak`` as Java does; None when neither exists.

    ``decode`` turns the parsed JSON into what the caller keeps and raises for a wrong shape; a main
    file that cannot be read, parsed or decoded (or is empty) is damaged: the .bak is used with one
    WARNING naming both files. When no version is usable, ConfigFileError names each file and its
    problem. An empty file with no usable .bak is an error too: starting empty would silently drop
    what it held (committed offsets, topics).

    ``previous_version=False`` (the ACL files) never loads the .bak: it holds the table before the last
    change, and bringing back a deleted user or a revoked permission is worse than not starting. A
    damaged (or missing) file beside a .bak is then an error that names both.
    """
    path = Path(path)
    bak = path.with_name(path.name + ".bak")
    errors: list[str] = []
    if not previous_version and not path.exists() and bak.exists():
        raise ConfigFileError(f"cannot load config file: {path} is missing but {bak.name} exists (the version "
                              "before the last change: not loaded; copy it back to use it)")
    for candidate in (path, bak) if previous_version else (path,):
        try:
            text = candidate.read_bytes().decode("utf-8")
        except FileNotFoundError:
            continue
        except UnicodeDecodeError as e:
            errors.append(f"{candidate}: not UTF-8 text (byte {e.start})")
            continue
        except OSError as e:
            errors.append(f"{candidate}: {e.strerror or e}")
            continue
        if not text.strip():
            errors.append(f"{candidate}: empty")
            continue
        try:
            value = loads_java_json(text)
        except (json.JSONDecodeError, ValueError, RecursionError) as e:
            errors.append(f"{candidate}: not valid JSON ({e})")
            continue
        try:
            result = decode(value) if decode is not None else value
        except _SHAPE_ERRORS as e:
            errors.append(f"{candidate}: unexpected content ({e})")
            continue
        if errors:  # the main file was damaged: say so once, with the reason and what was used
            log.warning("config file %s is damaged (%s); loaded the previous version from %s (the damaged "
                        "file is kept as %s.corrupt.<time> when it is next written)", path,
                        errors[0].split(": ", 1)[1], candidate, path.name)
            with _PATH_LOCKS_GUARD:
                _LOADED_FROM_BACKUP.add(os.path.abspath(path))
        return result
    if errors:
        if not previous_version:
            hint = (f" ({bak.name}, the version before the last change, is not loaded: check it and copy it "
                    "back to use it)" if bak.exists() else "")
            raise ConfigFileError("cannot load config file: " + "; ".join(errors) + hint)
        raise ConfigFileError("cannot load config file: " + "; ".join(errors)
                              + ("" if bak.exists() else f" (no {bak.name} to fall back to)"))
    return None
