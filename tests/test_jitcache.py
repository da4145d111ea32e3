"""numba's cached kernels are tied to all of pysched's sources: numba itself only notices a
change in the file that defines a kernel, not in the functions it inlines from other files."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pysched import _jitcache

RUNNER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from pysched import _jitcache
if sys.argv[2] == "stamped":
    _jitcache.install(Path(sys.argv[1]) / "pkg")
from pkg.kernel import run
print(run())
"""


def make_package(root: Path, value: int) -> None:
    pkg = root / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    # the kernel's file never changes; the function it inlines does
    (pkg / "kernel.py").write_text(
        "import numba\nfrom .policy import value\n\n"
        "@numba.njit(cache=True)\ndef run():\n    return value()\n")
    (pkg / "policy.py").write_text(
        f"import numba\n\n@numba.njit(inline='always')\ndef value():\n    return {value}\n")


def run_kernel(root: Path, mode: str, env: dict[str, str]) -> int:
    r = subprocess.run([sys.executable, "-c", RUNNER, str(root), mode], capture_output=True,
                       text=True, env={**os.environ, **env}, timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


@pytest.mark.parametrize("where", ["in-tree", "NUMBA_CACHE_DIR"])
def test_edit_of_an_inlined_function_is_not_served_stale(tmp_path: Path, where: str) -> None:
    results = {}
    for mode in ("plain", "stamped"):
        root = tmp_path / mode
        root.mkdir()
        env = {"NUMBA_CACHE_DIR": str(root / "cache")} if where == "NUMBA_CACHE_DIR" else {}
        make_package(root, 1)
        first = run_kernel(root, mode, env)
        make_package(root, 2)
        results[mode] = (first, run_kernel(root, mode, env))
    assert results["plain"] == (1, 1)      # numba alone runs the stale kernel
    assert results["stamped"] == (1, 2)


def test_pysched_kernels_are_stamped_with_the_sources() -> None:
    from pysched.models.caches.kernels import _run_cache

    locator = _run_cache._cache._impl.locator
    assert type(locator).__name__.startswith("Stamped")
    assert locator.get_source_stamp()[1] == _jitcache.sources_hash()


def test_every_numba_module_is_in_a_stamped_subpackage() -> None:
    for f in _jitcache.PACKAGE.rglob("*.py"):
        if not re.search(r"^import numba|^from numba", f.read_text(), re.M):
            continue
        rel = f.relative_to(_jitcache.PACKAGE)
        assert len(rel.parts) > 1, f"{rel}: a top-level module would not be stamped"
        init = (_jitcache.PACKAGE / rel.parts[0] / "__init__.py").read_text()
        first_import = re.search(r"^(from|import) (?!__future__).*$", init, re.M).group(0)
        assert first_import.startswith("from pysched import _jitcache"), rel


def test_hash_covers_paths_and_contents(tmp_path: Path) -> None:
    make_package(tmp_path, 1)
    h0 = _jitcache.sources_hash(tmp_path / "pkg")
    (tmp_path / "pkg" / "policy.py").rename(tmp_path / "pkg" / "policy2.py")
    h1 = _jitcache.sources_hash(tmp_path / "pkg")
    make_package(tmp_path, 2)
    assert len({h0, h1, _jitcache.sources_hash(tmp_path / "pkg")}) == 3
