#!/usr/bin/env python3
"""Generate the directory tree that the ``find`` workload walks (run at image build time).

The tree is DEPTH levels of FANOUT directories each, and every leaf directory holds FILES empty
files, with deterministic names, so that every image has the same tree::

    gen_tree.py ROOT [--depth 3] [--fanout 12] [--files 12]

With the defaults: 12 + 144 + 1,728 directories and 20,736 files. Only the system's Python
is needed (no third-party modules).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

# Name stems, so that the names look like a real tree's and differ in length.
_STEMS = ("src", "lib", "doc", "share", "data", "cache", "log", "spool", "mail", "www",
          "home", "proj", "build", "test", "conf", "tmp")


def make_tree(root: Path, depth: int, fanout: int, files: int) -> tuple[int, int]:
    """Create the tree under ``root``; return (directories, files) created."""
    if depth < 1 or fanout < 1 or files < 0:
        raise ValueError("depth and fanout must be at least 1, files at least 0")
    ndirs = nfiles = 0
    level = [root]
    root.mkdir(parents=True, exist_ok=True)
    for d in range(depth):
        nxt = []
        for parent in level:
            for i in range(fanout):
                p = parent / f"{_STEMS[(i + d) % len(_STEMS)]}{d}_{i:02d}"
                p.mkdir()
                nxt.append(p)
                ndirs += 1
        level = nxt
    for leaf in level:
        for j in range(files):
            name = f"file_{j:03d}.{_STEMS[j % len(_STEMS)][:3]}"
            fd = os.open(leaf / name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
            os.close(fd)
            nfiles += 1
    return ndirs, nfiles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--fanout", type=int, default=12)
    ap.add_argument("--files", type=int, default=12)
    a = ap.parse_args()
    ndirs, nfiles = make_tree(a.root, a.depth, a.fanout, a.files)
    print(f"gen_tree: {ndirs} directories, {nfiles} files under {a.root}")


if __name__ == "__main__":
    main()
