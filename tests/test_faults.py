"""Fault injection on small real traces: every broken trace is named, never analysed as if whole.

Each case damages a copy of a shipped trace the way a crash, a disk or a careless copy would,
and checks what ``pysched check`` says and that ``analyse``/``evaluate`` refuse it before any
long work (through :func:`pysched.trace.preflight`, which both run first). The README section
"Faults and bad input" lists the same cases.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysched.cli import main
from pysched.trace import TraceError, TraceRejected, preflight, preflight_all
from pysched.trace import checker as check_cli
from pysched.trace.schema import TABLES

ROOT = Path(__file__).resolve().parents[1]
FIND = ROOT / "data" / "find"
SMALL = ROOT / "data" / "dss-mem"


def _copy(src: Path, dst: Path) -> Path:
    if not (src / "manifest.json").is_file():
        pytest.fail(f"the shipped trace {src} is missing")
    shutil.copytree(src, dst)
    return dst


def _check(path: Path) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    check_cli.add_arguments(parser)
    out = io.StringIO()
    return check_cli.run(parser.parse_args([str(path), "--limit", "3"]), out=out), out.getvalue()


def _refused(path: Path, *words: str) -> str:
    """``preflight`` refuses ``path`` and ``check`` fails it, both naming ``words``."""
    with pytest.raises(TraceError) as err:
        preflight(path)
    status, out = _check(path)
    assert status == 1
    for w in words:
        assert w in str(err.value), (w, str(err.value))
        assert w in out, (w, out)
    return str(err.value)


# data/find predates device_requests: it has no parts of it to truncate.
@pytest.mark.parametrize("table", [t for t in TABLES if t not in ("mem", "device_requests")])
def test_truncated_part_is_named(tmp_path: Path, table: str) -> None:
    t = _copy(FIND, tmp_path / "t")
    parts = sorted((t / table).glob("*.parquet"))
    victim = random.Random(table).choice(parts)
    size = victim.stat().st_size
    cut = random.Random(size).randrange(1, size)
    victim.write_bytes(victim.read_bytes()[:cut])
    _refused(t, str(victim))


def test_duplicated_part(tmp_path: Path) -> None:
    t = _copy(FIND, tmp_path / "t")
    parts = sorted((t / "exec").glob("v000-*.parquet"))
    shutil.copy(parts[2], t / "exec" / f"v000-{len(parts):06d}.parquet")
    wrote = json.loads((t / "plugin.json").read_text())["parts"]
    _refused(t, f"the plugin wrote {wrote} part files but the trace has {wrote + 1}")


def test_missing_middle_part(tmp_path: Path) -> None:
    t = _copy(FIND, tmp_path / "t")
    (t / "exec" / "v001-000003.parquet").unlink()
    _refused(t, "exec v1", "part 000003 missing")


def _swap(a: Path, b: Path) -> None:
    tmp = a.with_name(a.name + ".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def test_reordered_event_parts(tmp_path: Path) -> None:
    t = _copy(FIND, tmp_path / "t")
    _swap(t / "syscalls" / "v000-000002.parquet", t / "syscalls" / "v000-000003.parquet")
    _refused(t, "v000-000003.parquet starts at icount", "parts out of order")


def test_reordered_exec_parts_fail_the_full_check(tmp_path: Path) -> None:
    # Exec parts carry no counter of their own: two swapped ones pass the cheap checks (same
    # names, same totals) and are found by the full check's event-to-stream comparison.
    t = _copy(FIND, tmp_path / "t")
    _swap(t / "exec" / "v000-000001.parquet", t / "exec" / "v000-000002.parquet")
    status, out = _check(t)
    assert status == 1 and "check icount:" in out and "check parts: ok" in out


def test_missing_manifest_is_incomplete(tmp_path: Path) -> None:
    t = _copy(FIND, tmp_path / "t")
    (t / "manifest.json").unlink()
    msg = _refused(t, "incomplete trace", "console.log")
    assert "--allow-incomplete" in msg
    view, note = preflight(t, allow_incomplete=True)
    assert view is not None and "incomplete trace" in note


def test_preflight_all_keeps_the_order_and_raises_the_first_refusal(tmp_path: Path) -> None:
    good = _copy(SMALL, tmp_path / "good")
    bad = [_copy(SMALL, tmp_path / f"bad{i}") for i in range(2)]
    for b in bad:
        (b / "manifest.json").unlink()
    got = preflight_all([good, bad[0], good], allow_incomplete=True)
    assert [g[0].path for g in got] == [preflight(p, True)[0].path
                                       for p in (good, bad[0], good)]
    assert got[0][1] is None and "incomplete trace" in got[1][1]
    with pytest.raises(TraceRejected, match="bad0"):
        preflight_all([good, bad[0], bad[1]])


def test_manifest_saying_incomplete(tmp_path: Path) -> None:
    t = _copy(FIND, tmp_path / "t")
    m = json.loads((t / "manifest.json").read_text())
    m.update(complete=False, incomplete_reason="QEMU was stopped before the guest was done")
    (t / "manifest.json").write_text(json.dumps(m))
    _refused(t, "incomplete trace", "QEMU was stopped before the guest was done")


def _kill(t: Path) -> None:
    """Make ``t`` look like a trace whose QEMU was killed: no manifest, a plugin.json that is
    not final, and the last parts of vCPU 1 not written (its exec part was, its events not)."""
    (t / "manifest.json").unlink()
    info = json.loads((t / "plugin.json").read_text())
    info["final"] = False
    (t / "plugin.json").write_text(json.dumps(info))
    for table in ("syscalls", "interrupts", "switches", "wakeups", "mem"):
        last = sorted((t / table).glob("v001-*.parquet"))
        if len(last) > 1:
            last[-1].unlink()


def test_killed_capture_prefix_is_consistent(tmp_path: Path) -> None:
    t = _copy(SMALL, tmp_path / "t")
    _kill(t)
    _refused(t, "incomplete trace")
    view, note = preflight(t, allow_incomplete=True)
    assert "complete prefix" in note
    report = check_cli.check_trace(view)
    # Only completeness fails on the prefix: every kept event and access fits its stream.
    assert {n for n, r in report.checks.items() if r.count} == {"complete"}, report.format()


def test_analyse_and_evaluate_refuse_then_allow_incomplete(tmp_path: Path, capsys) -> None:
    t = _copy(SMALL, tmp_path / "t")
    _kill(t)
    out = tmp_path / "res"
    assert main(["analyse", str(t), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and "--allow-incomplete" in err and not out.exists()
    assert main(["evaluate", str(t), "--policies", "linux", "--out", str(out)]) == 1
    assert "refused" in capsys.readouterr().err and not out.exists()
    assert main(["analyse", str(t), "--out", str(out), "--allow-incomplete",
                 "--tau-epochs", "4"]) == 0
    summary = (out / "summary.md").read_text()
    assert "## Not whole traces" in summary and "complete prefix" in summary
    s = json.loads((out / "summary.json").read_text())["traces"][0]
    assert "complete prefix" in s["note"]


def test_out_directory_is_claimed_and_finished(tmp_path: Path, capsys) -> None:
    out = tmp_path / "res"
    out.mkdir()
    (out / "old.txt").write_text("x")
    assert main(["analyse", str(SMALL), "--out", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    # A live owner's lock: a second writer is refused at once.
    fresh = tmp_path / "fresh"
    (tmp_path / ".fresh.pysched-lock").write_text("1\n")  # pid 1 is always alive
    assert main(["analyse", str(SMALL), "--out", str(fresh)]) == 2
    assert "another pysched command (process 1)" in capsys.readouterr().err
    # A dead owner's lock and partial directory (a killed run) are cleared.
    (tmp_path / ".fresh.pysched-lock").write_text("999999999\n")
    (tmp_path / ".fresh.partial-abc").mkdir()
    assert main(["evaluate", str(SMALL), "--policies", "linux", "--cores", "2",
                 "--out", str(fresh)]) == 0
    assert (fresh / "summary.md").is_file()
    assert not list(tmp_path.glob(".fresh.*"))


_OPTIONS = {
    "analyse": ["--epoch-insns", "--heatmap-bits", "--tau-epochs", "--warmup-epochs",
                "--bloom-bits", "--warmup"],
    "evaluate": ["--cores", "--load", "--load-unit", "--epoch-ms"],
    "check": ["--limit"],
}
_BAD = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "", " ", "1e999", "abc", "1,,", "-0",
                     "99999999999999999999999", "0x10", "1.5", "1M", "--", "1;2", "\x00"]),
    st.text(max_size=8))


@settings(max_examples=60, deadline=None)
@given(command=st.sampled_from(sorted(_OPTIONS)), data=st.data(), value=_BAD)
def test_cli_fuzz_never_tracebacks(command: str, data, value: str, tmp_path_factory) -> None:
    option = data.draw(st.sampled_from(_OPTIONS[command]))
    missing = str(tmp_path_factory.mktemp("fuzz") / "no-such-trace")
    argv = [command, missing, f"{option}={value}"]
    if command != "check":
        argv += ["--out", str(tmp_path_factory.mktemp("fuzz-out") / "o")]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as e:  # argparse
            status = e.code
    text = err.getvalue()
    assert "Traceback" not in text
    # A bad value is named; a value that happens to be valid reaches the missing trace.
    assert status in (1, 2), (argv, status, text)
    assert option in text or "no-such-trace" in text or status == 1, (argv, text)
