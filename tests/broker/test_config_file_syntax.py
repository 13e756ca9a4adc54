"""broker.conf syntax: java.util.Properties.load's rules (continuations, escapes, separators, comments),
the file's encoding (UTF-8 when it is UTF-8, else ISO-8859-1 as Java reads it), YAML nulls, and
updateBrokerConfig rewriting a file whose key appears twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.broker.broker import Broker
from broker_core.broker.broker_config import BrokerConfig
from broker_core.broker.config_update import persist_changes
from broker_core.config_loader import ConfigError, format_property, parse_properties, read_properties_file


def _props(tmp_path: Path, data: bytes, name: str = "broker.conf") -> dict[str, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return read_properties_file(path)


def test_line_continuation_joins_lines_and_drops_leading_whitespace(tmp_path: Path) -> None:
    """Java joins a line ending in an odd number of backslashes with the next; this read
    "127.0.0.1:24010;\\" and a key "127.0.0.1" instead."""
    props = _props(tmp_path, b"namesrvAddr=127.0.0.1:24010;\\\n    127.0.0.1:24011\n"
                              b"even=a\\\\\nnext=1\n"  # two backslashes: an escaped one, no continuation
                              b"odd=a\\\\\\\n  b\n"  # three: an escaped one, then a continuation
                              b"blank=x\\\n\nafter=2\n")  # an empty continued line ends the value
    assert props == {"namesrvAddr": "127.0.0.1:24010;127.0.0.1:24011", "even": "a\\", "next": "1",
                     "odd": "a\\b", "blank": "x", "after": "2"}


def test_escapes(tmp_path: Path) -> None:
    props = _props(tmp_path, b"regionId=\\u0041bc\nsmile=\\uD83D\\uDE00\ncontrol=x\\ty\\nz\\r\\f!\n"
                              b"other=\\q\\\\\\#\n")
    assert props == {"regionId": "Abc", "smile": "\U0001F600", "control": "x\ty\nz\r\f!", "other": "q\\#"}


def test_malformed_unicode_escape_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        _props(tmp_path, b"# c\nbrokerName=b\nregionId=\\u00G1\n")
    assert str(e.value).startswith(f"{tmp_path / 'broker.conf'}:3: malformed \\uxxxx escape")


def test_separators_comments_and_keys_without_values(tmp_path: Path) -> None:
    props = _props(tmp_path, b"# comment = x\n  ! also a comment\n"
                              b"brokerName broker-b\n"          # whitespace alone separates, as in Java
                              b"  listenPort : 10920\n"         # ':' with blanks around, leading blanks
                              b"a\\=b\\:c\\ d = v\n"            # escaped separators belong to the key
                              b"x : = y\n"                      # one separator; the second '=' is value
                              b"noValue\n"                      # a key alone: the empty string
                              b"trailing=  spaced  \t\n")        # String values trimmed (properties2Object)
    assert props == {"brokerName": "broker-b", "listenPort": "10920", "a=b:c d": "v", "x": "= y",
                     "noValue": "", "trailing": "spaced"}
    cfg = BrokerConfig.from_properties(props, tmp_path / "store")
    assert (cfg.broker_name, cfg.listen_port) == ("broker-b", 10920)


def test_a_comment_does_not_continue_and_a_continued_hash_is_value(tmp_path: Path) -> None:
    props = _props(tmp_path, b"# comment \\\nbrokerName=b1\nregionId=r\\\n#notacomment\n")
    assert props == {"brokerName": "b1", "regionId": "r#notacomment"}


def test_only_java_line_terminators_split_lines(tmp_path: Path) -> None:
    """\\f is whitespace to Properties, not a line break (str.splitlines splits there); \\r and \\r\\n end lines."""
    props = _props(tmp_path, b"a=1\r\nb=2\rc=x\x0cy\n\x0cd=4")
    assert props == {"a": "1", "b": "2", "c": "x\x0cy", "d": "4"}


def test_latin1_file_reads_as_java_reads_it(tmp_path: Path) -> None:
    """A Latin-1 byte (even in a comment) was a UnicodeDecodeError traceback in mqbroker."""
    props = _props(tmp_path, b"# Configuraci\xf3n\nbrokerName=b1\nregionId=Espa\xf1a\n")
    assert props == {"brokerName": "b1", "regionId": "Espa\u00f1a"}


def test_utf8_file_keeps_its_characters(tmp_path: Path) -> None:
    """Valid UTF-8 is read as UTF-8 (Java would show "EspaÃ±a"); a BOM is not part of the first key."""
    props = _props(tmp_path, "\ufeffbrokerName=b1\nregionId=España\n".encode())
    assert props == {"brokerName": "b1", "regionId": "España"}


def test_yaml_key_without_value_keeps_the_default(tmp_path: Path) -> None:
    """``msgTraceTopicName:`` became the topic name "None"."""
    path = tmp_path / "broker.yml"
    path.write_text("brokerName: by\nmsgTraceTopicName:\nlistenPort: 10930\nautoCreateTopicEnable: false\n")
    assert read_properties_file(path) == {"brokerName": "by", "listenPort": "10930", "autoCreateTopicEnable": "false"}
    cfg = BrokerConfig.load(path, tmp_path / "store")
    assert cfg.msg_trace_topic_name == "RMQ_SYS_TRACE_TOPIC" and cfg.listen_port == 10930


def test_yaml_not_utf8_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.yaml"
    path.write_bytes(b"brokerName: b\xf3\n")
    with pytest.raises(ConfigError, match=r"broker\.yaml: not UTF-8 text \(byte 13\)"):
        read_properties_file(path)


def test_format_property_round_trips() -> None:
    for key, value in [("a=b c:d", " lead\\ing\ttab"), ("#k", "!v"), ("k", "\u20ac\U0001F600"), ("plain", "")]:
        for encoding in ("utf-8", "iso-8859-1"):
            line = format_property(key, value, encoding)
            line.encode(encoding)
            [entry] = parse_properties(line)
            assert (entry.key, entry.value) == (key, value), (line, encoding)


def test_update_rewrites_every_occurrence_of_a_duplicated_key(tmp_path: Path) -> None:
    """The first of two fileReservedTime lines was rewritten; the later one still won at the next load."""
    conf = tmp_path / "broker.conf"
    conf.write_text("# retention\nfileReservedTime=48\nbrokerName=b1\n! again\nfileReservedTime = 24\n")
    broker = Broker(tmp_path / "store", BrokerConfig.load(conf, tmp_path / "store"))
    try:
        assert broker.config.store.file_reserved_time == 24
        broker.update_broker_config({"fileReservedTime": "12"}, persist_to=conf)
    finally:
        broker.shutdown()
    assert conf.read_text().splitlines() == ["# retention", "fileReservedTime=12", "brokerName=b1", "! again",
                                             "fileReservedTime=12"]
    assert BrokerConfig.load(conf, tmp_path / "store").store.file_reserved_time == 12


def test_update_rewrites_a_continued_line_and_keeps_the_file_encoding(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"# Configuraci\xf3n\nnamesrvAddr=127.0.0.1:9876;\\\n   127.0.0.1:9877\nregionId=Espa\xf1a\n")
    persist_changes(conf, {"namesrvAddr": "127.0.0.1:9878", "msgTraceTopicName": "T\u20ac",
                           "storePathCommitLog": "C:\\store\\commitlog"})
    assert conf.read_bytes() == (b"# Configuraci\xf3n\nnamesrvAddr=127.0.0.1:9878\nregionId=Espa\xf1a\n"
                                 b"msgTraceTopicName=T\\u20AC\nstorePathCommitLog=C:\\\\store\\\\commitlog\n")
    assert read_properties_file(conf) == {"namesrvAddr": "127.0.0.1:9878", "regionId": "Espa\u00f1a",
                                          "msgTraceTopicName": "T\u20ac", "storePathCommitLog": "C:\\store\\commitlog"}
