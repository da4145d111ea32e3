"""Argument types of the ``pysched`` sub-commands (``type=`` of ``add_argument``).

Each parser raises :class:`argparse.ArgumentTypeError` on a bad value, which argparse reports
as ``argument --OPTION: <message>``, so every message names the option it is about.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence


def int_list(name: str) -> Callable[[str], list[int]]:
    """A parser of comma-separated integers (``1,2,4``) for the option ``name``.

    Parameters
    ----------
    name : str
        The option, as its messages name it (``--cores``).

    Returns
    -------
    callable
        Text -> the integers in it, in order (empty items between commas are skipped); raises
        :class:`argparse.ArgumentTypeError` when an item is not an integer or none is given.
    """
    def parse(text: str) -> list[int]:
        try:
            vals = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: expected integers separated by commas, "
                                             f"got {text!r}") from None
        if not vals:
            raise argparse.ArgumentTypeError(f"{name}: no value given")
        return vals
    return parse


def positive_float(text: str) -> float:
    """A finite number above 0.

    Parameters
    ----------
    text : str
        The option's value (``3``, ``0.5``, ``1e-3``).

    Returns
    -------
    float
        ``float(text)``.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a number, or is 0, negative, infinite or NaN.
    """
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return v


def float_in(low: float, high: float) -> Callable[[str], float]:
    """A parser of a finite number from ``low`` to ``high`` (both included).

    Returns
    -------
    callable
        Text -> the number; raises :class:`argparse.ArgumentTypeError` naming the range when
        the text is not a number in it.
    """
    def parse(text: str) -> float:
        v = positive_float(text)
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"expected a number from {low:g} to {high:g}, "
                                             f"got {text!r}")
        return v
    return parse


def positive_int(text: str) -> int:
    """A whole number above 0, written as an integer (``10``) or as a number without a
    fractional part (``1e3``, ``10.0``); ``int_at_least(1)`` takes integers only.

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int
        The whole number ``text`` stands for.

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is not a :func:`positive_float` or has a fractional part.
    """
    v = positive_float(text)
    if v != int(v):
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(v)


def path_text(text: str) -> str:
    """A file or directory name as given; an empty one is refused (``Path("")`` would be the
    current directory, which no one means by ``--out ""``).

    Raises
    ------
    argparse.ArgumentTypeError
        When ``text`` is empty or blank.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return text


def path(text: str) -> Path:
    """:func:`path_text` as a :class:`~pathlib.Path`."""
    return Path(path_text(text))


def int_at_least(low: int) -> Callable[[str], int]:
    """A parser of an integer of at least ``low``.

    Parameters
    ----------
    low : int
        The smallest value accepted.

    Returns
    -------
    callable
        Text -> the integer; raises :class:`argparse.ArgumentTypeError` when the text is not
        an integer or the integer is below ``low``.
    """
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {n}")
        return n
    return parse


class _DeprecatedAlias(argparse.Action):
    """Stores like the option it stands for, after a line on stderr naming the new spelling."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "",
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated and will go; use {self.new}",
              file=sys.stderr)
        setattr(namespace, self.dest, values)


def deprecated_alias(p: argparse.ArgumentParser, old: str, new: str, **kwargs: Any) -> None:
    """Add ``old`` as a hidden spelling of option ``new`` that still works and warns.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The parser that already has ``new``.
    old, new : str
        The old and the current spelling (``--bloom-bits``, ``--heatmap-bits``).
    **kwargs
        ``type``, ``choices``, ``metavar`` as ``new`` has them, so that a bad value is refused
        under the spelling it was given with.
    """
    p.add_argument(old, dest=new.lstrip("-").replace("-", "_"), action=_DeprecatedAlias,
                   new=new, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


__all__ = ["deprecated_alias", "float_in", "int_at_least", "int_list", "path", "path_text",
           "positive_float", "positive_int"]
