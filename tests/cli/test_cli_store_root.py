"""Which store ``mqadmin --config`` opens: the config's storePathRootDir, as mqbroker does."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli_remote import mqadmin


def test_config_store_root_is_the_store_mqadmin_opens(tmp_path: Path) -> None:
    # mqadmin --config took the file's storePathCommitLog but not its storePathRootDir: it opened
    # ./store, unlocked, with the broker's commitlog under it (a second writer on one log).
    root, log_dir = tmp_path / "root", tmp_path / "cl"
    conf = tmp_path / "b.conf"
    conf.write_text(f"storePathRootDir={root}\nstorePathCommitLog={log_dir}\nbrokerName=bx\n")
    r = mqadmin("updateTopic", "--config", str(conf), "--create", "-c", "DefaultCluster", "-t", "T1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = mqadmin("sendMessage", "--config", str(conf), "-t", "T1", "-p", "hello", "-k", "k1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (root / "config" / "topics.json").is_file() and any(log_dir.iterdir())
    assert not (tmp_path / "store").exists()
    r = mqadmin("queryMsgByKey", "--store", str(root), "--config", str(conf), "-t", "T1", "-k", "k1", cwd=tmp_path)
    assert r.returncode == 0 and "#Message ID" in r.stdout, r.stderr
    # --store still wins over the file, as for mqbroker
    r = mqadmin("topicStatus", "--store", str(tmp_path / "other"), "--config", str(conf), "-t", "T1", cwd=tmp_path)
    assert r.returncode == 3 and "other is not a store directory" in r.stderr
