"""One replay: :func:`simulate` runs a workload under a policy on the compiled engine
(:mod:`.compiled`) or the plain one (:mod:`.engine`), and returns its :class:`RunResult`."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pysched._gcpause import paused_gc

from .compiled import CompiledEngine
from .config import SandboxConfig
from .engine import Engine
from .footprint import Footprint
from .metrics import SandboxStats
from .workload import Workload


@dataclass
class RunResult:
    """What :func:`simulate` returns.

    Attributes
    ----------
    epochs : list of SandboxStats
        Per-epoch deltas.
    total : SandboxStats
        The whole run.
    forced_releases : int
        Wake-ups released at their traced time to break a deadlock (see :mod:`.engine`).
    complete : bool
        Every item of every copy ran (False: the run stopped at ``config.max_epochs``).
    task_end_s : numpy.ndarray
        Per thread (all copies): the simulated time its last item ended (a multi-threaded
        program's completion time is the latest of its threads').
    last_start_s : float
        When the last copy started (its copy phase, :mod:`.engine`): the trace's traced
        arrivals end this much later than in one copy.
    """

    epochs: list[SandboxStats]
    total: SandboxStats
    forced_releases: int
    policy: str
    config: SandboxConfig
    complete: bool = True
    task_end_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    last_start_s: float = 0.0


#: :func:`simulate`'s engines: the compiled hot path (:mod:`.compiled`) or the plain one.
ENGINES = ("compiled", "plain")


def simulate(workload: Workload, footprint: Footprint, policy, config: SandboxConfig,
             app_event_items: np.ndarray | None = None, on_epoch=None,
             progress=None, switch_path=None, engine: str = "compiled",
             streams=None) -> RunResult:
    """Replay ``workload`` under ``policy`` on ``config``'s machine.

    Parameters
    ----------
    workload : Workload
    footprint : Footprint
        The trace's access streams.
    policy : Policy
        A fresh policy instance (it keeps state).
    config : SandboxConfig
    app_event_items : array of int, optional
        Application events each item completes (default none).
    on_epoch : callable, optional
        ``on_epoch(epoch, stats)`` after every epoch.
    progress : callable, optional
        ``progress(done_items, total_items)`` after every epoch.
    switch_path : TracedSwitch, optional
        The trace's switch path (:func:`.switch_cost.traced_switch`), needed when
        ``config.switch_cycles`` is None.
    engine : str
        :data:`ENGINES`: ``"compiled"`` (default) or ``"plain"``, its twin; the same results.
    streams : ItemStreams, optional
        The workload's item streams for the compiled engine (built when not given).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    # the replay makes no cyclic garbage: the cyclic collector only costs it time (_gcpause)
    with paused_gc():
        if engine == "compiled":
            eng = CompiledEngine(workload, footprint, policy, config, app_event_items,
                                 switch_path, streams)
        else:
            eng = Engine(workload, footprint, policy, config, app_event_items, switch_path)
        epochs = eng.run(on_epoch, progress)
    total = epochs[0]
    for e in epochs[1:]:
        total = total + e
    return RunResult(epochs, total, eng.forced, policy.name, config, eng.complete,
                     eng.task_end.copy(), float(eng.phase.max(initial=0.0)))
