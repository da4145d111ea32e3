"""No result figure in the README or docs/ that the code does not produce.

A result figure (a signed percentage such as ``+6.7 %``) may stand only inside a block that
names the file it is quoted from, the command that writes it and the date::

    <!-- figures from results/sandbox/summary.md (make run, 2026-12-01) -->
    | SchedTask | -5.9 % | ...
    <!-- end of figures -->

and every number in such a block must be in that file when the file exists (``make run`` has
been run); without it the comparison is skipped, saying so.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"<!-- figures from (\S+) \(([^)]*\d{4}-\d\d-\d\d[^)]*)\) -->\n(.*?)"
                   r"<!-- end of figures -->", re.S)
SIGNED_PCT = re.compile(r"(?<![\w.])[+-]\d+(?:\.\d+)? ?%")
NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?")


def blocks() -> list[tuple[Path, str, str, str]]:
    """(page, quoted file, command and date, text) of every quoted block."""
    return [(page, m.group(1), m.group(2), m.group(3))
            for page in PAGES for m in BLOCK.finditer(page.read_text())]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_result_figures_stand_only_in_quoted_blocks(page: Path) -> None:
    outside = BLOCK.sub("", page.read_text())
    stray = SIGNED_PCT.findall(outside)
    assert not stray, (f"{page.name}: {stray}: quote result figures in a block naming their "
                       "file, command and date, or link to the file instead")


def test_quoted_figures_are_in_the_file_they_are_quoted_from() -> None:
    found = blocks()
    if not found:
        pytest.skip("the README and docs quote no figure from a summary (they link to them)")
    missing = [src for _, src, _, _ in found if not (ROOT / src).is_file()]
    if missing:
        pytest.skip(f"{missing[0]} has not been produced here (run the command the block names)")
    for page, src, _, text in found:
        absent = not_in(text, (ROOT / src).read_text())
        assert not absent, f"{page.name}: {absent} quoted from {src} but not in it"


def not_in(quoted: str, source: str) -> list[str]:
    """The numbers of ``quoted`` that ``source`` does not hold."""
    have = set(NUMBER.findall(source))
    return [n for n in NUMBER.findall(quoted) if n not in have]


def test_the_checks_bite() -> None:
    page = ("Ours: +3.0 % over linux.\n"
            "<!-- figures from results/sandbox/summary.md (make run, 2026-12-01) -->\n"
            "| schedtask | -5.9 % |\n<!-- end of figures -->\n")
    assert SIGNED_PCT.findall(BLOCK.sub("", page)) == ["+3.0 %"]
    (src, when, text), = [m.groups() for m in BLOCK.finditer(page)]
    assert (src, when) == ("results/sandbox/summary.md", "make run, 2026-12-01")
    assert not_in(text, "| schedtask | -5.9 | +22.8 |") == []
    assert not_in(text, "| schedtask | -6.1 |") == ["-5.9"]
