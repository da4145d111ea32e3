"""Every command refuses a trace that ``pysched check`` rejects, and checks a trace's content
once (pysched/trace/checker/verdicts.py)."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import tracefactory as tf
from pysched.cli import main
from pysched.trace import Trace, TraceRejected, preflight, preflight_all
from pysched.trace.checker import verdicts

# the module, which its function of the same name hides in the package
preflight_mod = importlib.import_module("pysched.trace.checker.preflight")


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("PYSCHED_CACHE_DIR", str(d))
    return d


def _good(root: Path) -> Path:
    path = tf.sample().write(root)
    (path / "manifest.json").write_text(json.dumps({}))
    return path


def _bad(root: Path) -> Path:
    """A trace the cheap checks pass and the full check fails: a system call return whose
    thread has no open entry (check ``syscalls``)."""
    f = tf.sample()
    f.rows["syscalls"][0][1]["thread"] = 0xFFFF888000DEAD00
    path = f.write(root)
    (path / "manifest.json").write_text(json.dumps({}))
    return path


def test_a_trace_only_the_full_check_rejects_is_refused_and_nothing_kept(tmp_path: Path,
                                                                          cache: Path) -> None:
    path = _bad(tmp_path / "bad")
    preflight_mod._cheap(path, False)  # the cheap checks alone let it through
    for call in (lambda: preflight(path), lambda: preflight_all([path, path])):
        with pytest.raises(TraceRejected, match=r"rejects the trace .*\n  syscalls syscalls v0"):
            call()
    assert not (cache / verdicts.SUBDIR).exists() or not any((cache / verdicts.SUBDIR).iterdir())


def test_a_passing_verdict_is_kept_until_a_byte_or_the_checker_changes(tmp_path: Path,
                                                                       cache: Path,
                                                                       monkeypatch) -> None:
    from pysched.trace import checker
    path = _good(tmp_path / "good")
    calls = []
    check_trace = checker.check_trace

    def counting(trace: Trace, limit: int = 20):
        calls.append(trace.path)
        return check_trace(trace, limit)
    monkeypatch.setattr(checker, "check_trace", counting)  # full_check imports it per call

    preflight(path)
    preflight(path)
    assert len(calls) == 1
    kept = list((cache / verdicts.SUBDIR).iterdir())
    assert len(kept) == 1 and kept[0].name == verdicts.verdict_path(Trace.open(path)).name

    # a changed byte of any file: another key, checked again
    (path / "manifest.json").write_text(json.dumps({}) + "\n")
    preflight(path)
    assert len(calls) == 2
    # another checker: checked again
    monkeypatch.setattr(verdicts, "checker_digest", lambda: "another checker")
    preflight(path)
    assert len(calls) == 3
    # pysched check keeps the verdict of a trace it passes
    (path / "manifest.json").write_text(json.dumps({}) + "\n\n")
    assert main(["check", str(path)]) == 0
    n = len(calls)
    preflight(path)
    assert len(calls) == n
    # --no-cache: checked, nothing read or written
    before = sorted(p.name for p in (cache / verdicts.SUBDIR).iterdir())
    preflight(path, cache=False)
    assert len(calls) == n + 1
    assert sorted(p.name for p in (cache / verdicts.SUBDIR).iterdir()) == before


@pytest.mark.parametrize("argv", [
    ["devices", "{t}"],
    ["evaluate", "{t}", "--policies", "linux", "--cores", "2", "--out", "{o}"],
    ["analyse", "{t}", "--out", "{o}"],
])
def test_commands_refuse_a_trace_the_full_check_rejects(tmp_path: Path, cache: Path, capsys,
                                                        argv: list[str]) -> None:
    path = _bad(tmp_path / "bad")
    out = tmp_path / "out"
    assert main([a.format(t=path, o=out) for a in argv]) == 1
    err = capsys.readouterr().err
    assert f"{path}: refused, `pysched check` rejects the trace" in err, err
    assert "syscalls syscalls v0" in err
    assert not out.exists()


def test_sweep_and_seeds_refuse_a_trace_the_full_check_rejects(tmp_path: Path, cache: Path,
                                                               capsys) -> None:
    bad = _bad(tmp_path / "data" / "barrier")  # seed 001's only trace
    spec = tmp_path / "sweep.toml"
    spec.write_text(f'[[grid]]\ntrace = ["{bad}"]\npolicy = ["linux"]\ncores = [2]\n'
                    'load = [1]\n')
    assert main(["sweep", str(spec), "--workers", "1", "--out", str(tmp_path / "s")]) == 1
    assert f"pysched sweep: {bad}: refused, `pysched check` rejects" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
    assert main(["seeds", "--data", str(tmp_path / "data"), "--workers", "1",
                 "--out", str(tmp_path / "seeds")]) == 1
    assert f"pysched seeds: {bad}: refused" in capsys.readouterr().err
    assert not (tmp_path / "seeds").exists()
    # a --data that is not there is refused, not summarised as every seed left out
    assert main(["seeds", "--data", str(tmp_path / "nowhere"), "--out",
                 str(tmp_path / "seeds")]) == 2
    assert "--data" in capsys.readouterr().err
