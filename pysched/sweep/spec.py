"""Sweep files: a TOML grid (or list) of sandbox points, validated before any run.

A sweep file has an optional ``[sweep]`` table and any number of ``[[grid]]`` and ``[[point]]``
tables (see ``sweeps/example.toml``)::

    [sweep]
    epoch_ms = 3.0                 # epoch length in simulated ms (default 3)
    epochs = 5                     # optional window: every run stops after 5 epochs (the
                                   # studies' --epochs); left out, every run goes to its end
    machine = "machine.toml"       # optional base machine (models.machine.MachineConfig)

    [[grid]]                       # every combination of the listed values
    trace = ["../data/dss-mem"]    # trace directories, relative to this file
    policy = ["linux", "schedtask"]
    cores = [8, 16]
    load = [1, 2]                  # the paper's load kX (see load_unit)
    load_unit = "machine"          # "machine" (default): kX on C cores is k traced vCPUs'
                                   # work per core; "copies": load copies of the trace
    l1i_kb = [16, 32, 64]          # L1 i-cache size (ways, line, latency of the base machine)
    levels = [2, 3]                # cache levels (pysched.sweep.geometry)
    heatmap_bits = [128, 512]      # Page-heatmap size, for policies that have one

    [[point]]                      # one point: the same keys with single values
    trace = "../data/dss-mem"
    policy = "schedtask:stealing=none"

``trace`` and ``policy`` are required; the others default to 8 cores, load 1X (relative to the
machine: :func:`pysched.evaluation.runner.copies_for`), a 32 KB i-cache,
3 levels and the policy's own heatmap size. In a grid, ``heatmap_bits`` multiplies only the
policies that take it (``linux`` runs once); a ``[[point]]`` that gives it to a policy without
one is an error. Points that two tables share are run once.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pysched.constants import EPOCH_MS_RANGE, LOAD_MACHINE, LOAD_UNITS
from pysched.models.configio import ConfigError
from pysched.models.machine import MachineConfig
from pysched.policies import REGISTRY, get_policy
from pysched.policies.files import source_digest
from pysched.sandbox.switch_cost import SWITCH_COSTS, TRACED

from .geometry import LEVELS, base_machine

#: Keys of a grid or point table, with their defaults (``None``: required or policy default).
DIMENSIONS: dict[str, Any] = {"trace": None, "policy": None, "cores": 8, "load": 1,
                              "load_unit": LOAD_MACHINE, "l1i_kb": 32, "levels": 3,
                              "heatmap_bits": None, "switch_cost": TRACED}
#: Keys of the ``[sweep]`` table.
SWEEP_KEYS = ("epoch_ms", "epochs", "machine")
#: Bumped when a change would make an old result file wrong for the same point. 2: ``load``
#: became relative to the machine (``load_unit``); version 1's load was copies of the trace.
#: 3: the capture harness's own work is left out of the replayed workload. 4: SuperFunction
#: boundaries are no scheduling points and ``linux`` has wake-up preemption and vruntime
#: placement (:mod:`pysched.sandbox.engine`). 5: results have ``copy_fairness``; SchedTask's
#: similar-work stealing also takes work of zero overlap (its side only); a hardware interrupt
#: preempts a running bottom half and is picked before queued bottom halves, and SchedTask
#: routes device interrupts only (per-CPU vectors stay where they arrive); an interrupted thread
#: resumes after the handlers instead of queueing behind other work. 6: before its first TAlloc
#: SchedTask leaves device interrupts where they arrive (they all went to core 0). 7: idle
#: cores look for work (IPI and tick), the traced switch path is the default cost, copies
#: share the kernel's data and start out of phase, SchedTask pays TMigrate and TAlloc; points
#: carry the model's settings (``model``) and a window (``epochs``). 8: device interrupts that
#: answer a traced request come a traced latency after it runs (``device_timing`` closed).
#: 9: results have ``l3_miss_held_share``. 10: ``as-traced`` runs, of the next items of the
#: vCPUs a core hosts, the first ready one in traced order instead of waiting for the first.
RESULT_VERSION = 10


class SweepSpecError(ValueError):
    """A sweep file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Point:
    """One sandbox run of a sweep.

    Attributes
    ----------
    trace : str
        Absolute path of the trace directory.
    policy : str
        Canonical policy spec (``name:key=value:...``, keys sorted; policies with a
        Page-heatmap always carry ``heatmap_bits``).
    cores, load, l1i_kb, levels : int
    load_unit : str
        What ``load`` counts (:data:`pysched.constants.LOAD_UNITS`).
    heatmap_bits : int or None
        The policy's Page-heatmap size (None for a policy without one).
    epoch_ms : float
    machine : MachineConfig
        The one-core base machine (hierarchy with this point's i-cache and levels).
    switch_cost : str
        The switch-cost model (:data:`pysched.sandbox.switch_cost.SWITCH_COSTS`).
    model : tuple of (str, value)
        :class:`~pysched.sandbox.SandboxConfig` fields of the model's rules other than their
        defaults (``os_migration_cycles``, ``idle_retry``, ``kernel_data``, ``copy_phase``,
        ``ifetch_penalty``, ...), sorted by name: what an ablation changes.
    epochs : int or None
        Stop after this many epochs (a window, ``SandboxConfig.max_epochs``); None: the
        whole replay.
    """

    trace: str
    policy: str
    cores: int
    load: int
    load_unit: str
    l1i_kb: int
    levels: int
    heatmap_bits: int | None
    epoch_ms: float
    machine: MachineConfig
    switch_cost: str = TRACED
    model: tuple = ()
    epochs: int | None = None

    @property
    def policy_name(self) -> str:
        return self.policy.partition(":")[0]

    @property
    def key(self) -> str:
        """A stable hash of everything that determines the run's result (names its file)."""
        data = {"v": RESULT_VERSION, "trace": self.trace, "policy": self.policy,
                "cores": self.cores, "load": self.load, "load_unit": self.load_unit,
                "epoch_ms": self.epoch_ms, "machine": dataclasses.asdict(self.machine),
                "switch_cost": self.switch_cost}
        if self.model:
            data["model"] = [[k, v] for k, v in self.model]
        if digest := source_digest(self.policy_name):  # a policy file: edited, runs again
            data["policy_source"] = digest
        if self.epochs is not None:
            data["epochs"] = self.epochs
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:20]

    def columns(self) -> dict[str, Any]:
        """The point's parameters as result columns."""
        return {"point": self.key, "result_version": RESULT_VERSION,
                "trace_path": self.trace, "policy": self.policy,
                "policy_name": self.policy_name, "heatmap_bits": self.heatmap_bits,
                "cores": self.cores, "load": self.load, "load_unit": self.load_unit,
                "l1i_kb": self.l1i_kb,
                "levels": self.levels, "epoch_ms": self.epoch_ms,
                "switch_cost": self.switch_cost,
                "model": ";".join(f"{k}={v}" for k, v in self.model),
                "window_epochs": -1 if self.epochs is None else self.epochs}

    def label(self) -> str:
        return (f"{Path(self.trace).name} {self.policy} cores={self.cores} load={self.load} "
                f"({self.load_unit}) "
                f"l1i={self.l1i_kb}KB levels={self.levels}"
                f" switch_cost={self.switch_cost}"
                + "".join(f" {k}={v}" for k, v in self.model)
                + ("" if self.epochs is None else f" epochs={self.epochs}"))


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep file: its points (deduplicated, grouped by trace) and settings."""

    path: Path
    points: tuple[Point, ...]
    epoch_ms: float
    machine: Path | None


def _positive_int(v: Any, where: str, top: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
        raise SweepSpecError(f"{where}: expected an integer in 1..{top}, got {v!r}")
    return v


def _one_of(v: Any, where: str, allowed: Sequence[str]) -> str:
    if v not in allowed:
        raise SweepSpecError(f"{where}: expected one of {', '.join(map(repr, allowed))}, "
                             f"got {v!r}")
    return v


def _check_trace(v: Any, where: str, root: Path) -> str:
    if not isinstance(v, str) or not v:
        raise SweepSpecError(f"{where}: expected a trace directory path, got {v!r}")
    p = (root / v).resolve()
    if not p.is_dir():
        raise SweepSpecError(f"{where}: {v!r} ({p}) is not a trace directory")
    return str(p)


def _split_policy(v: Any, where: str) -> tuple[str, dict[str, str]]:
    if not isinstance(v, str) or not v.strip():
        raise SweepSpecError(f"{where}: expected a policy name (see `pysched evaluate --list`),"
                             f" got {v!r}")
    name, _, spec = v.strip().partition(":")
    params: dict[str, str] = {}
    for item in filter(None, spec.split(":")):
        k, eq, val = item.partition("=")
        if not eq or not k.strip():
            raise SweepSpecError(f"{where}: parameter {item!r} of {v!r} is not key=value")
        params[k.strip()] = val.strip()
    if name not in REGISTRY:
        raise SweepSpecError(f"{where}: unknown policy {name!r}; registered: "
                             f"{', '.join(REGISTRY)}")
    return name, params


def canonical_policy(spec: str, where: str = "policy") -> tuple[str, int | None]:
    """The canonical form of a policy spec ``name:key=value...`` (keys sorted, the heatmap
    size made explicit) and its heatmap size (None: none); errors name ``where``."""
    return _make_policy(*_split_policy(spec, where), where)


def _make_policy(name: str, params: dict[str, str], where: str) -> tuple[str, int | None]:
    """The canonical spec and heatmap size; the policy is built once to validate it."""
    spec = ":".join([name, *(f"{k}={params[k]}" for k in sorted(params))])
    try:
        pol = get_policy(spec)
    except ValueError as e:
        raise SweepSpecError(f"{where}: {e}") from None
    bits = pol.heatmap_bits or None  # 0: the policy collects no Page-heatmap
    if bits is not None and "heatmap_bits" not in params:
        # the default made explicit, so "schedtask" and "schedtask:heatmap_bits=512" are one
        return _make_policy(name, {**params, "heatmap_bits": str(bits)}, where)
    return spec, (None if bits is None else int(bits))


def _has_heatmap(name: str) -> bool:
    return bool(get_policy(name).heatmap_bits)


def _values(table: dict, key: str, where: str, single: bool) -> list:
    v = table.get(key, DIMENSIONS[key])
    if v is None and key in ("trace", "policy"):
        raise SweepSpecError(f"{where}: missing key {key!r}")
    if isinstance(v, list):
        if single:
            raise SweepSpecError(f"{where}.{key}: a [[point]] takes one value; use a [[grid]] "
                                 f"for a list")
        if not v:
            raise SweepSpecError(f"{where}.{key}: empty list")
        return v
    return [v]


def _check_keys(table: Any, known: Sequence[str], where: str, what: str = "key") -> None:
    """Refuse a non-table or a key outside ``known``, naming it."""
    if not isinstance(table, dict):
        raise SweepSpecError(f"{where}: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise SweepSpecError(f"{where}: unknown {what}(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(known)}")


def _table_points(table: Any, where: str, root: Path, epoch_ms: float,
                  base: MachineConfig | None, single: bool) -> list[Point]:
    _check_keys(table, list(DIMENSIONS), where)
    vals = {k: _values(table, k, where, single) for k in DIMENSIONS}
    multi = (lambda k, i: f"{where}.{k}" if single or not isinstance(table.get(k), list)
             else f"{where}.{k}[{i}]")
    traces = [_check_trace(v, multi("trace", i), root) for i, v in enumerate(vals["trace"])]
    policies = [_split_policy(v, multi("policy", i)) for i, v in enumerate(vals["policy"])]
    cores = [_positive_int(v, multi("cores", i), 1024) for i, v in enumerate(vals["cores"])]
    loads = [_positive_int(v, multi("load", i), 64) for i, v in enumerate(vals["load"])]
    units = [_one_of(v, multi("load_unit", i), LOAD_UNITS)
             for i, v in enumerate(vals["load_unit"])]
    costs = [_one_of(v, multi("switch_cost", i), SWITCH_COSTS)
             for i, v in enumerate(vals["switch_cost"])]
    levels = []
    for i, v in enumerate(vals["levels"]):
        if v not in LEVELS or isinstance(v, bool):
            raise SweepSpecError(f"{multi('levels', i)}: expected 2 or 3, got {v!r}")
        levels.append(v)
    l1i = [_positive_int(v, multi("l1i_kb", i), 1 << 20) for i, v in enumerate(vals["l1i_kb"])]
    machines = {}
    for i, kb in enumerate(l1i):
        for lv in levels:
            try:
                machines[kb, lv] = base_machine(kb, lv, base)
            except (ConfigError, ValueError) as e:
                raise SweepSpecError(f"{multi('l1i_kb', i)}: {kb} KB: {e}") from None
    bits_given = "heatmap_bits" in table
    bits = [None if v is None else _positive_int(v, multi("heatmap_bits", i), 1 << 20)
            for i, v in enumerate(vals["heatmap_bits"])]
    pols: list[tuple[str, int | None]] = []
    for i, (name, params) in enumerate(policies):
        pw = multi("policy", i)
        if not bits_given or not _has_heatmap(name):
            if bits_given and single:
                raise SweepSpecError(f"{where}.heatmap_bits: policy {name!r} has no "
                                     f"Page-heatmap")
            pols.append(_make_policy(name, params, pw))
            continue
        if "heatmap_bits" in params:
            raise SweepSpecError(f"{pw}: gives heatmap_bits and so does {where}.heatmap_bits")
        pols.extend(_make_policy(name, {**params, "heatmap_bits": str(b)}, pw) for b in bits)
    return [Point(t, pol, c, k, u, kb, lv, hb, epoch_ms, machines[kb, lv], sc)
            for t, (pol, hb), c, k, u, kb, lv, sc in itertools.product(
                traces, pols, cores, loads, units, l1i, levels, costs)]


def _as_tables(data: dict, key: str, where: str) -> list:
    v = data.get(key, [])
    if isinstance(v, dict):  # a single [grid] table
        return [v]
    if not isinstance(v, list):
        raise SweepSpecError(f"{where}: {key!r} must be a table or an array of tables "
                             f"([[{key}]])")
    return v


def parse_spec(data: dict, where: str, root: Path) -> Sweep:
    """Validate sweep data (a parsed TOML file) into a :class:`Sweep`.

    Parameters
    ----------
    data : dict
        The file's tables.
    where : str
        Prefix of error messages (the file name).
    root : Path
        Directory that relative trace and machine paths start from.

    Raises
    ------
    SweepSpecError
        Naming the file and key of the first bad value.
    """
    _check_keys(data, ("sweep", "grid", "point"), where, "table")
    head = data.get("sweep", {})
    _check_keys(head, SWEEP_KEYS, f"{where}: sweep")
    epoch_ms = head.get("epoch_ms", 3.0)
    lo, hi = EPOCH_MS_RANGE
    if isinstance(epoch_ms, bool) or not isinstance(epoch_ms, (int, float)) \
            or not math.isfinite(epoch_ms) or not lo <= epoch_ms <= hi:
        raise SweepSpecError(f"{where}: sweep.epoch_ms: expected a number of milliseconds "
                             f"from {lo:g} to {hi:g}, got {epoch_ms!r}")
    window = head.get("epochs")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise SweepSpecError(f"{where}: sweep.epochs: expected a whole number of epochs of at "
                             f"least 1, got {window!r}")
    machine_path, base = None, None
    if "machine" in head:
        if not isinstance(head["machine"], str):
            raise SweepSpecError(f"{where}: sweep.machine: expected a file path")
        machine_path = (root / head["machine"]).resolve()
        try:
            base = MachineConfig.load(machine_path)
        except (ConfigError, OSError) as e:
            raise SweepSpecError(f"{where}: sweep.machine: {e}") from None
    points: dict[str, Point] = {}
    for key, single in (("grid", False), ("point", True)):
        for i, table in enumerate(_as_tables(data, key, where)):
            for p in _table_points(table, f"{where}: {key}[{i}]", root, float(epoch_ms), base,
                                   single):
                if window is not None:
                    p = dataclasses.replace(p, epochs=window)
                points.setdefault(p.key, p)
    if not points:
        raise SweepSpecError(f"{where}: no [[grid]] or [[point]] table: nothing to run")
    # grouped by trace, so that each worker mostly meets one trace at a time
    order = {t: i for i, t in enumerate(dict.fromkeys(p.trace for p in points.values()))}
    ordered = sorted(points.values(), key=lambda p: order[p.trace])
    return Sweep(Path(where), tuple(ordered), float(epoch_ms), machine_path)


def load_spec(path: str | Path) -> Sweep:
    """Read and validate a sweep TOML file; relative paths in it start from its directory.

    Raises
    ------
    SweepSpecError
        When the file cannot be read or parsed, or naming the key of a bad value.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise SweepSpecError(f"{p}: cannot read ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SweepSpecError(f"{p}: cannot parse ({e})") from None
    return parse_spec(data, str(p), p.resolve().parent)


__all__ = ["DIMENSIONS", "RESULT_VERSION", "Point", "Sweep", "SweepSpecError", "load_spec", "parse_spec"]
