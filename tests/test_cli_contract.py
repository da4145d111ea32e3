"""The command line's common contract: ``--version``, an example closing every sub-command's
help, old option spellings that still work and warn, and one meaning of ``--out``."""
from __future__ import annotations

from pathlib import Path

import pytest

from pysched.cli import _COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("pysched ")


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_every_help_ends_with_an_example(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out.rstrip()
    tail = text[text.rindex("\nexample: "):]
    assert tail.startswith(f"\nexample: pysched {command}")
    assert not any(line.lstrip().startswith("-") for line in tail.splitlines())


@pytest.mark.parametrize("argv, dest, value", [
    (["analyse", "--bloom-bits", "128"], "heatmap_bits", 128),
    (["analyse", "--warmup", "3"], "warmup_epochs", 3),
    (["study", "schedtask-paper", "--loads", "2,4", "--out", "x"], "load", [2, 4]),
])
def test_an_old_spelling_still_works_and_warns(argv, dest, value, capsys):
    parser, _ = build_parser()
    args = parser.parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err
    assert "is deprecated" in err and "use --" in err


def test_the_new_spellings_keep_their_defaults(capsys):
    parser, _ = build_parser()
    args = parser.parse_args(["analyse"])
    assert (args.heatmap_bits, args.warmup_epochs) == (512, 5)
    assert capsys.readouterr().err == ""


def test_an_old_spellings_bad_value_is_named(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["analyse", "--bloom-bits", "500"])
    assert stop.value.code == 2 and "--bloom-bits" in capsys.readouterr().err


def test_seeds_writes_a_new_directory_whole_and_never_into_a_full_one(tmp_path, capsys):
    empty = tmp_path / "data"
    empty.mkdir()
    out = tmp_path / "seeds"
    assert main(["seeds", "--data", str(empty), "--out", str(out)]) == 0
    text = (out / "summary.md").read_text()
    assert text.index("## Headline") < text.index("## Seed 001") and "Left out" in text
    assert f"- **Seed 002:** left out ({empty / 'netserver-10b'} is not there)." in text
    assert main(["seeds", "--data", str(empty), "--out", str(out)]) == 2
    assert f"--out {out} exists and is not empty" in capsys.readouterr().err
    assert not list(tmp_path.glob(".seeds.*"))


def test_a_resumable_command_refuses_an_out_another_one_holds(tmp_path, capsys):
    out = tmp_path / "sweep"
    (tmp_path / ".sweep.pysched-lock").write_text("1\n")  # pid 1 is always alive
    spec = ROOT / "sweeps" / "example.toml"
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    assert "another pysched command (process 1)" in capsys.readouterr().err
