"""The benchmarks' argument checks (bench/_args.py) and bandwidth unit (bench/store_append.py).

A zero or negative count must be a usage error (argparse: exit 2, one ``usage``/``error`` pair on
stderr, no traceback) before any store, broker or child process starts; these runs are fast because
nothing but the script's imports happens before the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# (script, arguments): every count option of every script, at zero or below.
BAD_COUNTS = [
    ("cli_start.py", ["--rounds", "0"]),
    ("sql92_bitmap.py", ["--rounds", "0"]),
    ("sql92_bitmap.py", ["--messages", "0"]),
    ("query.py", ["--queries", "0"]),
    ("query.py", ["--messages", "-1"]),
    ("query.py", ["--body", "0"]),
    ("query.py", ["--runs", "0"]),
    ("inspect_open.py", ["--reps", "0"]),
    ("inspect_open.py", ["--small-gib", "0"]),
    ("reput.py", ["--rounds", "0"]),
    ("reput.py", ["--workers", "0"]),
    ("reput.py", ["--size-mb", "-3"]),
    ("batch_model.py", ["--reps", "0"]),
    ("batch_model.py", ["--inflight", "0"]),
    ("batch_model.py", ["--seconds", "0"]),
    ("remoting.py", ["--reps", "0"]),
    ("remoting.py", ["--messages", "-5"]),
    ("store_append.py", ["--reps", "0"]),
    ("store_append.py", ["--messages", "0"]),
    ("store_append.py", ["--chunk", "-1"]),
    ("timers.py", ["--messages", "0"]),
    ("timers.py", ["--step-ms", "-1"]),
    ("recovery.py", ["--reps", "0"]),
    ("recovery.py", ["--messages", "0"]),
    ("recovery.py", ["--sample", "-1"]),
    ("rebuild.py", ["--rounds", "0"]),
    ("rebuild.py", ["--split-mb", "0"]),
    ("rebuild.py", ["--warmup-mb", "-1"]),
    ("search.py", ["--rounds", "0"]),
    ("search.py", ["--size-mb", "0"]),
    ("search.py", ["--quiet-busy", "2"]),
    ("grpc.py", ["--count", "0"]),
]


def run_script(script: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=env)


@pytest.mark.parametrize(("script", "args"), BAD_COUNTS, ids=[f"{s}{' '.join(a)}" for s, a in BAD_COUNTS])
def test_a_count_below_one_is_a_usage_error(script: str, args: list[str]) -> None:
    proc = run_script(script, args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("usage:")
    assert f"argument {args[0]}:" in proc.stderr
    assert proc.stdout == ""


def test_store_append_general_path_needs_started() -> None:
    proc = run_script("store_append.py", ["--general-path", "--messages", "10"])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "--general-path applies only with --started" in proc.stderr


def test_grpc_without_the_official_client_is_one_line_exit_1(tmp_path: Path) -> None:
    """The client is checked before the broker starts: one line, exit 1 (no ModuleNotFoundError)."""
    fake = tmp_path / "rocketmq"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'rocketmq'\", name='rocketmq')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = run_script("grpc.py", ["--count", "5"], env=env)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "official gRPC client is missing" in lines[0], proc.stderr


# ------------------------------------------------------------------------------------- unit level

@pytest.fixture
def bench_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))


def test_argument_types(bench_path: None) -> None:
    from _args import fraction, nonnegative_float, nonnegative_int, positive_float, positive_int

    assert positive_int("3") == 3 and nonnegative_int("0") == 0
    assert positive_float("0.5") == 0.5 and nonnegative_float("0") == 0.0 and fraction("1") == 1.0
    for fn, text in ((positive_int, "0"), (positive_int, "-2"), (positive_int, "x"), (positive_int, "1.5"),
                     (nonnegative_int, "-1"), (positive_float, "0"), (positive_float, "nan"),
                     (positive_float, "inf"), (nonnegative_float, "-0.1"), (fraction, "1.01"), (fraction, "-0.5")):
        with pytest.raises(argparse.ArgumentTypeError):
            fn(text)


def _store_append(bench_path: None):
    spec = importlib.util.spec_from_file_location("bench_store_append_under_test", BENCH / "store_append.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mib_per_s_is_binary_megabytes(bench_path: None) -> None:
    sa = _store_append(bench_path)
    assert sa.MIB == 2**20
    assert sa.mib_per_s(3 * 2**20, 1.5) == pytest.approx(2.0)
    assert sa.mib_per_s(10**6, 1.0) == pytest.approx(10**6 / 2**20)


def test_baseline_and_subjects_use_one_unit(bench_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page-cache baseline and the BatchCQ-side writes each report ``mib_per_s`` of the bytes they
    wrote (the baseline used MiB/s and the subjects decimal MB/s: every batchcq ratio was ~4.9% high)."""
    sa = _store_append(bench_path)
    seen: list[int] = []

    def fake(nbytes: int, seconds: float) -> float:
        seen.append(nbytes)
        return float(nbytes)

    monkeypatch.setattr(sa, "mib_per_s", fake)
    wall, cpu = sa.page_cache_write_mib_s(tmp_path, total_mib=2)
    assert seen == [2 * 2**20, 2 * 2**20] and (wall, cpu) == (2 * 2**20, 2 * 2**20)
    seen.clear()
    body = len(sa.batchcq_body())
    wall, cpu = sa.record_writes_mib_s(tmp_path, body + 200, 64 * 3)
    assert seen == [3 * body, 3 * body]


def test_rebuild_reuses_a_store_only_of_the_asked_shape(bench_path: None, tmp_path: Path) -> None:
    """bench/rebuild.py --dir reused whatever store was there: generate() only appends up to --size-mb,
    so a larger store (or one of another commitlog file size) was timed under the new labels."""
    spec = importlib.util.spec_from_file_location("bench_rebuild_under_test", BENCH / "rebuild.py")
    assert spec is not None and spec.loader is not None
    rebuild = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rebuild)

    store = rebuild.prepare_store_dir(tmp_path, 4, 1)
    rebuild.generate(store, 4, 1)
    before = sorted(p.name for p in (store / "commitlog").iterdir())
    assert rebuild.prepare_store_dir(tmp_path, 4, 1) == store  # same shape: kept
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == before
    rebuild.prepare_store_dir(tmp_path, 2, 1)  # asked smaller: generated again
    assert not store.exists()
    store.mkdir()
    (tmp_path / "bench-rebuild-shape.json").unlink()  # a store from before the marker: generated again
    rebuild.prepare_store_dir(tmp_path, 2, 1)
    assert not store.exists()


# ----------------------------------------------------------- fairness, ratios, --where, --dir, SIGTERM

def _last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("messages", [1, 2, 3])
def test_store_append_baseline_same_bytes_at_any_size(messages: int, tmp_path: Path) -> None:
    """--messages 1 or 2 reported "baseline_same_bytes": false: the check compared records (0, 1, k-1),
    three of them, and walked past the last record when fewer than three were written."""
    proc = run_script("store_append.py", ["--messages", str(messages), "--reps", "1", "--only-put",
                                          "--no-fallback", "--dir", str(tmp_path)])
    assert _last_json(proc)["baseline_same_bytes"] is True


def test_query_prints_its_ratios(tmp_path: Path) -> None:
    """The whole process against the Python start floor of the same run and against issue 17's 0.5 s
    target, named *_ratio as every benchmark's same-run comparisons are."""
    proc = run_script("query.py", ["--messages", "1", "--body", "1", "--queries", "1", "--runs", "1",
                                   "--dir", str(tmp_path)])
    out = _last_json(proc)
    assert out["process_p50_vs_target_ratio"] == pytest.approx(out["process_p50_s"] / 0.5, abs=0.01)
    assert out["process_p50_vs_python_floor_ratio"] == pytest.approx(
        out["process_p50_s"] / out["python_floor_s"], rel=0.05)


def test_search_bad_where_is_a_usage_error_before_any_work(tmp_path: Path) -> None:
    """A bad --where raised a traceback (exit 1) after the whole store (2 GiB by default) was generated."""
    work = tmp_path / "w"
    proc = run_script("search.py", ["--where", "TAGS = (", "--size-mb", "1", "--dir", str(work)])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("usage:") and "argument --where:" in proc.stderr
    assert not work.exists()


DIR_SCRIPTS = ["store_append.py", "timers.py", "inspect_open.py", "query.py", "search.py", "recovery.py",
               "rebuild.py"]


@pytest.mark.parametrize("script", DIR_SCRIPTS)
def test_dir_that_is_a_file_is_a_usage_error(script: str, tmp_path: Path) -> None:
    """A file as --dir gave a traceback (FileExistsError, NotADirectoryError) in some benches."""
    f = tmp_path / "f"
    f.write_text("x")
    proc = run_script(script, ["--dir", str(f)])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("usage:") and "argument --dir:" in proc.stderr
    assert f.read_text() == "x"


# The smallest run of each bench that once failed on a --dir that did not exist yet (FileNotFoundError).
MISSING_DIR_RUNS = [
    ("store_append.py", ["--messages", "1", "--reps", "1", "--only-put", "--no-fallback"]),
    ("timers.py", ["--messages", "1", "--seconds", "1"]),
    ("inspect_open.py", ["--small-gib", "0.001", "--large-gib", "0.002", "--reps", "1"]),
]


@pytest.mark.parametrize(("script", "args"), MISSING_DIR_RUNS, ids=[s for s, _ in MISSING_DIR_RUNS])
def test_missing_dir_is_created(script: str, args: list[str], tmp_path: Path) -> None:
    work = tmp_path / "a" / "b"
    proc = run_script(script, [*args, "--dir", str(work)])
    _last_json(proc)
    assert work.is_dir()


def test_sigterm_runs_the_cleanup_as_ctrl_c_does(tmp_path: Path) -> None:
    """Python's default SIGTERM skips ``finally``: a bench stopped by ``kill`` left its temp dir behind."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, str(BENCH / "timers.py"), "--messages", "200000"],
                            cwd=REPO, env=dict(os.environ, TMPDIR=str(tmp)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp.glob("bench-timers-*")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert list(tmp.glob("bench-timers-*")), "the bench never made its work directory"
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == []


def test_work_dir_type(bench_path: None, tmp_path: Path) -> None:
    from _args import work_dir

    assert work_dir(str(tmp_path / "x" / "y")) == tmp_path / "x" / "y" and (tmp_path / "x" / "y").is_dir()
    assert work_dir(str(tmp_path)) == tmp_path
    (tmp_path / "f").write_text("")
    for text in (str(tmp_path / "f"), str(tmp_path / "f" / "sub"), ""):
        with pytest.raises(argparse.ArgumentTypeError):
            work_dir(text)
