"""An ablation of the sandbox's model: what decides a policy's result against a baseline.

Each **factor** is a rule of the model with its settings; the first setting is the default
(:data:`FACTORS`). The study runs each policy under study (``--policy``, repeatable) and
the baseline on every trace at

* ``defaults``: every factor at its default (a plain ``pysched evaluate`` with the same
  cores, load and window);
* each factor changed alone from the defaults, to each of its other settings;
* ``paper``: every assumption the policy's paper states (:attr:`Policy.paper_model
  <pysched.policies.base.Policy.paper_model>`), the rest at the defaults;

and reports, per (trace, factor, setting), the policy's gain over the baseline (events per
second where the workload defines events, else instruction throughput), both idle shares,
the switch and migration cycle shares and the i-cache hit rates of each. The policy's own
parameters are factors too (``--factor schedtask:steal=same,any``: the first setting given is
the one the defaults use).

The runs are points of the sweep machinery (:mod:`pysched.sweep`): on Dask, stored as they
finish under ``OUT/points``, so a re-run resumes.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pysched.constants import LOAD_MACHINE
from pysched.policies import REGISTRY, get_policy
from pysched.sandbox.device_loop import DEVICE_TIMINGS
from pysched.sandbox.switch_cost import SWITCH_COSTS
from pysched.sweep.spec import RESULT_VERSION


@dataclass(frozen=True)
class Factor:
    """A rule of the model and its settings (the first is the default).

    Attributes
    ----------
    name : str
    settings : tuple of str
    what : str
        One line for the report.
    """

    name: str
    settings: tuple[str, ...]
    what: str

    def config(self, setting: str) -> dict[str, Any]:
        """What ``setting`` sets: ``switch_cost`` or :class:`SandboxConfig` fields."""
        if self.name == "switch_cost":
            return {"switch_cost": setting}
        if self.name == "move_cost":
            return {"os_migration_cycles": int(setting)}
        if self.name == "idle_retry":
            return {"idle_retry": setting == "on"}
        return {self.name: setting}


#: The model's factors; the first setting is the default.
FACTORS: dict[str, Factor] = {f.name: f for f in (
    Factor("switch_cost", SWITCH_COSTS, "context switch: the traced path through the caches, "
           "seed 001's 1,000 cycles, or nothing"),
    Factor("move_cost", ("0", "1000"), "extra cycles of an OS move of a thread to another core"),
    Factor("idle_retry", ("on", "off"), "idle cores look for work (IPI, tick) or only when "
           "work is queued on them"),
    Factor("kernel_data", ("shared", "per-copy"), "copies share the kernel's data, or each "
           "has all of its data"),
    Factor("copy_phase", ("offset", "in-phase"), "copies start at seeded offsets or together"),
    Factor("ifetch_penalty", ("difference", "full"), "a fetch beyond the L1 stalls for the "
           "latency difference to the L1, or the full latency"),
    Factor("device_timing", DEVICE_TIMINGS, "device interrupts a traced latency after their "
           "simulated request (closed loop), or at their traced times"),
)}


class AblationError(ValueError):
    """A bad factor, setting or policy parameter (the message names it and the choices)."""


def _names(policies: str | Sequence[str]) -> list[str]:
    return [policies] if isinstance(policies, str) else list(policies)


def policy_factor(spec: str, policies: str | Sequence[str], baseline: str) -> Factor:
    """A policy parameter as a factor: ``NAME:param=v1,v2,...`` (``NAME`` is the registry
    name of one of the ``policies`` or of the baseline; ``v1`` is the default setting)."""
    name, sep, rest = spec.partition(":")
    param, eq, values = rest.partition("=")
    settings = tuple(v.strip() for v in values.split(",") if v.strip())
    if not (sep and eq and param.strip() and settings):
        raise AblationError(f"--factor {spec!r}: a policy factor is NAME:param=v1,v2 (e.g. "
                            f"schedtask:steal=same,any)")
    names = {p.partition(":")[0] for p in _names(policies)} | {baseline.partition(":")[0]}
    if name not in names:
        raise AblationError(f"--factor {spec!r}: {name!r} is neither a policy under study nor "
                            f"the baseline ({', '.join(sorted(names))})")
    cls = REGISTRY[name]
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    if param.strip() not in params:
        raise AblationError(f"--factor {spec!r}: policy {name!r} has no parameter "
                            f"{param.strip()!r}; its parameters: {', '.join(params) or 'none'}")
    for v in settings:
        try:
            get_policy(f"{name}:{param.strip()}={v}")
        except ValueError as e:
            raise AblationError(f"--factor {spec!r}: {e}") from None
    return Factor(f"{name}:{param.strip()}", settings, f"{name}'s parameter {param.strip()}")


def parse_factor(spec: str, policies: str | Sequence[str], baseline: str) -> Factor:
    """A ``--factor``: a model factor restricted to some settings (``idle_retry=on,off``) or
    a policy parameter (:func:`policy_factor`)."""
    if ":" in spec.partition("=")[0]:
        return policy_factor(spec, policies, baseline)
    name, eq, values = spec.partition("=")
    f = FACTORS.get(name.strip())
    if f is None:
        raise AblationError(f"--factor {spec!r}: unknown factor {name.strip()!r}; factors: "
                            f"{', '.join(FACTORS)}, or POLICY:param=v1,v2")
    if not eq:
        return f
    settings = tuple(v.strip() for v in values.split(",") if v.strip())
    bad = [v for v in settings if v not in f.settings]
    if bad or not settings:
        raise AblationError(f"--factor {spec!r}: {f.name} has settings "
                            f"{', '.join(f.settings)}; got {', '.join(bad) or 'none'}")
    # the default stays first: every other setting is a change from it
    return Factor(f.name, (f.settings[0],) + tuple(v for v in settings if v != f.settings[0]),
                  f.what)


def factors_of(factors: Sequence[Factor], policy: str, baseline: str) -> list[Factor]:
    """The ``factors`` that apply to ``policy`` against ``baseline``: every model factor and
    the parameters of these two policies."""
    names = {policy.partition(":")[0], baseline.partition(":")[0]}
    return [f for f in factors if ":" not in f.name or f.name.partition(":")[0] in names]


@dataclass(frozen=True)
class Configuration:
    """One configuration of the study: a label and the factor settings it changes."""

    factor: str
    setting: str
    changes: tuple[tuple[str, str], ...]


def configurations(factors: Sequence[Factor], paper: dict[str, str]) -> list[Configuration]:
    """``defaults``, each factor's other settings alone, and ``paper`` (when it changes
    anything the factors cover; see the module)."""
    out = [Configuration("defaults", "-", ())]
    for f in factors:
        out += [Configuration(f.name, s, ((f.name, s),)) for s in f.settings[1:]]
    known = {f.name: f for f in factors}
    changes = tuple(sorted((k, v) for k, v in paper.items()
                           if k in known and v != known[k].settings[0]))
    out.append(Configuration("paper", ",".join(f"{k}={v}" for k, v in changes) or "-",
                             changes))
    return out


def _policy_spec(base: str, changes: dict[str, str]) -> str:
    """``base`` with the policy-parameter changes that name it."""
    name = base.partition(":")[0]
    extra = [f"{k.partition(':')[2]}={v}" for k, v in changes.items()
             if k.partition(":")[0] == name and ":" in k]
    return ":".join([base, *extra]) if extra else base


def points(traces: Sequence[str], policies: str | Sequence[str], baseline: str, cores: int,
           load: int, epochs: int | None, factors: Sequence[Factor], epoch_ms: float = 3.0,
           machine=None) -> tuple[dict[str, list[Configuration]], dict[tuple, Any]]:
    """Each policy's configurations (:func:`configurations` of the factors that apply to it,
    :func:`factors_of`) and the study's sweep points, keyed by (policy, trace, configuration
    index, "policy" or "baseline"). A baseline run the policies share is one point."""
    from pysched.sweep.spec import Point, canonical_policy
    from pysched.sweep.geometry import base_machine
    m = machine if machine is not None else base_machine(32, 3)
    confs: dict[str, list[Configuration]] = {}
    out = {}
    for policy in _names(policies):
        mine = factors_of(factors, policy, baseline)
        cls = REGISTRY[policy.partition(":")[0]]
        confs[policy] = configurations(mine, dict(cls.paper_model))
        defaults = {f.name: f.settings[0] for f in mine}
        for t in traces:
            for i, conf in enumerate(confs[policy]):
                settings = {**defaults, **dict(conf.changes)}
                cfg: dict[str, Any] = {}
                for f in mine:
                    if ":" not in f.name:
                        cfg.update(f.config(settings[f.name]))
                switch = cfg.pop("switch_cost", SWITCH_COSTS[0])
                model = tuple(sorted(cfg.items()))
                for role, spec in (("policy", policy), ("baseline", baseline)):
                    p, bits = canonical_policy(_policy_spec(spec, settings), f"--{role}")
                    out[(policy, t, i, role)] = Point(str(Path(t).resolve()), p, cores, load,
                                                      LOAD_MACHINE, 32, 3, bits, epoch_ms, m,
                                                      switch, model, epochs)
    return confs, out


def table(confs: dict[str, list[Configuration]], pts: dict[tuple, Any], runs: pd.DataFrame
          ) -> pd.DataFrame:
    """``ablation.csv``: one row per (policy, trace, factor, setting) from the points' run
    rows; ``policy`` is the run's policy spec (a policy factor changes its parameters) and
    ``study`` the policy under study as given."""
    by_key = runs.set_index("point")
    rows = []
    for (study, t, i, role), p in pts.items():
        if role != "policy":
            continue
        b = pts[(study, t, i, "baseline")]
        if p.key not in by_key.index or b.key not in by_key.index:
            continue
        x, y = by_key.loc[p.key], by_key.loc[b.key]
        perf = (lambda r: r["events_per_s"] if bool(r["has_events"]) else r["throughput"])
        conf = confs[study][i]
        row = {"study": study, "trace": Path(t).name, "factor": conf.factor,
               "setting": conf.setting, "policy": p.policy, "baseline": b.policy,
               "cores": p.cores, "load": p.load, "epochs": p.epochs,
               "result_version": RESULT_VERSION,
               "measure": "events/s" if bool(x["has_events"]) else "instructions/s",
               "gain": perf(x) / perf(y) - 1 if perf(y) > 0 else np.nan}
        for tag, r in (("policy", x), ("baseline", y)):
            row[f"{tag}_events_per_s"] = r["events_per_s"]
            row[f"{tag}_throughput"] = r["throughput"]
            row[f"{tag}_idle_no_work"] = r["idle_no_work"]
            row[f"{tag}_idle_work_waiting"] = r["idle_work_waiting"]
            row[f"{tag}_switch_share"] = r["switch_share"]
            row[f"{tag}_migration_share"] = r["migration_share"]
            row[f"{tag}_icache_app"] = r["icache_app"]
            row[f"{tag}_icache_os"] = r["icache_os"]
        rows.append(row)
    return pd.DataFrame(rows)


def _pct(x: float, sign: bool = False) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    return f"{100 * x:+.1f} %" if sign else f"{100 * x:.1f}"


def _stalled(df: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """Per configuration the traces on which the policy's run had no performance at all (no
    event in the window: gain -100 %, which sets the geometric mean to -100 % whatever the
    other traces say)."""
    x = df[df["gain"] <= -1.0]
    return {k: sorted(set(v["trace"])) for k, v in x.groupby(["factor", "setting"], sort=False)}


def _gains(df: pd.DataFrame) -> tuple[pd.Series, float, tuple[tuple[str, str], float] | None]:
    """Per configuration the geometric mean over the traces of (1 + gain) minus one; the gain
    at the defaults; the configuration (other than the paper's, and other than one with a
    trace of no performance, :func:`_stalled`) that moves it most, with how much (None when
    there is none)."""
    with np.errstate(divide="ignore"):  # a gain of -100 % is log 0: the mean is -100 % too
        lg = np.log1p(df["gain"].to_numpy(dtype=float))
    g = (df.assign(lg=lg).groupby(["factor", "setting"], sort=False)["lg"].mean()
         .map(np.expm1))
    base = float(g.get(("defaults", "-"), np.nan))
    moved = (g - base).drop(("defaults", "-"), errors="ignore").drop("paper", level=0,
                                                                     errors="ignore")
    moved = moved.drop(list(_stalled(df)), errors="ignore")
    if not len(moved):
        return g, base, None
    return g, base, max(moved.items(), key=lambda kv: abs(kv[1]) if np.isfinite(kv[1]) else -1)


def _traces(df: pd.DataFrame) -> str:
    n = df["trace"].nunique()
    return f"{n} trace{'s' if n != 1 else ''}"


def _gain_cell(g: pd.Series, key: tuple[str, str], stalled: dict) -> str:
    """A configuration's geometric-mean gain, naming the traces that had no performance."""
    if key not in g.index:
        return "-"
    zero = stalled.get(key)
    return _pct(g[key], True) + (f" (no event on {', '.join(zero)})" if zero else "")


def verdict(df: pd.DataFrame) -> str:
    """The ablation's reason in one line: the gain at the defaults and the factor that moves
    it most (an ``ablation.csv`` of one policy against one baseline), and the configurations
    under which a trace had no event in the window."""
    if df.empty:
        return "no finished run"
    g, base, most = _gains(df)
    line = (f"{_pct(base, True)} over {df['baseline'].iloc[0]} at the defaults "
            f"({_traces(df)})")
    if most is not None:
        (f, s), d = most
        line += (f"; the rule that moves it most: {f} = {s} ({_pct(g[(f, s)], True)}, "
                 f"{d * 100:+.1f} points)")
    zero = [f"{f} = {s} ({', '.join(t)})" for (f, s), t in _stalled(df).items()]
    if zero:
        line += f"; no event in the window under {'; '.join(zero)}"
    return line


def read_tables(dirs: Sequence[Path]) -> pd.DataFrame:
    """The ``ablation.csv`` tables that ``pysched ablate`` wrote into ``dirs``, one frame with
    the directory in column ``dir`` and the policy under study in ``study`` (tables written
    before ``--policy`` was repeatable have none: their policy's registry name).

    Raises
    ------
    AblationError
        Naming the file, when one is missing, unreadable or lacks a column.
    """
    frames = []
    for d in dirs:
        path = Path(d) / "ablation.csv"
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError) as exc:
            raise AblationError(f"{path}: cannot read the ablation's table ({exc}); "
                                "pysched ablate --out DIR writes it") from exc
        missing = {"trace", "factor", "setting", "policy", "baseline", "gain"} - set(df)
        if missing:
            raise AblationError(f"{path}: not an ablation table (no column "
                                f"{', '.join(sorted(missing))})")
        if "study" not in df:
            # a policy factor changes the policy's parameters: its name is the study
            df["study"] = df["policy"].astype(str).str.partition(":")[0]
        frames.append(df.assign(dir=str(d)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def usable(dirs: Sequence[Path], cores: int | None = None, loads: Sequence[float] = (),
           epochs: int | None = None) -> tuple[list[Path], list[str]]:
    """The ablation directories of ``dirs`` whose table this pysched's model made
    (:data:`~pysched.sweep.spec.RESULT_VERSION`; a table without the column is older) and, when
    ``cores`` is given, at a setting of the study that quotes it (those cores, one of
    ``loads``, the same window ``epochs``, None for whole replays); and, for each directory
    left out, a sentence saying why. An ablation of another model or setting explains another
    result, so it is not quoted.

    Raises
    ------
    AblationError
        As :func:`read_tables`, for a directory whose table cannot be read.
    """
    keep, notes = [], []
    for d in dirs:
        df = read_tables([d])
        versions = sorted(set(df["result_version"].dropna().astype(int))) \
            if "result_version" in df else []
        if versions != [RESULT_VERSION]:
            made = f"result version {', '.join(map(str, versions))}" if versions else \
                "a pysched that did not record its model's version"
            notes.append(f"{d}: made by {made}, not by this pysched's model (result version "
                         f"{RESULT_VERSION}); run the ablation again (a re-run into the same "
                         "directory reuses the runs it can)")
            continue
        if cores is not None:
            ep = df["epochs"] if "epochs" in df else pd.Series(dtype=float)
            theirs = (sorted(set(df["cores"].astype(int))), sorted(set(df["load"])),
                      sorted({None if pd.isna(e) else int(e) for e in ep}, key=str))
            if theirs[0] != [cores] or not set(theirs[1]) <= set(loads) or \
                    theirs[2] != [epochs]:
                notes.append(f"{d}: made at {_where(*theirs)}, not at this study's "
                             f"{_where([cores], sorted(loads), [epochs])}")
                continue
        keep.append(Path(d))
    return keep, notes


def _where(cores: list, loads: list, epochs: list) -> str:
    """``8 cores, load 2, 5 epochs`` (several values joined with ``/``)."""
    win = "/".join("whole replays" if e is None else f"{e} epochs" for e in epochs)
    return (f"{'/'.join(map(str, cores))} cores, load {'/'.join(f'{x:g}' for x in loads)}, "
            f"{win}")


def read_verdicts(dirs: Sequence[Path]) -> dict[str, str]:
    """``{policy: "<verdict> (DIR/ablation.md)"}`` from the ``ablation.csv`` that
    ``pysched ablate`` wrote into each directory, one entry per policy under study
    (:func:`read_tables`; its errors)."""
    df = read_tables(dirs)
    if df.empty:
        return {}
    return {str(name): f"{verdict(part)} ([ablation]({Path(d) / 'ablation.md'}))"
            for (d, name), part in df.groupby(["dir", "study"], sort=False)}


def gains_markdown(df: pd.DataFrame) -> str:
    """The ablations of :func:`read_tables` as one table: per configuration (the defaults,
    each factor changed alone, the paper's assumptions) each policy's gain over its baseline,
    geometric mean over its traces; empty for no table."""
    if df.empty:
        return ""
    cols: dict[str, tuple[pd.Series, dict]] = {}
    for (study, base), part in df.groupby(["study", "baseline"], sort=False):
        g, _, _ = _gains(part)
        cols[f"{study} over {str(base).partition(':')[0]}"] = (g, _stalled(part))
    rows = list(dict.fromkeys(k for g, _ in cols.values() for k in g.index if k[0] != "paper"))
    lines = ["| factor | setting | " + " | ".join(cols) + " |",
             "|" + "---|" * (2 + len(cols))]
    for key in rows:
        lines.append(f"| {key[0]} | {key[1]} | "
                     + " | ".join(_gain_cell(g, key, z) for g, z in cols.values()) + " |")
    # the paper's assumptions differ by policy: one row, each policy's own
    paper = [next((_gain_cell(g, k, z) for k in g.index if k[0] == "paper"), "-")
             for g, z in cols.values()]
    lines.append("| paper | each policy's stated assumptions | " + " | ".join(paper) + " |")
    lo, hi = df.groupby("study")["trace"].nunique().agg(["min", "max"])
    n = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return "\n".join(
        [f"{_setting(df)}: the gain of each policy over its baseline with every rule at its "
         "default, with one rule changed at a time and with the assumptions the policy's paper "
         f"states, geometric mean over {n} traces (`pysched ablate`: "
         f"{', '.join(sorted(set(df['dir'])))}, whose ablation.md has each trace's table; - "
         "where a rule does not apply to a policy).", "", *lines, ""])


def _setting(df: pd.DataFrame) -> str:
    """The cores, load and window the ablations ran at (tables that lack them: "Ablation")."""
    if not {"cores", "load", "epochs"} <= set(df):
        return "Ablation"
    parts = []
    for (c, k, e), _ in df.groupby(["cores", "load", "epochs"], dropna=False):
        window = "whole replays" if pd.isna(e) else f"the first {int(e)} epochs"
        parts.append(f"{int(c)} cores at {int(k)}X, {window}")
    return "Ablation at " + "; ".join(parts)


def markdown(df: pd.DataFrame, factors: Sequence[Factor], policies: str | Sequence[str],
             baseline: str, cores: int, load: int, epochs: int | None) -> str:
    """``ablation.md``: per policy under study, the verdict first (which factor moves the gain
    most), then per trace the table of every configuration."""
    policies = _names(policies)
    window = "the whole replay" if epochs is None else f"a window of {epochs} epochs"
    lines = [f"# Ablation: {', '.join(policies)} against {baseline}", "",
             f"{cores} cores, load {load}X, {window}. Gain: the policy's performance over the "
             f"baseline's (events per second where the workload defines events, else "
             f"instructions per second), each configuration run for both.", "",
             "Factors (the first setting is the default):", ""]
    lines += [f"- **{f.name}** ({', '.join(f.settings)}): {f.what}" for f in factors]
    lines.append("")
    if df.empty:
        return "\n".join(lines + ["No finished run.", ""])
    many = len(policies) > 1
    if many:
        lines += ["| policy | gain at the defaults | the factor that moves it most | with the "
                  "paper's assumptions |", "|---|---|---|---|"]
        for study in policies:
            part = df[df["study"] == study]
            if part.empty:
                continue
            g, base, most = _gains(part)
            zero = _stalled(part)
            mv = "-" if most is None else \
                f"{most[0][0]} = {most[0][1]} ({_pct(g[most[0]], True)})"
            pap = next((_gain_cell(g, k, zero) for k in g.index if k[0] == "paper"), "-")
            lines.append(f"| {study} | {_gain_cell(g, ('defaults', '-'), zero)} | {mv} | "
                         f"{pap} |")
        lines.append("")
    for study in policies:
        part = df[df["study"] == study]
        lines += _policy_lines(part, study, baseline, "#" * (1 + many))
    return "\n".join(lines)


def _policy_lines(df: pd.DataFrame, policy: str, baseline: str, h: str) -> list[str]:
    """:func:`markdown`'s part of one policy under study (``h``: its heading level)."""
    paper = dict(REGISTRY[policy.partition(":")[0]].paper_model)
    lines = [f"{h}# {policy} against {baseline}", ""] if len(h) > 1 else []
    if df.empty:
        return lines + ["No finished run.", ""]
    g, base, most = _gains(df)
    lines += [f"Gain at the defaults (geometric mean over {_traces(df)}): "
              f"{_pct(base, True)}."]
    if most is not None:
        (f, s), d = most
        lines += [f"The factor that moves it most: {f} = {s} ({_pct(g[(f, s)], True)}, "
                  f"{d * 100:+.1f} points)."]
    pap = [(k, v) for k, v in g.items() if k[0] == "paper"]
    if pap:
        (_, s), v = pap[0]
        lines += [f"With the paper's stated assumptions ({s if s != '-' else 'the defaults'}):"
                  f" {_pct(v, True)}."]
    if paper:
        lines += [f"The paper's assumptions: {', '.join(f'{k}={v}' for k, v in paper.items())}."]
    zero = _stalled(df)
    if zero:
        lines += ["Left out of the choice of the factor that moves it most, because a trace's "
                  "policy run had no event in the window (gain -100 %, which makes the "
                  "geometric mean -100 %): "
                  + "; ".join(f"{f} = {s} ({', '.join(t)})" for (f, s), t in zero.items())
                  + "."]
    lines += ["", "| factor | setting | gain (geo. mean) |", "|---|---|---|"]
    lines += [f"| {f} | {s} | {_gain_cell(g, (f, s), zero)} |" for f, s in g.index]
    lines.append("")
    for t, d in df.groupby("trace", sort=False):
        lines += [f"{h}## {t}" if len(h) > 1 else f"## {t}", "",
                  "| factor | setting | gain | idle: nothing queued (P / B) | idle: work "
                  "queued (P / B) | switch cycles % (P / B) | migration cycles % (P / B) | "
                  "i$ app (P / B) | i$ OS (P / B) |", "|" + "---|" * 9]
        for x in d.itertuples():
            pair = (lambda a, b: f"{_pct(a)} / {_pct(b)}")
            lines.append(
                f"| {x.factor} | {x.setting} | {_pct(x.gain, True)} | "
                f"{pair(x.policy_idle_no_work, x.baseline_idle_no_work)} | "
                f"{pair(x.policy_idle_work_waiting, x.baseline_idle_work_waiting)} | "
                f"{pair(x.policy_switch_share, x.baseline_switch_share)} | "
                f"{pair(x.policy_migration_share, x.baseline_migration_share)} | "
                f"{pair(x.policy_icache_app, x.baseline_icache_app)} | "
                f"{pair(x.policy_icache_os, x.baseline_icache_os)} |")
        lines.append("")
    return lines


__all__ = ["AblationError", "Configuration", "FACTORS", "Factor", "configurations",
           "factors_of", "gains_markdown", "markdown", "parse_factor", "points", "read_tables",
           "read_verdicts", "table", "verdict"]
