"""Every relative link of the README and docs/ leads to a file or folder of the repository
(and, with an anchor, to a heading of that page)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve()
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md":
            heads = [slug(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(), re.M)]
            if anchor not in heads:
                broken.append(target)
    assert not broken, f"{page.name}: {broken}"
