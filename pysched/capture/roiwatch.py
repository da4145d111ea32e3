"""``pysched trace --roi-insns``: the plugin's instruction bound, seen from the host.

The plugin enforces the bound itself (its ``roi_insns=N`` option, see qemu-plugin/README.md):
each vCPU stops recording at the first block boundary at or after N instructions in the region,
and when every vCPU has got there the plugin ends the region as the guest's ``roi end`` would,
writes every buffer out and then rewrites ``plugin.json`` (atomically, by rename) with
``roi_insns_ends`` counting the regions the bound ended. :class:`RoiBoundWatch` polls that
small file (a ``stat`` per call, a JSON parse only when it changed) so that the host can tell
the guest to wind down (``stop`` on its control port, see :mod:`pysched.capture.monitor`).

:func:`bound_shortfall` says which vCPUs did not reach the bound, for the messages of a run
whose region ended otherwise (the command ended, the guest's time backstop, ``--timeout``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PLUGIN_JSON = "plugin.json"


def read_plugin_info(out_dir: Path) -> dict[str, Any] | None:
    """``plugin.json`` of a trace directory, or None while it is missing or unreadable.

    Parameters
    ----------
    out_dir : Path
        The trace directory.

    Returns
    -------
    dict or None
        The parsed file.
    """
    try:
        info = json.loads((Path(out_dir) / PLUGIN_JSON).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


class RoiBoundWatch:
    """Tell when the plugin has ended the region at its ``roi_insns`` bound.

    Parameters
    ----------
    out_dir : Path
        The trace directory the plugin writes.
    """

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / PLUGIN_JSON
        self._stamp: tuple[int, int, int] | None = None
        self.info: dict[str, Any] | None = None

    def poll(self) -> bool:
        """Re-read ``plugin.json`` if it changed.

        Returns
        -------
        bool
            True once the plugin reports a region ended by the bound.
        """
        try:
            st = self.path.stat()
        except OSError:
            return False
        # The plugin renames a new file over the old one: a new inode every time.
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._stamp = stamp
            self.info = read_plugin_info(self.path.parent)
        return self.ended

    @property
    def ended(self) -> bool:
        """Whether the last ``plugin.json`` read reports a region ended by the bound."""
        return bool(self.info and int(self.info.get("roi_insns_ends", 0)) > 0)

    @property
    def window_icount(self) -> dict[str, int]:
        """Per vCPU, the instructions recorded in the (last) region, from the last read."""
        counts = (self.info or {}).get("window_icount") or []
        return {str(v): int(n) for v, n in enumerate(counts)}


def bound_shortfall(info: dict[str, Any] | None, bound: int) -> dict[str, int] | None:
    """The vCPUs whose last region holds fewer than ``bound`` instructions.

    Parameters
    ----------
    info : dict or None
        ``plugin.json`` (:func:`read_plugin_info`).
    bound : int
        The ``--roi-insns`` bound.

    Returns
    -------
    dict or None
        ``{vcpu: instructions}`` for the vCPUs short of the bound (empty when every vCPU
        reached it); None when there is nothing to compare: no plugin.json, a plugin older than
        ``roi_insns``, or no region began.
    """
    if not info or not isinstance(info.get("window_icount"), list) or not info.get("windows"):
        return None
    return {str(v): int(n) for v, n in enumerate(info["window_icount"]) if int(n) < bound}


__all__ = ["PLUGIN_JSON", "RoiBoundWatch", "bound_shortfall", "read_plugin_info"]
