"""pysched: full-system traces of Linux guests and OS-scheduler studies."""
