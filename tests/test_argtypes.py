"""The argument types the sub-commands share (:mod:`pysched._argtypes`): what each accepts, and
that argparse's message on a bad value names the option."""
from __future__ import annotations

import argparse

import pytest

from pysched._argtypes import int_at_least, int_list, path, positive_float, positive_int


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t", exit_on_error=False)
    p.add_argument("--cores", type=int_list("--cores"))
    p.add_argument("--epoch-ms", type=positive_float)
    p.add_argument("--epochs", type=positive_int)
    p.add_argument("--warmup", type=int_at_least(0))
    p.add_argument("--out", type=path)
    return p


def test_good_values():
    args = _parser().parse_args(["--cores", "1,,2, 4", "--epoch-ms", "0.5", "--epochs", "1e3",
                                 "--warmup", "0", "--out", "o"])
    assert (args.cores, args.epoch_ms, args.epochs, args.warmup) == ([1, 2, 4], 0.5, 1000, 0)
    assert str(args.out) == "o"


@pytest.mark.parametrize("option, value, message", [
    ("--cores", "x", "--cores: expected integers separated by commas, got 'x'"),
    ("--cores", ",", "--cores: no value given"),
    ("--epoch-ms", "nan", "expected a positive finite number, got 'nan'"),
    ("--epoch-ms", "abc", "expected a number, got 'abc'"),
    ("--epochs", "2.5", "expected a positive integer, got '2.5'"),
    ("--epochs", "0", "expected a positive finite number, got '0'"),
    ("--warmup", "-1", "must be at least 0, got -1"),
    ("--warmup", "1.0", "not an integer: '1.0'"),
    ("--out", "", "expected a path, got ''"),
    ("--out", "  ", "expected a path, got '  '"),
])
def test_bad_values_are_named(option, value, message):
    with pytest.raises(argparse.ArgumentError) as err:
        _parser().parse_args([option, value])
    assert str(err.value) == f"argument {option}: {message}"


@pytest.mark.parametrize("command", [["evaluate", "x"], ["analyse"], ["sweep", "s.toml"],
                                     ["ablate", "x"], ["seeds"], ["trace", "--cmd", "true"],
                                     ["study", "schedtask-paper"]])
def test_an_empty_out_is_refused_by_every_command(command, capsys):
    from pysched.cli import main
    with pytest.raises(SystemExit) as e:
        main([*command, "--out", ""])
    assert e.value.code == 2
    assert "argument --out: expected a path, got ''" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["check"], ["devices"], ["evaluate", "--out", "o"],
                                     ["ablate", "--policy", "linux", "--out", "o"],
                                     ["analyse"], ["cache", "--prepare"]])
def test_an_empty_trace_is_refused_by_every_command(command, capsys):
    from pysched.cli import main
    with pytest.raises(SystemExit) as e:
        main([*command, ""])
    assert e.value.code == 2
    assert "expected a path, got ''" in capsys.readouterr().err
