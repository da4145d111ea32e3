"""pysched: full-system traces of Linux guests and OS-scheduler studies."""
from . import _jitcache

_jitcache.sync()
