"""Write an evaluation to a directory: per-epoch Parquet, per-run CSV, a summary and plots."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from pysched.constants import LOAD_MACHINE
from pysched.labels import load_label
from pysched.sandbox.app_events import EVENTS

from .runner import performance


def _fmt(x: float, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{100 * x:+.2f} %" if pct else f"{x:.3f}"


#: The columns of :func:`core_time`, with their headings in the summary.
CORE_TIME = {"idle": "idle % of core time",
             "idle_no_work": "idle, nothing queued %",
             "idle_work_waiting": "idle, work queued %",
             "switch_cycle_share": "switch cycles % of busy",
             "switch_per_minsn": "switches per M insn",
             "migr_cycle_share": "migration cycles % of busy",
             "migr_per_minsn": "migrations per M insn",
             "policy_cycle_share": "policy routine cycles % of busy",
             "icache_app": "i$ app %", "icache_os": "i$ OS %"}


def core_time(runs: pd.DataFrame) -> pd.DataFrame:
    """Where the core time went, per (cores, load unit, load, policy), means over the traces.

    Columns: ``traces`` (how many), ``idle`` (idle share of the cores' time), split into
    ``idle_no_work`` (nothing queued anywhere) and ``idle_work_waiting`` (work queued on some
    core meanwhile), ``switch_cycle_share``, ``migr_cycle_share`` and ``policy_cycle_share``
    (cycles charged for context switches, for migrations and for the policy's own routines,
    over all busy cycles),
    ``switch_per_minsn`` and ``migr_per_minsn`` (switches and migrations per million
    instructions; runs without switch columns, from before they existed, give NaN) and the
    i-cache hit
    rates of application and OS code (``icache_app``, ``icache_os``), all from the run rows.
    The shares and rates are each run's, then averaged over the traces with equal weight.
    """
    keys = ["cores", "load_unit", "load", "policy"]
    nan = pd.Series(np.nan, index=runs.index)
    minsn = runs["instructions"] / 1e6
    r = runs.assign(
        idle=runs["idle_fraction"],
        idle_no_work=runs.get("idle_no_work", nan),
        idle_work_waiting=runs.get("idle_work_waiting", nan),
        policy_cycle_share=runs.get("policy_cycles", nan) / runs.get("cycles", nan),
        switch_cycle_share=runs.get("switch_cycles", nan) / runs.get("cycles", nan),
        switch_per_minsn=runs.get("switches", nan) / minsn,
        migr_cycle_share=runs.get("migration_cycles", nan) / runs.get("cycles", nan),
        migr_per_minsn=runs["migrations"] / minsn)
    g = r.groupby(keys, sort=False)
    out = g[list(CORE_TIME)].mean()
    out.insert(0, "traces", g["trace"].nunique())
    return out.reset_index()


def _core_time_lines(g: pd.DataFrame) -> list[str]:
    """The "where the core time went" table of one (cores, load) group of runs."""
    t = core_time(g)
    n = int(t["traces"].max())
    lines = [f"Where the core time went (mean over {n} trace{'s' if n > 1 else ''}):", ""]
    head = ["policy", *CORE_TIME.values()]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for x in t.itertuples():
        lines.append("| " + " | ".join([
            str(x.policy), _pct(x.idle), _pct(x.idle_no_work), _pct(x.idle_work_waiting),
            _pct(x.switch_cycle_share, 2), _per(x.switch_per_minsn),
            _pct(x.migr_cycle_share, 2), _per(x.migr_per_minsn), _pct(x.policy_cycle_share, 2),
            _pct(x.icache_app), _pct(x.icache_os)]) + " |")
    return lines + [""]


def _per(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}"


def _pct(x: float, digits: int = 1) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.{digits}f}"


def _switch_cost_line(runs: pd.DataFrame) -> str:
    """Which switch-cost model the runs used (:mod:`pysched.sandbox.switch_cost`), one clause
    per model with the traces' own figures inside it."""
    nan = pd.Series(np.nan, index=runs.index)
    per = runs.assign(sw=runs.get("switch_cost_cycles", nan),
                      mig=runs.get("os_migration_cost_cycles", nan),
                      path=runs.get("switch_path_insns", nan)
                      ).drop_duplicates(["trace", "switch_cost"])
    parts = []
    for model, g in per.groupby("switch_cost", sort=False):
        if not np.isfinite(g["sw"]).all():  # runs written before the cost columns (flat)
            parts.append(f"{model} ({', '.join(g['trace'])})")
            continue
        migs = {"the cores' migration cycles" if m < 0 else f"{int(m)} cycles" for m in g["mig"]}
        if (g["sw"] < 0).all():
            what = ("the trace's own switch path through the caches, instructions per switch: "
                    + ", ".join(f"{x.trace} {x.path:.0f}" for x in g.itertuples()))
        else:
            what = ", ".join(f"{x.trace} {int(x.sw)} cycles per switch" for x in g.itertuples())
        parts.append(f"{model} ({what}; {' or '.join(sorted(migs))} per move)")
    return ("Switch cost (`--switch-cost`, `pysched.sandbox.switch_cost`): "
            + "; ".join(parts) + ".")


def geomean_change(x) -> float:
    """Geometric mean of changes ``x`` (0.1 = +10 %) as a change: ``prod(1 + x) ** (1/n) - 1``
    (the paper's "geometric mean" of improvements). NaN when empty or any ``1 + x <= 0``."""
    a = np.asarray(list(x), dtype=np.float64)
    a = a[np.isfinite(a)]
    if len(a) == 0 or (a <= -1).any():
        return float("nan")
    return float(np.exp(np.log1p(a).mean()) - 1.0)


def _window(runs: pd.DataFrame) -> str:
    """What part of each replay the runs measured."""
    if "complete" in runs and not runs["complete"].astype(bool).all():
        n = sorted(set(runs.loc[~runs["complete"].astype(bool), "epochs"]))
        many = "epoch" if n == [1] else f"{', '.join(map(str, n))} epochs"
        return (f"a window: the first {many} of each replay "
                "(`--epochs`); measures are those of the window, not of the whole workload")
    return "whole replays"


def _headline_lines(runs: pd.DataFrame, r: pd.DataFrame, baseline: str,
                    verdicts: Sequence[str]) -> list[str]:
    """The block the summary opens with: the configuration, the window, and each policy's
    performance over ``baseline`` (a study's ``verdicts`` instead, when it gives any)."""
    traces = list(dict.fromkeys(runs["trace"]))
    cores = ", ".join(map(str, sorted(set(runs["cores"]))))
    loads = ", ".join(load_label(k, u) for (u, k), _ in runs.groupby(["load_unit", "load"]))
    lines = ["## Headline", "",
             f"- **Configuration:** {len(traces)} trace{'s' if len(traces) > 1 else ''} "
             f"({', '.join(traces)}); {cores} simulated cores; {loads}; baseline `{baseline}`.",
             f"- **Measured over:** {_window(runs)}.", ""]
    if verdicts:
        return lines + list(verdicts)
    if baseline not in set(runs["policy"]):
        return lines + [f"No `{baseline}` run, so no policy is compared with it.", ""]
    for (cores, unit, load), g in r.groupby(["cores", "load_unit", "load"]):
        n = g["trace"].nunique()
        lines.append(f"Performance over `{baseline}`, {cores} cores, {load_label(load, unit)} "
                     f"(geometric mean over {n} trace{'s' if n > 1 else ''}; + is faster):")
        lines.append("")
        for pol, pg in g[g["policy"] != baseline].groupby("policy", sort=False):
            lines.append(f"- `{pol}`: {_fmt(geomean_change(pg[f'vs_{baseline}']), pct=True)}")
        lines.append("")
    return lines


def _host_lines(runs: pd.DataFrame) -> list[str]:
    """Host timings, apart from the results: wall seconds per run."""
    if "wall_s" not in runs:
        return []
    lines = ["## Host timings", "", "Wall seconds of each replay on the host that ran it (not "
             "a result: they depend on the host and its load).", "",
             "| trace | cores | load | policy | wall s |", "|---|---|---|---|---|"]
    for x in runs.itertuples():
        lines.append(f"| {x.trace} | {x.cores} | {load_label(x.load, x.load_unit)} | "
                     f"{x.policy} | {x.wall_s:.1f} |")
    return lines + [""]


#: A study's own part of the summary: ``section(runs, baseline)`` -> markdown ("" for none).
Section = Callable[[pd.DataFrame, str], str]


def summary_markdown(runs: pd.DataFrame, baseline: str = "linux",
                     sections: Sequence[Section] = (),
                     headline: Section | None = None) -> str:
    """The summary: a headline block (configuration, window, each policy's performance over
    ``baseline``, or what a study's ``headline`` says instead), one table per (cores, load)
    with each policy's totals and where the core time went (:func:`core_time`), each of a
    study's ``sections`` (e.g. the SchedTask paper's figures beside ours,
    :mod:`pysched.studies.schedtask_paper`), and last the host's timings."""
    have_base = baseline in set(runs["policy"])
    r = performance(runs, baseline) if have_base else runs.assign(performance=np.nan)
    verdict = headline(runs, baseline) if headline is not None else ""
    lines = ["# Scheduler sandbox: evaluation", ""]
    lines += _headline_lines(runs, r, baseline, [verdict] if verdict else [])
    lines.append("Performance is the paper's measure (section 6.1): application events per "
                 "simulated second, where the workload defines events (see below), else "
                 "instructions per simulated second.")
    lines.append("")
    if (runs["load_unit"] == LOAD_MACHINE).any():
        lines.append("A load kX is the paper's (sections 4.2 and 6.1): k traced vCPUs' work "
                     "per simulated core, replayed as ceil(k * cores / vCPUs) copies of the "
                     "trace (column `copies`; `pysched.evaluation.runner.copies_for`).")
        lines.append("")
    if "switch_cost" in runs:
        lines += [_switch_cost_line(runs), ""]
    dcache = bool(runs[["dcache_app", "dcache_os"]].notna().to_numpy().any())
    if not dcache:
        lines += ["No d-cache figures: no trace here holds data accesses (a `mem` table: "
                  "`pysched trace --data-accesses`), so the sandbox replays instruction "
                  "fetches only.", ""]
    for (cores, unit, load), g in r.groupby(["cores", "load_unit", "load"]):
        lines.append(f"## {cores} cores, {load_label(load, unit)}")
        lines.append("")
        head = ["trace", "copies", "policy", "sim. ms", "Ginsn/s", "idle", "i$ app", "i$ OS",
                *(["d$ app", "d$ OS"] if dcache else []), "migr.", "events/s",
                f"perf. over {baseline}", "fairness"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for _, x in g.iterrows():
            lines.append("| " + " | ".join([
                str(x["trace"]), str(x["copies"]), str(x["policy"]),
                f"{1e3 * x['elapsed_s']:.2f}",
                f"{x['throughput'] / 1e9:.2f}", f"{100 * x['idle_fraction']:.1f} %",
                _fmt(x["icache_app"]), _fmt(x["icache_os"]),
                *([_fmt(x["dcache_app"]), _fmt(x["dcache_os"])] if dcache else []),
                str(int(x["migrations"])),
                f"{x['events_per_s']:.0f}" if x["has_events"] else "-",
                _fmt(x.get(f"vs_{baseline}", np.nan), pct=True), _fmt(x["fairness"])]) + " |")
        lines.append("")
        lines += _core_time_lines(g)
    used = sorted(set(runs["workload"]) & set(EVENTS))
    if used:
        lines.append("## Application events")
        lines.append("")
        for name in used:
            e = EVENTS[name]
            lines.append(f"- **{name}**: {e.what}: {e.note}.")
        lines.append("")
    # runs read back from runs.csv have NaN where a trace had no note
    notes = runs.assign(note=runs.get("note", pd.Series("", index=runs.index))
                        .astype("string").fillna(""))
    notes = notes.loc[notes["note"].astype(str) != "", ["trace", "note"]].drop_duplicates()
    if len(notes):
        lines += ["## Not whole traces", ""]
        lines += [f"- **{x.trace}**: {x.note}" for x in notes.itertuples()]
        lines.append("")
    lines += policy_note_lines(runs)
    lines += arrival_bound_lines(runs, baseline)
    deps = sorted(set(runs.get("dependencies", pd.Series(dtype=str))))
    if "traced-time" in deps:
        lines.append("Traces without a `wakeups` table replay blocked threads on the trace's "
                     "own schedule (released at their traced time), so a policy cannot make "
                     "them wake sooner.")
        lines.append("")
    for section in sections:
        if text := section(runs, baseline):
            lines.append(text)
    lines += _host_lines(runs)
    return "\n".join(lines)


def arrival_bound_runs(runs: pd.DataFrame, baseline: str = "linux",
                       tol: float = 0.01) -> pd.DataFrame:
    """The complete ``baseline`` runs that ended within ``tol`` of their last traced interrupt
    arrival (column ``last_arrival_s``: the trace's last, ``last_irq_s``, after the last copy's
    start offset; ``last_irq_s`` for runs without the column): their length is set by the
    trace's arrivals (interrupts that answer no request of the replay arrive at their traced
    times, and the threads they wake cannot run sooner), so no policy can make them shorter,
    only longer."""
    if "elapsed_s" not in runs or not {"last_irq_s", "last_arrival_s"} & set(runs):
        return runs.iloc[0:0]
    last = runs.get("last_arrival_s", pd.Series(np.nan, index=runs.index))
    if "last_irq_s" in runs:
        last = last.fillna(runs["last_irq_s"])
    runs = runs.assign(last_arrival_s=last)
    b = runs[(runs["policy"] == baseline) & last.notna() & (last > 0)]
    if "complete" in b:
        b = b[b["complete"].fillna(True).astype(bool)]
    return b[b["elapsed_s"] <= b["last_arrival_s"] * (1 + tol)]


def arrival_bound_lines(runs: pd.DataFrame, baseline: str = "linux") -> list[str]:
    """A section naming the :func:`arrival_bound_runs` (none: no lines)."""
    b = arrival_bound_runs(runs, baseline)
    if not len(b):
        return []
    where = "; ".join(f"{x.trace} at {x.cores} cores, {load_label(x.load, x.load_unit)} "
                      f"({1e3 * x.elapsed_s:.2f} ms, last arrival "
                      f"{1e3 * x.last_arrival_s:.2f} ms)"
                      for x in b.itertuples())
    return ["## Arrival-bound runs", "",
            f"The `{baseline}` run ended within 1 % of its last traced interrupt arrival (the "
            f"trace's last, after the last copy's start offset): {where}. Interrupts that "
            "answer no request of the replay (timer ticks, completions of requests made before "
            "the trace) arrive at their traced times and the threads they wake cannot run "
            "sooner, so these runs last as long as the trace whatever the policy: a policy can "
            "only lose (run longer) there, and what it changes shows in the core-time tables, "
            "not in its performance.", ""]


def policy_note_lines(runs: pd.DataFrame) -> list[str]:
    """The policies' own notes on their runs (``policy_note``), one line per policy and note
    with the runs it applies to."""
    if "policy_note" not in runs:
        return []
    # runs read back from runs.csv have NaN where a policy had no note
    noted = runs.loc[runs["policy_note"].astype("string").fillna("") != ""]
    if not len(noted):
        return []
    lines = ["## Policy notes", ""]
    for (policy, note), g in noted.groupby(["policy", "policy_note"], sort=False):
        where = "; ".join(f"{x.trace} at {x.cores} cores, {load_label(x.load, x.load_unit)}"
                          for x in g.itertuples())
        lines.append(f"- **{policy}** ({where}): {note}.")
    return lines + [""]


def write(out: Path, epochs: pd.DataFrame, runs: pd.DataFrame, baseline: str = "linux",
          sections: Sequence[Section] = (), headline: Section | None = None) -> None:
    """Write ``epochs.parquet``, ``runs.csv``, ``summary.md`` (with a study's ``sections``
    and ``headline``, :func:`summary_markdown`) and ``epochs.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    epochs.to_parquet(out / "epochs.parquet", index=False)
    runs.to_csv(out / "runs.csv", index=False)
    (out / "summary.md").write_text(summary_markdown(runs, baseline, sections, headline) + "\n")
    from pysched.plots.sandbox import plot_epochs
    plot_epochs(epochs, out / "epochs.png")
