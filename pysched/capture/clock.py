"""The guest's clock in a traced run: from the instructions the guest retires (the default), or
from the host's clock.

``--clock insns`` (the default) runs QEMU with ``-icount shift=S,sleep=on``. While a vCPU runs,
the guest's clock then advances ``2**S`` ns for every instruction any vCPU retires: the machine
retires ``1e9 / 2**S`` instructions a guest second, shared by the vCPUs that run, so that with
all N vCPUs busy each retires ``1e9 / (2**S * N)`` a guest second. That per-vCPU rate is what
``--insn-rate`` names; its default is the fastest QEMU allows (S = 0: one instruction a
nanosecond for the machine, 500 M instructions a second per vCPU on 2 vCPUs). A vCPU that runs
alone gets the whole machine's rate. While every vCPU is idle the clock follows the host's
(``sleep=on``): disk and network waits last as long in the guest as on the host, so that guest
timers (TCP retransmission, the block layer's timeout) do not expire during a wait that
``sleep=off`` would skip in one jump. The timer interrupts a busy vCPU takes per instruction
then depend on the kernel's HZ and this rate, not on how fast the host emulates the guest.

-icount needs QEMU's single-threaded TCG: one host thread runs the vCPUs in turn (QEMU refuses
``thread=multi`` with it). The plugin tells the vCPUs apart itself there (qemu-plugin/README.md,
round-robin TCG). ``--clock host`` is QEMU's default: multi-threaded TCG and the host's clock,
under which a guest second holds as many instructions as the host emulates in a second (how
all traces before this option were recorded).
"""
from __future__ import annotations

import math
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The clocks ``--clock`` accepts.
CLOCKS = ("insns", "host")
DEFAULT_CLOCK = "insns"

#: Instructions the machine retires a guest second under ``-icount shift=0``.
MACHINE_RATE = 1e9

#: QEMU's largest ``-icount`` shift.
MAX_SHIFT = 10

#: How close (in shifts, log2 of the rate) a requested rate must be to one QEMU gives.
_SHIFT_TOLERANCE = 0.01

_RATE_RE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgG]?)\s*")
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}

#: Seconds the QEMU probe (:func:`check_qemu_accepts`) may take.
_PROBE_SECONDS = 30.0


@dataclass(frozen=True)
class GuestClock:
    """How the guest's clock runs.

    Attributes
    ----------
    source : {"insns", "host"}
        ``insns``: QEMU's ``-icount``; ``host``: the host's clock.
    vcpus : int
        The guest's vCPUs.
    shift : int or None
        The ``-icount`` shift (``insns`` only): ``2**shift`` ns of guest time an instruction.
    """

    source: str
    vcpus: int
    shift: int | None = None

    @property
    def machine_rate(self) -> float | None:
        """Instructions the machine retires a guest second while a vCPU runs (None: host)."""
        return None if self.shift is None else MACHINE_RATE / 2**self.shift

    @property
    def insn_rate(self) -> float | None:
        """Instructions a vCPU retires a guest second with every vCPU busy (None: host)."""
        rate = self.machine_rate
        return None if rate is None else rate / self.vcpus

    @property
    def icount_option(self) -> str | None:
        """The value of QEMU's ``-icount`` (None: host)."""
        return None if self.shift is None else f"shift={self.shift},sleep=on"

    def qemu_args(self) -> list[str]:
        """QEMU's accelerator and clock options."""
        if self.shift is None:
            return ["-accel", "tcg,thread=multi"]
        return ["-accel", "tcg,thread=single", "-icount", str(self.icount_option)]

    def manifest(self, hz: int | None) -> dict[str, Any]:
        """The manifest's ``guest_clock``; ``hz`` is the guest kernel's CONFIG_HZ if known."""
        return {"source": self.source, "icount": self.icount_option,
                "machine_insn_rate": self.machine_rate, "insn_rate_per_vcpu": self.insn_rate,
                "hz": hz}


def format_rate(rate: float) -> str:
    """``rate`` instructions a second as ``--insn-rate`` spells it (``500M``, ``62.5M``)."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if rate >= scale:
            return f"{rate / scale:g}{unit}"
    return f"{rate:g}"


def rates(vcpus: int) -> list[float]:
    """The per-vCPU rates ``--insn-rate`` accepts with ``vcpus`` vCPUs, fastest first."""
    return [MACHINE_RATE / 2**s / vcpus for s in range(MAX_SHIFT + 1)]


def parse_rate(text: str) -> float:
    """An instruction rate such as ``500M``, ``2.5e8`` or ``1G`` (instructions a second).

    Raises
    ------
    ValueError
        When it is not a positive finite number (the message names ``--insn-rate``).
    """
    m = _RATE_RE.fullmatch(text)
    rate = float(m.group(1)) * _SCALE[m.group(2).lower()] if m else math.nan
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"--insn-rate {text!r}: not a positive finite number of instructions "
                         "a second per vCPU (e.g. 500M, 250M)")
    return rate


def guest_clock(source: str, rate_text: str | None, vcpus: int) -> GuestClock:
    """The clock ``--clock SOURCE --insn-rate RATE`` asks for on ``vcpus`` vCPUs.

    Parameters
    ----------
    source : {"insns", "host"}
    rate_text : str or None
        ``--insn-rate`` (None: the fastest, shift 0).
    vcpus : int

    Raises
    ------
    ValueError
        For an unknown clock, a rate that is not a positive finite number, a rate with
        ``--clock host``, or a rate QEMU's ``-icount`` cannot give with this many vCPUs (the
        message lists those it can).
    """
    if source not in CLOCKS:
        raise ValueError(f"--clock {source!r}: use one of {', '.join(CLOCKS)}")
    if source == "host":
        if rate_text is not None:
            raise ValueError("--insn-rate sets the guest clock of --clock insns; --clock host "
                             "runs the guest on the host's clock")
        return GuestClock("host", vcpus)
    if rate_text is None:
        return GuestClock("insns", vcpus, 0)
    rate = parse_rate(rate_text)
    shift = math.log2(MACHINE_RATE / (rate * vcpus))
    nearest = round(shift)
    if abs(shift - nearest) > _SHIFT_TOLERANCE or not 0 <= nearest <= MAX_SHIFT:
        allowed = ", ".join(format_rate(r) for r in rates(vcpus)[:5])
        why = ("above the fastest" if nearest < 0 else "not one of the rates")
        raise ValueError(
            f"--insn-rate {rate_text}: {why} QEMU's -icount gives with --vcpus {vcpus}: "
            f"{allowed}, ... (1 G instructions a guest second for the machine, halved at each "
            f"of -icount's shifts 0-{MAX_SHIFT}, shared by the vCPUs)")
    return GuestClock("insns", vcpus, nearest)


def check_qemu_accepts(qemu: str, clock: GuestClock) -> None:
    """Start ``qemu`` with ``clock``'s options on an empty machine and quit it at once.

    Raises
    ------
    ValueError
        When QEMU refuses them (the message names the option and gives QEMU's words).
    """
    if clock.shift is None:
        return
    argv = [qemu, "-M", "none", *clock.qemu_args(), "-display", "none", "-nodefaults", "-S",
            "-monitor", "stdio"]
    try:
        r = subprocess.run(argv, input="quit\n", capture_output=True, text=True,
                           timeout=_PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError(f"--clock insns: could not try QEMU's -icount {clock.icount_option}: "
                         f"{e}") from None
    if r.returncode != 0:
        said = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise ValueError(f"--clock insns: QEMU refuses -icount {clock.icount_option} "
                         f"({' '.join(clock.qemu_args())}): {said}")


_HZ_RE = re.compile(r"^CONFIG_HZ=(\d+)$", re.M)


def kernel_hz(config: Path) -> int | None:
    """CONFIG_HZ of the kernel configuration ``config`` (None when it is not there)."""
    try:
        m = _HZ_RE.search(config.read_text(errors="replace"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


__all__ = ["CLOCKS", "DEFAULT_CLOCK", "GuestClock", "MACHINE_RATE", "MAX_SHIFT",
           "check_qemu_accepts", "format_rate", "guest_clock", "kernel_hz", "parse_rate",
           "rates"]
