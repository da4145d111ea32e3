"""Parsing the guest's console log.

The guest's ``roi_start`` / ``roi_stop`` (``guest/workloads/lib.sh``) read ``/proc/interrupts``
and ``/proc/stat`` just before the region of interest opens and just after it closes, and print
both snapshots once it has closed, so that the console shows, for a ``--cmd`` run::

    === PYSCHED BEGIN ===
    <the command's output>
    === /proc/interrupts before ===
    <cat /proc/interrupts>
    === /proc/stat before ===
    <cat /proc/stat>
    === /proc/interrupts after ===
    ...
    === /proc/stat after ===
    ...
    === PYSCHED EXIT <rc> ===

(a workload prints its own lines before and after). Traces made before that change show the
"before" snapshots between ``BEGIN`` and the command's output; the functions here read both.
The "before" snapshots start with the guest's devices, ``=== /proc/iomem before ===``,
``=== /proc/ioports before ===`` and ``=== /sys/bus/pci before ===`` (one line per PCI device;
:mod:`pysched.capture.devices`), in traces recorded since the plugin wrote ``device_requests``.

The serial console ends lines with ``\\r\\n`` and the firmware's escape sequences may share a
line with the first marker, so markers are searched for, not matched as whole lines.
"""
from __future__ import annotations

import re

BEGIN_MARK = "=== PYSCHED BEGIN ==="
#: The start of the guest's last line, ``=== PYSCHED EXIT <rc> ===``.
EXIT_MARK = "=== PYSCHED EXIT"
_EXIT_RE = re.compile(r"=== PYSCHED EXIT (-?\d+) ===")
_HEADER_RE = re.compile(
    r"^=== (/proc/(?:interrupts|stat|iomem|ioports)|/sys/bus/pci) (before|after) ===\s*$")
#: The key prefix of each snapshot in :func:`proc_sections`.
_SECTION_KIND = {"/proc/interrupts": "interrupts", "/proc/stat": "stat",
                 "/proc/iomem": "iomem", "/proc/ioports": "ioports", "/sys/bus/pci": "pci"}
# A /proc/stat line: a key ("cpu", "cpu0", "intr", "procs_running", ...) then numbers.
_STAT_LINE_RE = re.compile(r"^[a-z_]+\d*(?:\s+\d+)+\s*$")
_ANSI_RE = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[@-Z\\-_c])")


def _snapshot_end(lines: list[str], i: int, kind: str) -> int:
    """Where a ``/proc`` snapshot whose first line is ``lines[i]`` ends (the index after it).

    An interrupts (or device) snapshot ends at the next ``===`` line. The command's output follows the
    "stat" snapshot with no marker between them, so that one ends after its ``softirq`` line
    (the last line of ``/proc/stat``) or at the first line that is not ``key number...``.
    """
    while i < len(lines) and not lines[i].startswith("=== "):
        if kind == "stat":
            if not _STAT_LINE_RE.match(lines[i]):
                break
            i += 1
            if lines[i - 1].startswith("softirq"):
                break
            continue
        i += 1
    return i


def console_text(raw: bytes) -> str:
    """Decode a console log and normalise its line ends to ``\\n``.

    Parameters
    ----------
    raw : bytes
        QEMU's stdout.

    Returns
    -------
    str
        The text (undecodable bytes replaced).
    """
    return raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def guest_exit_status(text: str) -> int | None:
    """The command's exit status from the last ``=== PYSCHED EXIT <rc> ===`` line.

    Parameters
    ----------
    text : str
        The console text.

    Returns
    -------
    int or None
        The status, or None when the line is missing (guest crashed or was stopped).
    """
    found = _EXIT_RE.findall(text)
    return int(found[-1]) if found else None


def proc_sections(text: str) -> dict[str, str | None]:
    """The raw ``/proc/interrupts``, ``/proc/stat`` and device snapshots the guest printed.

    Parameters
    ----------
    text : str
        The console text (``\\n`` line ends).

    Returns
    -------
    dict
        Keys ``interrupts_before``, ``stat_before``, ``interrupts_after``, ``stat_after``,
        ``iomem_before``, ``ioports_before``, ``pci_before``; values are the section text
        (newline-terminated) or None when not found. "before" is the first such section in
        the log, "after" the last one.

    Notes
    -----
    A snapshot ends as :func:`_snapshot_end` says.
    """
    lines = text.split("\n")
    found: dict[str, str | None] = {
        "interrupts_before": None,
        "stat_before": None,
        "interrupts_after": None,
        "stat_after": None,
        "iomem_before": None,
        "ioports_before": None,
        "pci_before": None,
    }
    i = 0
    while i < len(lines):
        m = _HEADER_RE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        kind = _SECTION_KIND[m.group(1)]
        key = f"{kind}_{m.group(2)}"
        j = _snapshot_end(lines, i + 1, kind)
        body = lines[i + 1:j]
        # Drop a blank tail (the console's last empty line).
        while body and not body[-1].strip():
            body.pop()
        section = "\n".join(body) + "\n" if body else ""
        if m.group(2) == "before" and found[key] is None:
            found[key] = section
        elif m.group(2) == "after":
            found[key] = section
        i = j
    return found


def parse_interrupts(text: str) -> dict[str, list[int]]:
    """Parse a ``/proc/interrupts`` snapshot.

    Parameters
    ----------
    text : str
        The file's contents: a ``CPU0 CPU1 ...`` header, then one line per interrupt source.

    Returns
    -------
    dict
        ``{irq_name: [count per cpu]}``, e.g. ``{"0": [43, 0], "LOC": [579, 648], "ERR": [0]}``.
        The name is the label before the colon (an IRQ number or a mnemonic); lines that give
        fewer counts than CPUs (``ERR``, ``MIS``: one system-wide count) keep what they give.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    ncpu = len(re.findall(r"\bCPU\d+\b", lines[0]))
    result: dict[str, list[int]] = {}
    for line in lines[1:] if ncpu else lines:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        counts: list[int] = []
        for tok in rest.split():
            if ncpu and len(counts) == ncpu:
                break
            if not tok.isdigit():
                break
            counts.append(int(tok))
        result[name.strip()] = counts
    return result


def parse_stat(text: str) -> dict[str, list[int]]:
    """Parse a ``/proc/stat`` snapshot into ``{key: [numbers]}``.

    Parameters
    ----------
    text : str
        The file's contents.

    Returns
    -------
    dict
        E.g. ``{"cpu": [8, 0, 388, ...], "cpu0": [...], "ctxt": [1217], "intr": [...]}``.
    """
    result: dict[str, list[int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and all(p.isdigit() for p in parts[1:]):
            result[parts[0]] = [int(p) for p in parts[1:]]
    return result


def command_output(text: str) -> str | None:
    """What the command printed: the lines after ``=== PYSCHED BEGIN ===`` up to the last
    ``/proc`` snapshot, without the snapshots.

    Parameters
    ----------
    text : str
        The console text (``\\n`` line ends).

    Returns
    -------
    str or None
        The output, or None when the guest did not print the begin marker and an "after"
        snapshot (it crashed or was stopped).
    """
    lines = text.split("\n")
    try:
        start = next(i for i, ln in enumerate(lines) if BEGIN_MARK in ln)
        end = max(i for i, ln in enumerate(lines)
                  if ln.strip() == "=== /proc/stat after ===")
    except (StopIteration, ValueError):
        return None
    kept = _without_snapshots(lines[start + 1:end])
    return "\n".join(kept) + ("\n" if kept else "")


def _without_snapshots(lines: list[str]) -> list[str]:
    """``lines`` without the ``/proc`` snapshots (their headers and bodies)."""
    kept: list[str] = []
    i = 0
    while i < len(lines):
        m = _HEADER_RE.match(lines[i].strip())
        if not m:
            kept.append(lines[i])
            i += 1
            continue
        i = _snapshot_end(lines, i + 1, "stat" if m.group(1) == "/proc/stat" else "interrupts")
    return kept


def tail_lines(text: str, n: int = 40) -> str:
    """The last ``n`` non-empty-tail lines of the console, for error reports."""
    # Terminal escape sequences (the firmware clears the screen) would garble a terminal.
    lines = _ANSI_RE.sub("", text).rstrip("\n").split("\n")
    return "\n".join(lines[-n:])


def guest_messages(text: str) -> str:
    """What the guest printed from ``=== PYSCHED BEGIN ===`` on, without the ``/proc``
    snapshots: the command's or workload's own messages, for error reports.

    Parameters
    ----------
    text : str
        The console text (``\\n`` line ends).

    Returns
    -------
    str
        The remaining lines (the whole text when the begin marker is missing).
    """
    start = text.find(BEGIN_MARK)
    body = text[start + len(BEGIN_MARK):] if start >= 0 else text
    return "\n".join(_without_snapshots(body.split("\n"))).strip("\n") + "\n"
