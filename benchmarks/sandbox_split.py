"""Where the compiled sandbox's time per simulated instruction goes as the cores and copies
grow: the chunk kernel against the engine around it, and the kernel's own calls replayed in
another order.

One replay of ``linux`` on a trace (a scaling point of ``benchmarks/sandbox.py``: cores,
load, 3 epochs) with every call of the chunk kernel timed and recorded:
``kernel_ns_per_insn`` is the time inside the calls per simulated instruction (the wall clock
around each call, which on one thread is its CPU time), ``engine_ns_per_insn`` the rest of the
replay's CPU time (the event loop, the policy, the engine's Python side of a chunk, and the
timer's reads), beside ``chunks_per_kinsn``: the model's work, as a policy that switches more
runs more, shorter chunks.

Then the recorded calls run again on fresh engines of the same configuration, twice each way,
alternated: in the order the replay made them (``as_run``) and grouped by core, each core's
calls in their order (``by_core``). Both orders run the same chunks of the same items through
the same private caches; only the shared L3 sees its demands in another order (its misses are
recorded). A cost per access that grows with the cores as run but not grouped comes from the
order alone: between two calls of a core, the others' calls go through their own caches' state
(a core's L1s and L2 hold about 80 KB of tags, ranks, stamps and dirty bits; 5 MB at 64
cores, against the 1 MB L2 of a core of this host), which grouped calls find in the host's
caches. The fastest of each way's runs is kept (the host is shared).

Usage: ``python benchmarks/sandbox_split.py TRACE CORES LOAD [EPOCHS]``; prints one JSON row.
``benchmarks/sandbox.py --scaling`` runs it at every scaling point.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def by_core(calls: list[tuple]) -> list[tuple]:
    """``calls`` (each ``(core, ...)``) grouped by core, each core's in their order."""
    return sorted(calls, key=lambda c: c[0])


def summary(insns: int, cpu_s: float, kernel_s: float, chunks: int, accesses: int,
            replays: dict[str, list[tuple[float, int]]]) -> dict:
    """The row: the split of ``cpu_s`` per simulated instruction and, per replay order, the
    fastest CPU ns per access of ``replays[order]`` (a list of ``(cpu_s, l3_misses)``) and
    that run's L3 misses per thousand accesses."""
    n, a = max(insns, 1), max(accesses, 1)
    row = {"sim_insns": insns, "chunks": chunks, "cache_accesses": accesses,
           "cpu_ns_per_insn": 1e9 * cpu_s / n, "kernel_ns_per_insn": 1e9 * kernel_s / n,
           "engine_ns_per_insn": 1e9 * (cpu_s - kernel_s) / n,
           "chunks_per_kinsn": 1e3 * chunks / n,
           "kernel_ns_per_access": 1e9 * kernel_s / a}
    for order, runs in replays.items():
        cpu, l3 = min(runs)
        row[f"{order}_ns_per_access"] = 1e9 * cpu / a
        row[f"{order}_l3_misses_per_kacc"] = 1e3 * l3 / a
    if "as_run" in replays and "by_core" in replays:
        row["as_run_over_by_core"] = row["as_run_ns_per_access"] / row["by_core_ns_per_access"]
    return row


def main(argv: list[str]) -> int:
    from pysched.evaluation.runner import copies_for, machine, prepare
    from pysched.policies import get_policy
    from pysched.sandbox import SandboxConfig, simulate
    from pysched.sandbox import compiled
    from pysched.sandbox.item_streams import item_streams
    from pysched.sandbox.switch_cost import sandbox_costs

    path, cores, load = argv[0], int(argv[1]), int(argv[2])
    epochs = int(argv[3]) if len(argv) > 3 else 3
    t = prepare(path)
    streams = item_streams(t.workload, t.footprint)
    switch = t.meta.get("switch")

    def config():
        pol = get_policy("linux")
        copies = copies_for(load, cores, len(t.workload.vcpus))
        return pol, SandboxConfig(machine(cores * pol.core_factor, None), copies=copies,
                                  max_epochs=epochs,
                                  **sandbox_costs("traced" if switch is not None else "flat",
                                                  None, switch))

    calls: list[tuple] = []
    spent = [0.0]
    made = compiled.CompiledEngine.__init__

    def recording(self, *args, **kwargs):
        made(self, *args, **kwargs)
        # the wall clock inside the calls (a single thread: its CPU time), read through the
        # vDSO: the process CPU clock costs a system call per read
        kernel, clock = self._kernel, time.perf_counter

        def timed(*a):
            t0 = clock()
            out = kernel(*a)
            spent[0] += clock() - t0
            calls.append(a[1:])
            return out
        self._kernel = timed

    compiled.CompiledEngine.__init__ = recording
    try:
        pol, cfg = config()
        c0 = time.process_time()
        run = simulate(t.workload, t.footprint, pol, cfg, t.events, switch_path=switch,
                       engine="compiled", streams=streams)
        cpu = time.process_time() - c0
    finally:
        compiled.CompiledEngine.__init__ = made
    insns = int(run.total.instructions.sum())
    accesses = int(run.total.cache.served.sum())

    orders = {"as_run": calls, "by_core": by_core(calls)}
    replays: dict[str, list[tuple[float, int]]] = {k: [] for k in orders}
    for _ in range(2):
        for name, seq in orders.items():
            pol, cfg = config()
            e = compiled.CompiledEngine(t.workload, t.footprint, pol, cfg, None, switch,
                                        streams)
            kernel, args = e._kernel, e._args
            c0 = time.process_time()
            for a in seq:
                kernel(args, *a)
            spent_s = time.process_time() - c0
            served = e.hier._served.sum(axis=(0, 1, 2))
            if int(served.sum()) != accesses:
                raise SystemExit(f"{name} replay ran {int(served.sum())} accesses, the run "
                                 f"{accesses}")
            replays[name].append((spent_s, int(served[3])))
    row = {"policy": "linux", "cores": cores, "load": load, "copies": cfg.copies,
           "epochs": epochs, "trace": Path(path).name,
           **summary(insns, cpu, spent[0], len(calls), accesses, replays)}
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
