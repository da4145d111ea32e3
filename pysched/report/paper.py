"""What the SchedTask paper (seed 000) states in its text about the figures that
``pysched analyse`` reproduces, to print beside ours. Only values the text states are here;
nothing is read off the paper's plots.
"""
from __future__ import annotations

#: Section 4.3 (Fig 4): fractions of all instructions stated for some workloads, by category.
BREAKUP_STATED: dict[str, dict[str, float]] = {
    "find": {"application": 0.35},
    "apache": {"syscall": 0.35, "bottom_half": 0.20},
    "dss": {"application": 0.80},
    "filesrv": {"bottom_half": 0.35},
    "mailsrv": {"syscall": 0.70},
}

#: Section 4.4: the similarity of consecutive epochs' breakups in the steady state.
STEADY_SIMILARITY = 0.995

SIMILARITY_TEXT = ("the paper: after a few epochs the similarity of consecutive epochs stays "
                   f"above {STEADY_SIMILARITY} (section 4.4)")
TAU_TEXT = ("the paper (section 6.5, Fig 11): each doubling of the Page-heatmap size adds about "
            "the same to tau-b (linear in log2 of the size); it uses 512 bits")


def breakup_text(trace: str) -> str | None:
    """The paper's stated breakup for a workload named like ``trace`` (None if none)."""
    stated = BREAKUP_STATED.get(trace.split("-")[0].lower())
    if not stated:
        return None
    return ", ".join(f"{k.replace('_', ' ')} {100 * v:.0f} %" for k, v in stated.items())
