"""Write analyses to a results directory: per-trace tables (Parquet and CSV), figures (PNG)
and a summary (JSON for programs, Markdown for people).

Layout::

    OUT/summary.json, OUT/summary.md
    OUT/breakup.png, OUT/similarity.png, OUT/tau.png       (all traces side by side)
    OUT/<trace>/instances.parquet, pieces.parquet          (the SuperFunction instances)
    OUT/<trace>/types.csv, epoch-breakup.csv, similarity.csv, tau.csv, overlap.csv
    OUT/<trace>/heatmaps.png, overlap.png                  (the representative epoch)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed (or present in CI)
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pysched.heatmaps import overlap_table  # noqa: E402
from pysched.plots import (  # noqa: E402
    plot_breakup,
    plot_heatmaps,
    plot_overlap,
    plot_similarity,
    plot_tau,
)

from .analyse import AnalysisOptions, TraceAnalysis, TraceOverview  # noqa: E402
from .paper import SIMILARITY_TEXT, TAU_TEXT, breakup_text  # noqa: E402

_CATEGORIES = ("application", "syscall", "interrupt", "bottom_half", "kernel_thread", "unknown")


def _hex(functype: int) -> str:
    """A superFuncType as CSV text: 64 bits do not survive a round trip through floats."""
    return f"0x{int(functype):016x}"


def _save(fig: plt.Figure, path: Path) -> None:
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_trace(a: TraceAnalysis, opts: AnalysisOptions, out: Path) -> None:
    """Tables and figures of one trace into ``out / a.name``."""
    d = out / a.name
    d.mkdir(parents=True, exist_ok=True)
    # Files only some traces have: never leave an earlier run's beside this one's.
    for f in ("overlap.csv", "heatmaps.png", "overlap.png"):
        (d / f).unlink(missing_ok=True)
    seg = a.seg
    inst = seg.instances.copy()
    inst["category"] = inst["category"].astype(int)
    inst.to_parquet(d / "instances.parquet", index=True)
    seg.pieces.to_parquet(d / "pieces.parquet", index=False)
    types = seg.types.copy()
    types["category"] = types["category"].astype(int)
    types["type"] = types["type"].map(_hex)
    types.sort_values("insns", ascending=False).to_csv(d / "types.csv", index=False)
    ep = a.epochs.copy()
    ep.columns = [_hex(t) for t in ep.columns]
    ep.to_csv(d / "epoch-breakup.csv")
    a.similarity.to_csv(d / "similarity.csv")
    a.tau.to_csv(d / "tau.csv", index=False)
    if a.pages is not None and len(a.pages):
        table = overlap_table(a.pages, opts.bloom_bits)
        table.assign(type=table["type"].map(_hex), other=table["other"].map(_hex)
                     ).to_csv(d / "overlap.csv", index=False)
        n = min(len(a.pages), 40)
        fig, ax = plt.subplots(figsize=(9, 0.2 * n + 1.5), layout="constrained")
        plot_heatmaps(a.pages, opts.bloom_bits, ax=ax)
        ax.set_title(f"{a.name}: Page-heatmaps of epoch {a.epoch} ({opts.bloom_bits} bits)")
        _save(fig, d / "heatmaps.png")
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 6), layout="constrained")
        plot_overlap(a.pages, opts.bloom_bits, ax=a1, max_types=25)
        plot_overlap(a.pages, None, ax=a2, max_types=25)
        _save(fig, d / "overlap.png")


def write_overview(analyses: Sequence[TraceOverview], opts: AnalysisOptions, out: Path) -> None:
    """The figures that put all traces side by side, and the summaries
    (:meth:`TraceAnalysis.overview` of each trace, in the order to show them)."""
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(1.6 * len(analyses) + 3, 4.2), layout="constrained")
    plot_breakup({a.name: a.breakup for a in analyses}, ax=ax)
    _save(fig, out / "breakup.png")
    sims = {a.name: a.similarity for a in analyses if len(a.similarity)}
    (out / "similarity.png").unlink(missing_ok=True)
    if sims:
        fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
        plot_similarity(sims, ax=ax)
        _save(fig, out / "similarity.png")
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for a in analyses:
        ax = plot_tau(a.tau, ax=ax, label=a.name)
    _save(fig, out / "tau.png")

    summaries = [a.summary for a in analyses]
    (out / "summary.json").write_text(json.dumps(
        {"options": vars(opts), "traces": summaries}, indent=1) + "\n")
    (out / "summary.md").write_text(markdown(summaries, opts))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _span(vals: Sequence[float | None], fmt: str) -> str:
    """``lo-hi`` of the values there are (``-`` for none)."""
    v = [x for x in vals if x is not None]
    if not v:
        return "-"
    lo, hi = min(v), max(v)
    return format(lo, fmt) if lo == hi else f"{format(lo, fmt)}-{format(hi, fmt)}"


def _headline_lines(summaries: Sequence[dict], opts: AnalysisOptions) -> list[str]:
    """The block the summary opens with: the configuration, then each finding's range over
    the traces beside what the paper states (the tables below give each trace)."""
    names = [s["trace"] for s in summaries]
    os_share = [1 - s["breakup_paper_categories"]["application"] for s in summaries]
    med = [s["similarity"]["median_after_warmup"] for s in summaries]
    tau = [s["tau_b_mean"].get(str(opts.bloom_bits)) for s in summaries]
    return ["## Headline", "",
            f"- **Configuration:** {len(names)} trace{'s' if len(names) != 1 else ''} "
            f"({', '.join(names)}); epochs of {opts.epoch_len:,} instructions per vCPU, "
            "counted over the whole machine in the trace's order across vCPUs; Page-heatmaps "
            f"of {opts.bloom_bits} bits; similarity after {opts.warmup} warm-up epochs.",
            f"- **OS share of the instructions** (system calls, interrupts, bottom halves, of "
            f"Table 1's four categories): {_span([100 * x for x in os_share], '.1f')} % "
            "across the traces.",
            f"- **Epoch-to-epoch similarity** (median after the warm-up): "
            f"{_span(med, '.4f')}; compare {SIMILARITY_TEXT}.",
            f"- **Kendall tau-b of {opts.bloom_bits}-bit Page-heatmap rankings** against exact "
            f"page sets: {_span(tau, '.3f')}.", ""]


def markdown(summaries: Sequence[dict], opts: AnalysisOptions) -> str:
    """The summary as Markdown tables."""
    lines = ["# pysched analysis", "", *_headline_lines(summaries, opts),
             "Figures: breakup.png (Fig 4), similarity.png (section 4.4), tau.png (Fig 11), "
             "and per trace heatmaps.png and overlap.png.", "",
             "## Instruction breakup (% of instructions, scheduler code apart)", ""]
    noted = [f"- **{s['trace']}**: {s['note']}" for s in summaries if s.get("note")]
    if noted:
        lines[-2:-2] = ["## Not whole traces", "", *noted, ""]
    head = ["trace", "instructions", "vCPUs", *_CATEGORIES, "scheduler", "the paper states"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        b = s["breakup"]
        lines.append("| " + " | ".join([s["trace"], f"{s['instructions']:,}", str(s["vcpus"]),
                                        *(_pct(b[c]) for c in _CATEGORIES),
                                        _pct(s["scheduler_share"]),
                                        breakup_text(s["trace"]) or "-"]) + " |")
    lines += ["", "The paper's fractions are of its four categories (Table 1); ours add kernel "
              "threads and unknown contexts, which it does not name."]
    lines += ["", "## Epoch-to-epoch similarity of the breakup by superFuncType", "",
              "| trace | full epochs | median | > 0.995 | > 0.98 | 5 in a row > 0.995 from |",
              "|---|---|---|---|---|---|"]
    for s in summaries:
        m = s["similarity"]
        med = "-" if m["median_after_warmup"] is None else f"{m['median_after_warmup']:.4f}"
        steady = "never" if m["steady_from_epoch"] is None else str(m["steady_from_epoch"])
        lines.append(f"| {s['trace']} | {s['full_epochs']} | {med} | "
                     f"{_pct(m['share_above_0.995'])} % | {_pct(m['share_above_0.98'])} % | "
                     f"{steady} |")
    bits = list(summaries[0]["tau_b_mean"]) if summaries else []
    lines += ["", "## Kendall tau-b of Bloom-filter overlap rankings against exact ones", "",
              "| trace | " + " | ".join(f"{b} bits" for b in bits) + " |",
              "|---|" + "---|" * len(bits)]
    lines.insert(-2, f"Compare {TAU_TEXT}.\n")
    for s in summaries:
        vals = ["-" if s["tau_b_mean"][b] is None else f"{s['tau_b_mean'][b]:.3f}"
                for b in bits]
        lines.append(f"| {s['trace']} | " + " | ".join(vals) + " |")
    warned = [(s["trace"], w) for s in summaries for w in s["warnings"]
              if w["severity"] == "warning"]
    if warned:
        lines += ["", "## Segmentation warnings", ""]
        lines += [f"- {t}: {w['count']} x {w['text']} (first: {w['where']})" for t, w in warned]
    return "\n".join(lines) + "\n"


def read_summary(out: Path) -> pd.DataFrame:
    """The per-trace headline numbers of a results directory as a table."""
    data = json.loads((Path(out) / "summary.json").read_text())
    return pd.json_normalize(data["traces"]).set_index("trace")
