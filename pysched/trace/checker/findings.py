"""Collecting and printing the checker's findings."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Location:
    """Where a violation is.

    Attributes
    ----------
    table : str
        Table of the offending row.
    vcpu : int or None
        vCPU of the row (per-vCPU tables), or of the first execution of ``block``.
    row : int or None
        Row within the vCPU's (or the static) table.
    icount : int or None
        Instruction counter of the row, or of the first execution of ``block``.
    exec_row : int or None
        The row's ``exec_row``, or the exec row of the first execution of ``block``.
    block : int or None
        Block id concerned, if any.
    """

    table: str
    vcpu: int | None = None
    row: int | None = None
    icount: int | None = None
    exec_row: int | None = None
    block: int | None = None
    first_exec: bool = False  # vcpu/exec_row/icount say where ``block`` first ran

    def __str__(self) -> str:
        out = self.table
        if self.vcpu is not None and not self.first_exec:
            out += f" v{self.vcpu}"
        if self.row is not None:
            out += f" row {self.row}"
        extra = []
        if self.block is not None:
            extra.append(f"block {self.block}")
        if self.first_exec:
            icount = "?" if self.icount is None else self.icount
            extra.append(f"first run v{self.vcpu} exec_row {self.exec_row} icount {icount}")
        else:
            if self.exec_row is not None:
                extra.append(f"exec_row {self.exec_row}")
            if self.icount is not None:
                extra.append(f"icount {self.icount}")
        return out + (f" ({', '.join(extra)})" if extra else "")


@dataclass
class _CheckResult:
    count: int = 0
    shown: list[tuple[Location, str]] | None = None


class Report:
    """Violations per check (the first ``limit`` kept with their location) and info notes.

    Parameters
    ----------
    limit : int
        Violations kept (and printed) per check; all are counted.
    """

    def __init__(self, limit: int = 20) -> None:
        self.limit = limit
        self.checks: dict[str, _CheckResult] = {}
        self.info: list[tuple[str, str]] = []
        self.summary: list[str] = []

    def start(self, check: str) -> None:
        """Register ``check`` so that it is listed even without violations."""
        self.checks.setdefault(check, _CheckResult(0, []))

    def add(self, check: str, loc: Location, message: str) -> None:
        """Record one violation."""
        res = self.checks.setdefault(check, _CheckResult(0, []))
        res.count += 1
        if len(res.shown) < self.limit:
            res.shown.append((loc, message))

    def add_mask(self, check: str, mask: np.ndarray,
                 describe: Callable[[int], tuple[Location, str]]) -> None:
        """Record a violation for every true element of ``mask``.

        ``describe(i)`` builds the location and message of element ``i``; it is called only
        for the violations that will be shown, so vectorised checks stay cheap.
        """
        hits = np.flatnonzero(mask)
        res = self.checks.setdefault(check, _CheckResult(0, []))
        room = max(self.limit - len(res.shown), 0)
        res.shown.extend(describe(int(i)) for i in hits[:room])
        res.count += len(hits)

    def note(self, check: str, message: str) -> None:
        """Record an informational finding (not a violation)."""
        self.info.append((check, message))

    @property
    def violations(self) -> int:
        """Total violations over all checks."""
        return sum(r.count for r in self.checks.values())

    @property
    def ok(self) -> bool:
        """True when no check found a violation."""
        return self.violations == 0

    def shown(self) -> Iterable[tuple[str, Location, str]]:
        """The kept violations as ``(check, location, message)``."""
        for name, res in self.checks.items():
            for loc, msg in res.shown:
                yield name, loc, msg

    def blocks_to_locate(self) -> set[int]:
        """Block ids of kept violations that have no execution location yet."""
        return {loc.block for _, loc, _ in self.shown()
                if loc.block is not None and loc.vcpu is None}

    def set_first_executions(self, where: dict[int, tuple[int, int, int | None]]) -> None:
        """Fill in ``(vcpu, exec_row, icount)`` of the first execution of located blocks."""
        for res in self.checks.values():
            res.shown = [
                (replace(loc, vcpu=where[loc.block][0], exec_row=where[loc.block][1],
                         icount=where[loc.block][2], first_exec=True)
                 if loc.block in where and loc.vcpu is None else loc, msg)
                for loc, msg in res.shown]

    def format(self) -> str:
        """The human-readable report: summary, info, then each check's violations."""
        lines = list(self.summary)
        if self.info:
            lines.append("info:")
            lines += [f"  {check}: {msg}" for check, msg in self.info]
        for name, res in self.checks.items():
            if res.count == 0:
                lines.append(f"check {name}: ok")
                continue
            lines.append(f"check {name}: {res.count} violation{'s' if res.count != 1 else ''}")
            lines += [f"  {loc}: {msg}" for loc, msg in res.shown]
            if res.count > len(res.shown):
                lines.append(f"  ... and {res.count - len(res.shown)} more")
        n = self.violations
        lines.append("OK" if n == 0 else f"FAILED: {n} violation{'s' if n != 1 else ''}")
        return "\n".join(lines)
