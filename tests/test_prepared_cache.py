"""The on-disk cache of prepared traces (pysched.evaluation.prepared_cache).

Every test uses its own cache directory (``PYSCHED_CACHE_DIR`` set by the ``cache`` fixture;
conftest.py already keeps the session away from the user's cache).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pysched.evaluation import prepared_cache as pc
from pysched.evaluation import runner
from pysched.evaluation.runner import PreparedTrace, prepare

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "data" / "chase-small"  # 1.2 MB, one vCPU, data accesses, prepared in ~1 s
TWO = ROOT / "data" / "netserver-1mb"  # two vCPUs, prepared in ~3 s
PACKAGE = ROOT / "pysched"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv(pc.ENV_DIR, str(d))
    return d


@pytest.fixture(scope="module")
def cold_small() -> PreparedTrace:
    return prepare(SMALL, cache=False)


def _same(a, b, where: str = "prepared") -> None:
    """``a`` equals ``b`` field by field: arrays of the same type, dtype, shape and values."""
    if isinstance(a, np.ndarray):
        assert type(b) is np.ndarray, (where, type(b))
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert type(b) is dict and list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert type(a) is type(b), (where, type(a), type(b))
        assert a == b or (a != a and b != b), (where, a, b)


def _entries(cache: Path) -> list[Path]:
    return [e for e, _ in pc.entries(cache)]


def _said(lines: list[str]):
    return lambda s: lines.append(s)


@pytest.mark.parametrize("trace", [SMALL, TWO], ids=lambda p: p.name)
def test_a_warm_load_equals_a_cold_build_field_by_field(cache: Path, trace: Path) -> None:
    cold = prepare(trace, cache=False, note="n")
    said: list[str] = []
    stored = prepare(trace, note="n", progress=_said(said))
    assert any("segmenting" in s for s in said) and len(_entries(cache)) == 1
    said.clear()
    warm = prepare(trace, note="n", progress=_said(said))
    assert not any("segmenting" in s for s in said)
    assert any("read from" in s and str(cache) in s for s in said), said
    _same(cold, stored)
    _same(cold, warm)
    # the footprint is memory-mapped copy-on-write: a write stays in this process
    lines = next(iter(warm.footprint.lines.values()))
    lines[:] = 0
    _same(cold, prepare(trace, note="n"))


def test_a_warm_trace_replays_as_the_cold_one(cache: Path, cold_small) -> None:
    prepare(SMALL)
    warm = prepare(SMALL)
    runs = [runner.evaluate([t], ["linux"], [2], [1], config={"max_epochs": 2})[1]
            for t in (cold_small, warm)]
    cols = [c for c in runs[0].columns if c != "wall_s"]
    assert runs[0][cols].equals(runs[1][cols])


def _largest(entry: Path) -> Path:
    return max(entry.glob("*.npy"), key=lambda f: f.stat().st_size)


def _truncate(entry: Path) -> None:
    f = _largest(entry)
    os.truncate(f, f.stat().st_size // 2)


def _flip(entry: Path) -> None:  # same size, one byte changed
    f = _largest(entry)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))


def _missing(entry: Path) -> None:
    _largest(entry).unlink()


def _meta(entry: Path) -> None:
    m = entry / "meta.json"
    m.write_bytes(m.read_bytes()[:100])


def _stale(entry: Path) -> None:  # whole and self-consistent, but written for another key
    m = entry / "meta.json"
    doc = json.loads(m.read_text())
    doc["body"]["key"] = "0" * 64
    doc["sha256"] = hashlib.sha256(pc._canonical(doc["body"])).hexdigest()
    m.write_text(json.dumps(doc))


@pytest.mark.parametrize("damage", [_truncate, _flip, _missing, _meta, _stale],
                         ids=["truncated", "flipped-byte", "missing-file", "bad-meta", "stale"])
def test_a_damaged_entry_is_removed_and_rebuilt_never_used(cache: Path, cold_small, damage,
                                                           capsys) -> None:
    prepare(SMALL)
    (entry,) = _entries(cache)
    damage(entry)
    capsys.readouterr()
    said: list[str] = []
    again = prepare(SMALL, progress=_said(said))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(entry) in err[0] and "removed, rebuilding" in err[0], err
    assert any("segmenting" in s for s in said)
    _same(cold_small, again)
    assert _entries(cache) == [entry]  # rebuilt in its place, and whole now
    said.clear()
    _same(cold_small, prepare(SMALL, progress=_said(said)))
    assert any("read from" in s for s in said) and not capsys.readouterr().err


def test_a_changed_trace_misses_even_at_the_same_size_and_time(cache: Path, tmp_path) -> None:
    t = shutil.copytree(SMALL, tmp_path / "chase-small")
    prepare(t)
    (first,) = _entries(cache)
    # one byte of a file changed in place, its size and modification time kept
    f = t / "console.log"
    st = f.stat()
    data = bytearray(f.read_bytes())
    data[0] ^= 0x01
    f.write_bytes(bytes(data))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    said: list[str] = []
    prepare(t, progress=_said(said))
    assert any("segmenting" in s for s in said)
    (second,) = _entries(cache)  # the old entry of this directory was removed
    assert second != first


def test_parameters_and_a_prefix_view_enter_the_key(cache: Path) -> None:
    from pysched.trace import open_trace
    full = open_trace(SMALL)
    view = full.prefix_view({0: 1}, {0: 1000})
    keys = {runner._cache_slot(full, "w", 64, False).key,
            runner._cache_slot(view, "w", 64, False).key,
            runner._cache_slot(full, "w", 32, False).key,
            runner._cache_slot(full, "w", 64, True).key,
            runner._cache_slot(full, "x", 64, False).key}
    assert len(keys) == 5
    assert runner._cache_slot(full, "w", 64, False).key == \
        runner._cache_slot(open_trace(SMALL), "w", 64, False).key


def test_no_cache_neither_reads_nor_writes(cache: Path, cold_small, monkeypatch) -> None:
    _same(cold_small, prepare(SMALL, cache=False))
    assert not cache.exists()
    prepare(SMALL)
    (entry,) = _entries(cache)
    before = {f.name: f.stat().st_mtime_ns for f in entry.iterdir()}

    def refuse(*a, **k):
        raise AssertionError("the cache was used")

    monkeypatch.setattr(pc, "load", refuse)
    monkeypatch.setattr(pc, "save", refuse)
    monkeypatch.setattr(pc, "slot", refuse)
    _same(cold_small, prepare(SMALL, cache=False))
    assert {f.name: f.stat().st_mtime_ns for f in entry.iterdir()} == before


def test_commands_take_no_cache(cache: Path, tmp_path: Path, capsys) -> None:
    from pysched.cli import main
    args = ["evaluate", str(SMALL), "--policies", "linux", "--cores", "2", "--epochs", "1"]
    assert main([*args, "--no-cache", "--out", str(tmp_path / "a")]) == 0
    assert not cache.exists()
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert len(_entries(cache)) == 1
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "c")]) == 0
    assert "read from" in capsys.readouterr().err
    # every other command that prepares traces has the option
    import argparse

    from pysched.studies import ablate_command, seeds, study_command
    from pysched.sweep import command as sweep_command
    for mod, argv in [(sweep_command, ["s.toml", "--out", "o"]),
                      (ablate_command, ["t", "--policy", "linux", "--out", "o"]),
                      (study_command, ["schedtask-paper", "--out", "o"]),
                      (seeds, [])]:
        p = argparse.ArgumentParser()
        mod.add_arguments(p)
        assert p.parse_args([*argv, "--no-cache"]).no_cache is True
        assert p.parse_args(argv).no_cache is False


def test_sweep_workers_honour_no_cache(cache: Path, monkeypatch) -> None:
    from collections import OrderedDict

    from pysched.sweep import run
    monkeypatch.setattr(run, "_TRACES", OrderedDict())
    run.cached_trace(str(SMALL), cache=False)
    assert not cache.exists()
    monkeypatch.setattr(run, "_TRACES", OrderedDict())
    run.cached_trace(str(SMALL))
    assert len(_entries(cache)) == 1


def test_a_rejected_trace_is_still_refused_with_a_warm_cache(cache: Path, tmp_path, capsys):
    from pysched.cli import main
    t = shutil.copytree(SMALL, tmp_path / "chase-small")
    prepare(t)
    (t / "manifest.json").unlink()  # a capture that did not finish
    assert main(["evaluate", str(t), "--policies", "linux", "--out", str(tmp_path / "o")]) == 1
    assert "refused" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_the_cache_directory_comes_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(pc.ENV_DIR, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert pc.cache_dir() == tmp_path / "mine"
    prepare(SMALL)
    assert len(_entries(tmp_path / "mine")) == 1 and not (tmp_path / "xdg").exists()
    monkeypatch.delenv(pc.ENV_DIR)
    assert pc.cache_dir() == tmp_path / "xdg" / "pysched" / "prepared"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert pc.cache_dir() == tmp_path / "home" / ".cache" / "pysched" / "prepared"
    assert str(pc.cache_dir()) in pc.describe()


def test_the_cache_command_lists_and_clears(cache: Path, capsys) -> None:
    from pysched.cli import main
    prepare(SMALL)
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "1 prepared trace" in out and "chase-small-" in out and str(cache) in out
    assert main(["cache", "--clear"]) == 0
    assert "1 prepared trace removed" in capsys.readouterr().out and not _entries(cache)


def test_the_cache_command_prepares_ahead_and_refuses_what_check_rejects(cache: Path, tmp_path,
                                                                          capsys) -> None:
    from pysched.cli import main
    bad = shutil.copytree(SMALL, tmp_path / "unfinished")
    (bad / "manifest.json").unlink()  # a capture that did not finish: `check` rejects it
    assert main(["cache", "--prepare", str(SMALL), str(bad), "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    assert f"{SMALL}: prepared in" in out and f"{bad}: not prepared" in err
    assert len(_entries(cache)) == 1 and runner.is_prepared(SMALL)
    assert main(["cache", "--prepare", str(SMALL), "--jobs", "1"]) == 0
    assert f"{SMALL}: in the cache already" in capsys.readouterr().out
    assert len(_entries(cache)) == 1
    assert main(["cache", "--prepare", str(SMALL), "--clear"]) == 2
    assert main(["cache", "--prepare", str(SMALL), "--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert "--clear and --prepare together" in err and "--jobs 0: give 1 or more" in err


def test_the_key_covers_the_code_that_prepares(cold_small) -> None:
    """Every pysched file whose Python code runs while a trace is prepared is hashed into the
    key (:data:`SOURCES`), or is the building function itself (hashed by its source)."""
    files: set[str] = set()

    def hook(frame, event, arg):
        if event == "call":
            files.add(frame.f_code.co_filename)

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        prepare(SMALL, cache=False)  # the modules are imported already (cold_small)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    ran = {Path(f).resolve().relative_to(PACKAGE).as_posix() for f in files
           if Path(f).resolve().is_relative_to(PACKAGE)}
    hashed = {f.relative_to(PACKAGE).as_posix() for p in pc.SOURCES for f in PACKAGE.glob(p)}
    not_output = {"_jitcache.py"}  # numba's cache locators: where code is, not what it does
    assert ran - hashed - not_output == {"evaluation/runner.py"}


def _race_store(root: str, rounds: int) -> None:
    where = pc.Slot(Path(root), "k" * 64, "race", "/nowhere", {})
    value = {"a": np.arange(4 << 20, dtype=np.uint32), "b": [1, 2.5, None]}
    for _ in range(rounds):
        pc.save(where, value, ())
        pc._remove(where.path)  # and again, to race once more
    pc.save(where, value, ())


def test_concurrent_writers_never_leave_a_bad_entry(tmp_path, capsys) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_race_store, args=(str(tmp_path), 5)) for _ in range(2)]
    for p in procs:
        p.start()
    where = pc.Slot(tmp_path, "k" * 64, "race", "/nowhere", {})
    seen = 0
    while any(p.is_alive() for p in procs):
        got = pc.load(where, ())
        if got is not None:  # whatever a reader sees is whole
            seen += 1
            assert got["b"] == [1, 2.5, None] and got["a"][-1] == (4 << 20) - 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    got = pc.load(where, ())
    assert got is not None and np.array_equal(got["a"], np.arange(4 << 20, dtype=np.uint32))
    assert "removed" not in capsys.readouterr().err
    assert not list(tmp_path.glob(".tmp-*"))


def test_dead_writers_leftovers_are_swept(tmp_path) -> None:
    old, fresh = tmp_path / ".tmp-x-1-ab", tmp_path / ".tmp-y-2-cd"
    old.mkdir()
    fresh.mkdir()
    then = time.time() - 2 * pc.LEFTOVER_S
    os.utime(old, (then, then))
    where = pc.Slot(tmp_path, "a" * 64, "t", "/nowhere", {})
    assert pc.load(where, ()) is None  # a half-written entry is never looked at
    pc.save(where, {"x": np.zeros(3)}, ())
    assert not old.exists() and fresh.exists()


def test_values_the_cache_cannot_hold_are_refused_by_name(tmp_path) -> None:
    where = pc.Slot(tmp_path, "b" * 64, "t", "/nowhere", {})
    with pytest.raises(TypeError, match=r"meta\.f: cannot store a function"):
        pc.save(where, {"meta": {"f": lambda: 0}}, ())
    with pytest.raises(TypeError, match="x: an array of Python objects"):
        pc.save(where, {"x": np.array([object()])}, ())
    assert not list(tmp_path.iterdir())


def _waiting_on(lock: Path) -> bool:
    """Whether a process waits for ``lock``'s flock (a blocked request in /proc/locks)."""
    inode = f":{lock.stat().st_ino} "
    return any(line.split()[1] == "->" and inode in line
               for line in Path("/proc/locks").read_text().splitlines())


def test_a_trace_that_another_process_is_preparing_is_waited_for_not_built_again(cache: Path):
    from pysched.trace import open_trace
    tr = open_trace(SMALL)
    where = runner._cache_slot(tr, tr.manifest["workload"], 64, False)
    # a process of its own (a forked one can hang in pyarrow's threads)
    code = ("import sys; from pysched.evaluation.runner import prepare; "
            "prepare(sys.argv[1], progress=print)")
    with pc.building(where) as waited:
        assert not waited
        child = subprocess.Popen([sys.executable, "-c", code, str(SMALL)], text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not _waiting_on(cache / f".lock-{where.path.name}"):
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
            time.sleep(0.05)
        built = runner._build(SMALL, tr, tr.manifest["workload"], 64, False, lambda s: None)
        assert pc.save(where, built, runner._CACHED_CLASSES) == where.path
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.splitlines() == [
        f"{SMALL}: prepared by another process meanwhile, read from {where.path}"]
    # the lock file is no entry and goes with --clear
    assert [e for e, _ in pc.entries(cache)] == [where.path]
    assert pc.clear(cache) == 1 and not list(cache.iterdir())
