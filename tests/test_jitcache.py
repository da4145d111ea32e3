"""The numba cache is dropped when any pysched source changes (numba itself only notices a
change in the file that defines a kernel, not in the functions it inlines)."""
from __future__ import annotations

from pathlib import Path

from pysched import _jitcache


def make_package(root: Path) -> Path:
    pkg = root / "pkg"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "kernels.py").write_text("x = 1\n")
    (pkg / "sub" / "policy.py").write_text("y = 2\n")
    return pkg


def cached(pkg: Path) -> list[str]:
    (pkg / "sub" / "__pycache__" / "policy.f-1.py311.nbi").write_bytes(b"index")
    (pkg / "sub" / "__pycache__" / "policy.f-1.py311.1.nbc").write_bytes(b"code")
    (pkg / "sub" / "__pycache__" / "policy.cpython-311.pyc").write_bytes(b"pyc")
    return sorted(p.name for p in pkg.rglob("__pycache__/*"))


def test_cache_dropped_only_when_a_source_changes(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    stamp = pkg / "__pycache__" / "numba-sources.sha256"
    cached(pkg)
    assert _jitcache.sync(pkg, stamp)                      # no stamp yet: start clean
    left = sorted(p.name for p in pkg.rglob("__pycache__/*"))
    assert left == ["numba-sources.sha256", "policy.cpython-311.pyc"]

    cached(pkg)
    assert not _jitcache.sync(pkg, stamp)                  # same sources: cache kept
    assert len(list(pkg.rglob("*.nb?"))) == 2

    # an edit to a file other than the kernel's own (numba would not notice it)
    (pkg / "sub" / "policy.py").write_text("y = 3\n")
    assert _jitcache.sync(pkg, stamp)
    assert list(pkg.rglob("*.nb?")) == []


def test_hash_covers_paths_and_contents(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    h0 = _jitcache.sources_hash(pkg)
    (pkg / "sub" / "policy.py").rename(pkg / "sub" / "policy2.py")
    assert _jitcache.sources_hash(pkg) != h0


def test_unwritable_stamp_is_no_error(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    stamp = pkg / "__pycache__" / "numba-sources.sha256"
    stamp.parent.mkdir()
    stamp.mkdir()            # the stamp cannot be written (a directory stands in its way)
    cached(pkg)
    assert not _jitcache.sync(pkg, stamp)
    assert stamp.is_dir()    # nothing stamped: the next import checks again
