"""Tie numba's on-disk cache of pysched's kernels to all of pysched's sources.

numba reuses a cached kernel while the file that defines it is unchanged, even when a function
it inlines from another file has changed (for example a replacement policy inlined into the
cache kernels): after such an edit, or a ``git pull`` that touches only the inlined file, the
old machine code would run. :func:`install` puts pysched's own cache locators in front of
numba's: they keep the cache where numba would (``NUMBA_CACHE_DIR``, the package's
``__pycache__``, or the user-wide directory) but stamp every entry with a hash of all pysched
sources as they were when this process imported them, so a cache written from other sources is
never loaded. Importing this module installs them; the numba-using subpackages import it
before they define a kernel.
"""
from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def sources_hash(package: Path = PACKAGE) -> str:
    """SHA-256 over the paths and contents of the package's ``.py`` files."""
    h = hashlib.sha256()
    for f in sorted(package.rglob("*.py")):
        h.update(f.relative_to(package).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def _stamped(base: type, package: Path, digest: str) -> type:
    """A subclass of numba locator ``base`` for the files of ``package`` only, whose source
    stamp also holds ``digest``."""

    class Locator(base):
        @classmethod
        def from_function(cls, py_func, py_file):
            if not Path(py_file).resolve().is_relative_to(package):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return super().get_source_stamp(), digest

    Locator.__name__ = Locator.__qualname__ = f"Stamped{base.__name__}"
    return Locator


_installed: set[Path] = set()


def install(package: Path = PACKAGE, digest: str | None = None) -> bool:
    """Stamp numba's cache entries of ``package``'s kernels with ``digest`` (default: the hash
    of its sources now). Idempotent per package; returns False, with a warning, when this numba
    lacks the locator classes it builds on."""
    package = Path(package).resolve()
    if package in _installed:
        return True
    try:
        from numba.core import caching

        def pick(name: str):
            # public names in recent numba, underscored in older releases
            return getattr(caching, name, None) or getattr(caching, "_" + name)

        bases = tuple(pick(n) for n in ("UserProvidedCacheLocator", "InTreeCacheLocator",
                                        "UserWideCacheLocator"))
        locators = pick("CacheImpl")._locator_classes
    except (ImportError, AttributeError) as e:
        warnings.warn(f"pysched: cannot tie numba's kernel cache to the sources ({e}); after "
                      f"changing {package}, delete its __pycache__/*.nbi and *.nbc files",
                      RuntimeWarning, stacklevel=2)
        return False
    digest = digest or sources_hash(package)
    # in place: numba's cache classes all read this one list
    locators[:0] = [_stamped(b, package, digest) for b in bases]
    _installed.add(package)
    return True


install()
