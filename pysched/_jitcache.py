"""Keep numba's on-disk cache of pysched's kernels in step with the sources.

numba reuses a cached kernel while the file that defines it is unchanged, even when a function
it inlines from another file has changed (for example a replacement policy inlined into the
cache kernels): after such an edit, or a ``git pull`` that touches only the inlined file, the
old machine code would run. So pysched stamps the cache with a hash of all its sources and
drops the cached kernels when the hash changes; they are recompiled on first use.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
STAMP = PACKAGE / "__pycache__" / "numba-sources.sha256"


def sources_hash(package: Path = PACKAGE) -> str:
    """SHA-256 over the paths and contents of the package's ``.py`` files."""
    h = hashlib.sha256()
    for f in sorted(package.rglob("*.py")):
        h.update(f.relative_to(package).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def sync(package: Path = PACKAGE, stamp: Path = STAMP) -> bool:
    """Delete the package's numba cache files if the sources changed since the last stamp.

    Returns True when files were dropped (or there was no stamp yet). A package that cannot be
    written is left alone: that is an installed copy, whose files all get new timestamps when
    it is reinstalled, and numba keeps its cache elsewhere.
    """
    digest = sources_hash(package)
    try:
        if stamp.read_text().strip() == digest:
            return False
    except OSError:
        pass
    try:
        for pattern in ("*.nbi", "*.nbc"):
            for f in package.rglob(f"__pycache__/{pattern}"):
                f.unlink(missing_ok=True)
        stamp.parent.mkdir(exist_ok=True)
        tmp = stamp.with_suffix(".tmp")
        tmp.write_text(digest + "\n")
        tmp.replace(stamp)
    except OSError:
        return False
    return True
