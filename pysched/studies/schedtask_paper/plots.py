"""The SchedTask paper study's figure: ours beside the paper's Fig 7 and Table 4."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .comparison import FIG7_GEOMEAN, TABLE4, TECHNIQUES, WORKLOADS, geomean_change


def plot_paper(r: pd.DataFrame, path: str | Path, cores: int) -> bool:
    """Ours beside the SchedTask paper at ``cores`` cores: (a) Fig 7, application performance
    over linux per workload at 2X with the geometric means (the paper's as black ticks);
    (b) Table 4, geometric-mean instruction-throughput change per load, ours solid and the
    paper's dashed. ``r`` is :func:`.comparison.with_changes`'s frame. Returns
    False (and writes nothing) when there is no 2X run of the paper's techniques."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = r[r["cores"] == cores]
    at2 = x[x["load"] == 2]
    pols = [p for p in TECHNIQUES if p in set(at2["policy"])]
    if not pols:
        return False
    wl = [w for w in WORKLOADS if w in set(at2["workload"])] + \
        sorted(set(at2["workload"]) - set(WORKLOADS))
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    width = 0.8 / len(pols)
    for k, p in enumerate(pols):
        g = at2[at2["policy"] == p].set_index("workload")["app_change"]
        vals = [100 * float(g.get(w, np.nan)) for w in wl]
        vals.append(100 * geomean_change(g.reindex(wl)))
        pos = np.arange(len(wl) + 1) + (k - (len(pols) - 1) / 2) * width
        a.bar(pos, vals, width, label=p)
        a.plot([pos[-1] - width / 2, pos[-1] + width / 2], [FIG7_GEOMEAN[p]] * 2, "k-", lw=2)
    a.axhline(0, color="grey", lw=0.6)
    a.set_xticks(np.arange(len(wl) + 1), [WORKLOADS.get(w, w) for w in wl] + ["geomean"])
    a.set_ylabel("application performance over linux, %")
    a.set_title(f"Fig 7 at 2X, {cores} cores (black: the paper's geomean, 32 cores)", fontsize=9)
    a.legend(fontsize=7, ncol=3)
    loads = sorted(set(x["load"]))
    for k, p in enumerate(pols):
        color = f"C{k}"
        ours = [100 * geomean_change(x[(x["policy"] == p) & (x["load"] == ld)]["tput_change"])
                for ld in loads]
        b.plot(loads, ours, "o-", color=color, label=p)
        pl = [ld for ld in loads if ld in TABLE4]
        b.plot(pl, [TABLE4[ld][p][-1][1] for ld in pl], "x--", color=color)
    b.axhline(0, color="grey", lw=0.6)
    b.set_xscale("log", base=2)
    b.set_xticks(loads, [f"{ld}X" for ld in loads])
    b.set_ylabel("instruction throughput over linux, % (geomean)")
    b.set_title("Table 4: ours (solid) and the paper's (dashed)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


__all__ = ["plot_paper"]
