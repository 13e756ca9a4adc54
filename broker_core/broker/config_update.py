"""updateBrokerConfig: change broker config keys on a live Broker and persist them to its config file.

Why a module: RocketMQ's UPDATE_BROKER_CONFIG sets the given keys on the running broker's config
objects (BrokerConfig, MessageStoreConfig, AuthConfig: by name, as ``MixAll.properties2Object``) and
writes them to the file the broker was started with, so the change survives a restart. Values that do
not parse are refused before anything changes; the file is rewritten atomically (temp file, fsync,
rename; the old one kept as ``.bak``), keeping its other lines.

Keys that fix the layout of the store's files (file sizes, directories, index geometry) are refused
when they would change: the files already written keep their size and place, so a broker that took a
new ``mappedFileSizeConsumeQueue`` wrote new queues of another size and could not reopen its store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path

from broker_core.auth.config import AUTH_CONFIG_KEYS
from broker_core.common.java_text import java_trim
from broker_core.config_loader import (
    ConfigError,
    decode_config_bytes,
    format_property,
    parse_properties,
    read_properties_file,
    snake_to_camel,
    split_physical_lines,
    yaml_config_value,
)
from broker_core.store.config_file import atomic_write_bytes
from broker_core.store.store_config import StoreConfig

from .broker_config import BROKER_CONFIG_PATH_KEY, BrokerConfig
from .errors import InvalidParameterError, NoPermissionError

# Keys an update may never change (BrokerController's configBlackList default).
BLACK_LIST = frozenset({BROKER_CONFIG_PATH_KEY, "rocketmqHome", "configBlackList"})


def black_list(config_black_list: str) -> frozenset[str]:
    """The keys an update is refused: the default ones and the broker's own ``configBlackList``
    (``a;b``), as BrokerController reads it."""
    return BLACK_LIST | {k.strip() for k in config_black_list.split(";") if k.strip()}
# ACL 2.0's keys (AuthConfig, but brokerClusterName): only ever written to the config file, read at start.
AUTH_KEYS = frozenset(k for k in AUTH_CONFIG_KEYS if k != "brokerClusterName")
# The broker's identity and listening address: read once at start. The sockets are bound and the name
# server holds the broker under them, so a live listenPort made the broker advertise a port nothing
# listened on (unreachable, mqadmin -n too) and a live brokerName registered a second broker. Written to
# the config file, they take effect at the next start; without a file they are refused.
IDENTITY_KEYS = frozenset({"brokerName", "brokerClusterName", "brokerId", "brokerIP1", "listenPort",
                           "grpcServerPort"})
# Besides, keys Apache reads once at start: enableTransactionMetrics (BrokerMetricsManager). Here it
# decides whether the pending-half counts are kept at all; switched on live they would start from
# nothing and overwrite config/transactionMetrics with that, so it waits for the next start as well.
START_ONLY_KEYS = IDENTITY_KEYS | {"enableTransactionMetrics"}
# The store's on-disk layout: where its files are, how large each kind of file is, the index geometry,
# the consume queue extension and the timer wheel's slot width. Files already written keep what they
# were made with (a queue file of another size is refused when the store opens), so these are read at
# the first start of a store and never changed by updateBrokerConfig, neither live nor in the file.
# The storePath* keys of Apache's layout that are not settings here are refused alike.
STORE_LAYOUT_KEYS = frozenset({
    "storePathRootDir", "storePathCommitLog", "storePathConsumeQueue", "storePathIndex",
    "storePathDLedgerCommitLog", "storePathEpochFile", "storePathBrokerIdentity", "readOnlyCommitLogStorePaths",
    "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "mapperFileSizeBatchConsumeQueue",
    "mappedFileSizeTimerLog", "mappedFileSizeConsumeQueueExt", "enableConsumeQueueExt",
    "bitMapLengthConsumeQueueExt", "maxHashSlotNum", "maxIndexNum", "timerPrecisionMs",
})
_STORE_FIELDS = {f.metadata.get("key") or snake_to_camel(f.name): f.name for f in dataclasses.fields(StoreConfig)}


def updated_config(current: BrokerConfig, changes: Mapping[str, str], store_root: Path) -> BrokerConfig:
    """The config ``current`` would become; raises InvalidParameterError for a value that does not parse."""
    merged = {**current.properties, **{k: str(v) for k, v in changes.items()}}
    try:
        new = BrokerConfig.from_properties(merged, store_root)
    except (ConfigError, ValueError) as e:
        raise InvalidParameterError(f"invalid broker config: {e}") from None
    layout = changed_layout_keys(current, new, changes)
    if layout:
        raise NoPermissionError(
            f"{', '.join(layout)} cannot be changed by updateBrokerConfig: "
            f"{'it is' if len(layout) == 1 else 'they are'} part of the store's on-disk layout (file sizes, paths, "
            f"index geometry), which the files already written keep; set {'it' if len(layout) == 1 else 'them'} "
            "in the config file before the store's first start")
    return new


def start_only_refusal(current: Mapping[str, str], changes: Mapping[str, str]) -> str | None:
    """Why a broker with no config file (no brokerConfigPath: ``mqbroker`` without ``-c``) refuses
    ``changes``, given its ``current`` properties: ACL keys and a new identity or port (START_ONLY_KEYS)
    only take effect at a start, read from the file, and there is none to write them to. The same
    value again is no change. None: nothing here needs the file."""
    auth_keys = sorted(AUTH_KEYS & changes.keys())
    if auth_keys:
        # UPDATE_BROKER_CONFIG needs authentication only (as RocketMQ's): were the ACL switches and
        # identities changeable live, any signed-in user could turn authentication off
        return (f"{', '.join(auth_keys)} cannot be changed on a running broker: set it in the broker's config "
                "file and restart the broker")
    start_only = sorted(k for k in START_ONLY_KEYS & changes.keys() if str(changes[k]).strip() != current.get(k))
    if start_only:
        why = ("the broker is bound and registered under it" if IDENTITY_KEYS & set(start_only)
               else "it is read once at start")
        return (f"{', '.join(start_only)} cannot be changed on a running broker ({why}): set it in the broker's "
                "config file and restart the broker")
    return None


def update_refusal(reported: Mapping[str, str], changes: Mapping[str, str]) -> str | None:
    """Why a broker whose getBrokerConfig answered ``reported`` would refuse UPDATE_BROKER_CONFIG of
    ``changes`` (None: it would take them), judged with its own rules: the black list, ACL keys and
    identity/ports when it has no config file (no ``brokerConfigPath`` reported), a value that does
    not parse, a key of the store's layout. Why: a dry run (a playbook's --check) must not promise a
    change the broker refuses. Secrets come back masked, so they are left out unless changed."""
    from broker_core.auth.config import SECRET_KEYS

    if black_list(reported.get("configBlackList", "")) & changes.keys():
        return "Can not update config in black list."
    current = {k: v for k, v in reported.items() if k not in SECRET_KEYS}
    root = Path(reported.get("storePathRootDir") or ".")
    try:
        base: BrokerConfig | None = BrokerConfig.from_properties(current, root)
    except (ConfigError, ValueError):
        base = None  # what the broker reports does not load here (another broker's keys): it judges alone
    if base is not None:
        try:  # before the start-only rule, as the broker: a bad value is named as such
            updated_config(base, changes, root)
        except (InvalidParameterError, NoPermissionError) as e:
            return e.message
    if not reported.get(BROKER_CONFIG_PATH_KEY, "").strip():
        return start_only_refusal(reported, {k: v for k, v in changes.items() if k in reported})
    return None


def changed_layout_keys(current: BrokerConfig, new: BrokerConfig, changes: Mapping[str, str]) -> list[str]:
    """The STORE_LAYOUT_KEYS among ``changes`` whose value differs from the running one (the same value
    again, as a round trip of getBrokerConfig's output sends, is no change)."""
    out = []
    for key in sorted(STORE_LAYOUT_KEYS & changes.keys()):
        if key == "storePathRootDir":  # the store root is the one the broker opened (new's is that too)
            same = _same_path(str(changes[key]).strip(), current.store.store_path_root_dir)
        elif key == "storePathCommitLog":
            same = _same_path(new.store.commit_log_dir, current.store.commit_log_dir)
        elif key in _STORE_FIELDS:
            same = getattr(new.store, _STORE_FIELDS[key]) == getattr(current.store, _STORE_FIELDS[key])
        else:
            same = str(changes[key]).strip() == current.properties.get(key, "").strip()
        if not same:
            out.append(key)
    return out


def _same_path(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError, ValueError):
        return str(a) == str(b)


def apply_in_place(target: BrokerConfig, new: BrokerConfig, keys: Iterable[str]) -> None:
    """Set only ``keys`` on the live objects, from ``new`` (services keep their references to them);
    everything else stays as the running broker has it (ports chosen at start, the store root, ...).
    AuthConfig is not among them: ACL keys take effect at the next start (see AUTH_KEYS)."""
    wanted = set(keys)
    for part in (None, "store"):
        live = target if part is None else getattr(target, part)
        fresh = new if part is None else getattr(new, part)
        fields = {f.metadata.get("key") or snake_to_camel(f.name): f.name for f in dataclasses.fields(live)
                  if not f.name.startswith("_") and not dataclasses.is_dataclass(getattr(live, f.name))}
        hits = {fields[k]: getattr(fresh, fields[k]) for k in wanted & fields.keys()}
        if not hits:
            continue
        for name, value in hits.items():
            setattr(live, name, value)
    target.properties.update({k: v for k, v in new.properties.items() if k in wanted})


def persist_changes(path: Path, changes: Mapping[str, str]) -> None:
    """Write ``changes`` into the config file at ``path``: a properties file keeps its other lines and
    comments (every line that sets a changed key is rewritten where it stands, so a later duplicate no
    longer overrides the new value; a new key is appended), in the encoding it was read with. A YAML
    file that is a flat mapping of ``key: value`` lines is kept the same way (see _flat_yaml_update);
    other YAML (nested, multi-line values, several documents) is re-dumped, its comments lost."""
    values = {k: str(v) for k, v in changes.items()}
    if path.suffix in (".yaml", ".yml"):
        import yaml

        props = read_properties_file(path) if path.exists() else {}
        props.update(values)
        kept = _flat_yaml_update(path.read_bytes() if path.exists() else b"", values, props)
        data = kept if kept is not None else yaml.safe_dump(props, sort_keys=True, allow_unicode=True).encode("utf-8")
    else:
        text, encoding = decode_config_bytes(path.read_bytes()) if path.exists() else ("", "utf-8")
        try:
            entries = parse_properties(text, str(path))
        except ConfigError as e:
            raise InvalidParameterError(f"cannot update broker config: {e}") from None
        lines = split_physical_lines(text)
        if lines and lines[-1] == "":
            lines.pop()  # the file's final line break
        rewritten = {e.start: (e.end, format_property(e.key, values[e.key], encoding))
                     for e in entries if e.key in values}
        out: list[str] = []
        i = 0
        while i < len(lines):
            if i in rewritten:  # the whole logical line (with its continuation lines) becomes one line
                i, line = rewritten[i]
                out.append(line)
            else:
                out.append(lines[i])
                i += 1
        present = {e.key for e in entries}
        out.extend(format_property(k, v, encoding) for k, v in values.items() if k not in present)
        data = ("\n".join(out) + "\n").encode(encoding)
    atomic_write_bytes(path, data)


def _yaml_line(key: str, value: str) -> str:
    """``key: value`` as one YAML line that reads back (yaml_config_value) as ``value``: plain when YAML
    takes it as that string, number or boolean ("30", "false", "broker-a"), else quoted ("yes", which
    YAML 1.1 reads as true; "010", an octal; "", which would be no value)."""
    import yaml

    plain = f"{key}: {value}"
    try:
        loaded = yaml.safe_load(plain)
    except yaml.YAMLError:
        loaded = None
    if isinstance(loaded, dict) and list(loaded) == [key] and loaded[key] is not None \
            and not isinstance(loaded[key], (list, dict)) and yaml_config_value(loaded[key]) == value:
        return plain
    return yaml.safe_dump({key: value}, allow_unicode=True, width=float("inf")).rstrip("\n")


def _flat_yaml_update(data: bytes, values: Mapping[str, str], expected: Mapping[str, str]) -> bytes | None:
    """The YAML file ``data`` with ``values`` set, every other line and comment kept: each line setting a
    changed key is replaced where it stands (a comment after its value kept), a new key is appended.
    Only for a flat mapping: every line blank, a comment, or ``key: value`` at column 0 that is a
    mapping of one key on its own. None for any other YAML (the caller re-dumps it), and when the
    result would not read back as ``expected`` (the file's settings with ``values``)."""
    import re

    import yaml

    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    key_line = re.compile(r"[^\s#'\"\[\]{}:,&*!|>%@`-][^\s:]*:(?:[ \t].*)?")
    out: list[str] = []
    present: set[str] = set()
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            out.append(line)
            continue
        if key_line.fullmatch(line) is None:
            return None  # indented (a nested or multi-line value), a list, a directive, '---' ...
        try:
            one = yaml.safe_load(line)
        except yaml.YAMLError:
            return None
        if not isinstance(one, dict) or len(one) != 1:
            return None
        key = str(next(iter(one)))
        present.add(key)
        if key not in values:
            out.append(line)
            continue
        comment = ""
        for m in re.finditer(r"[ \t]+#", line):  # the first cut that leaves the same value is the comment
            try:
                if yaml.safe_load(line[:m.start()]) == one:
                    comment = line[m.start():]
                    break
            except yaml.YAMLError:
                continue
        out.append(_yaml_line(key, values[key]) + comment)
    out.extend(_yaml_line(k, v) for k, v in values.items() if k not in present)
    new_text = newline.join(out) + newline
    try:
        loaded = yaml.safe_load(new_text)
    except yaml.YAMLError:
        return None
    if not isinstance(loaded, dict) or \
            {str(k): yaml_config_value(v) for k, v in loaded.items() if v is not None} != \
            {k: java_trim(v) for k, v in expected.items()}:
        return None
    return (b"\xef\xbb\xbf" if bom else b"") + new_text.encode("utf-8")
