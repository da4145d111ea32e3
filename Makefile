# pysched: full-system traces of Linux guests for OS-scheduler studies.
#   make run    set everything up, analyse the shipped traces in data/ into results/, a
#               short evaluation of the scheduling policies on them (results/sandbox/)
#               and the other seeds' tables (HRRS, cache-fair, DVFS) (results/seeds/)
#   make test   set everything up, then run the test suite (what CI runs)
#   make test-kernel2  the tracer's guest tests on a second kernel (Debian trixie's 6.12;
#                      KERNEL_SUITE=bullseye: 5.10)
#   make demo   trace a demo command on the busybox test guest and check the trace
#   make trace WORKLOAD=find [TRACE_OUT=out/find] [TRACE_ARGS="--roi-insns 150M"]
#               trace one workload of the suite on the Debian guest (`pysched trace --list`)
#   make data   regenerate the shipped sample traces in data/ (a few minutes)
#   make evaluate  every scheduling policy on the shipped traces, 8 cores at 2X (8 copies of
#               each trace a run, whole runs)
#   make sweep  the example sensitivity sweep (sweeps/example.toml) on a local Dask cluster
#   make notebook  JupyterLab on notebooks/ from .venv
#   make evaluate-paper  the study beside the SchedTask paper: every policy at 1X..8X, stealing
#               and heatmap variants, on the eight shipped workloads (hours; a re-run resumes)
#   make ablate-paper  which rule of the model decides each technique's result at 2X
#               (out/ablation/; a re-run resumes; make run then quotes it); make ablate-seeds:
#               HRRS's (seed 001)
PY      := .venv/bin/python
PYSCHED := .venv/bin/pysched
RUN_OUT ?= results
DEMO_OUT ?= out/demo
WORKLOAD ?=
TRACE_OUT ?= out/$(WORKLOAD)
TRACE_ARGS ?=
# The study traces: every data access, 40 M instructions a vCPU or more where a workload's
# replay needs more for 10 complete 3 ms epochs of the sandbox at 2X on 8 cores (8 copies of
# each 2-vCPU trace, measured under linux: data/README.md), exec and mem parts re-encoded at
# zstd 19 to stay under 25 MiB a trace. pysched trace's default guest clock applies
# (--clock insns: QEMU -icount shift=0, 500 M instructions a guest second per vCPU on 2 vCPUs;
# docs/tracing.md, Guest time).
DATA_WORKLOADS := find iscp oscp apache dss filesrv mailsrv oltp
DATA_ARGS := --vcpus 2 --data-accesses --compact 19
DATA_INSNS := 40M
DATA_INSNS_find := 50M
DATA_INSNS_dss := 45M
# One short trace with data accesses (the mem table, about 0.54 byte an instruction) for the
# cache models' d-cache side and benchmark: 14 M instructions a vCPU keep it under 20 MB.
DATA_MEM_WORKLOAD := dss
DATA_MEM_ARGS := --vcpus 2 --roi-insns 14M --data-accesses --compact 19

# Seed 001's barrier program on 4 vCPUs with its data accesses (grid 1024: a Jacobi sweep over
# two 8 MiB grids, about 2.3 M instructions a thread between barriers), a region of 0.05 guest
# seconds (250 M instructions a second per vCPU on 4 vCPUs: at most 12.5 M a vCPU); 5 guest
# seconds of warm-up so that the grids' first-touch page faults are over before it opens.
SEED_ARGS_barrier := --param grid=1024 --vcpus 4 --roi-seconds 0.05 --warmup 5 --data-accesses \
    --compact 19
# Seed 002 (notebooks/07-dvfs.ipynb): netserver answering 10 B, 100 kB and 1 MB requests and
# apache, 15 M instructions a vCPU (about 3 MiB each).
SEED_SHORT := --vcpus 2 --roi-insns 15M --compact 19
SEED_ARGS_netserver-10b := netserver --param sizes=10 $(SEED_SHORT)
SEED_ARGS_netserver-100kb := netserver --param sizes=100000 $(SEED_SHORT)
SEED_ARGS_netserver-1mb := netserver --param sizes=1000000 $(SEED_SHORT)
SEED_ARGS_apache-short := apache $(SEED_SHORT)
# Seed 003 (notebooks/06-cache-fair.ipynb): one pointer chase on one vCPU with its data
# accesses (0.72 byte an instruction on chase-large: random addresses compress badly), 2 M
# instructions; 0.5 guest seconds (500 M instructions) of warm-up so that the 64 MiB cycle is
# built before the region opens (chase-large: 91 s to record; 5 guest seconds with data
# callbacks ran past the 600 s timeout).
SEED_CHASE := --param copies=1 --vcpus 1 --roi-insns 2M --data-accesses --warmup 0.5 --compact 19
SEED_ARGS_chase-large := chase-large $(SEED_CHASE)
SEED_ARGS_chase-small := chase-small $(SEED_CHASE)
SEED_ARGS_chase-mid := chase-large --param kib=2048 $(SEED_CHASE)
SEED_TRACES := netserver-10b netserver-100kb netserver-1mb apache-short chase-large \
    chase-small chase-mid

.PHONY: setup plugin guest run demo test test-all test-kernel2 bench bench-tracer clean bench-models trace \
	data bench-analysis bench-sandbox evaluate sweep notebook evaluate-paper ablate-paper ablate-seeds data-seeds \
	bench-run bench-sandbox-coherent bench-exec-encoding

setup:
	bash scripts/setup.sh

plugin: setup
	$(MAKE) -C qemu-plugin

guest: setup
	$(MAKE) -C guest busybox-guest
	$(MAKE) -C guest/debian debian-guest

trace: plugin guest
	@test -n "$(WORKLOAD)" || { echo "usage: make trace WORKLOAD=<name>; workloads:"; \
	    $(PYSCHED) trace --list | grep -v '^ '; exit 2; }
	rm -rf "$(TRACE_OUT)"
	$(PYSCHED) trace $(WORKLOAD) --out $(TRACE_OUT) $(TRACE_ARGS)
	$(PYSCHED) check $(TRACE_OUT)

data: plugin guest
	$(foreach w,$(DATA_WORKLOADS),rm -rf data/$(w) && \
	  $(PYSCHED) trace $(w) --out data/$(w) $(DATA_ARGS) \
	    --roi-insns $(or $(DATA_INSNS_$(w)),$(DATA_INSNS)) && \
	  $(PYSCHED) check data/$(w) > /dev/null && du -sh data/$(w) && ) true
	rm -rf data/$(DATA_MEM_WORKLOAD)-mem
	$(PYSCHED) trace $(DATA_MEM_WORKLOAD) --out data/$(DATA_MEM_WORKLOAD)-mem $(DATA_MEM_ARGS)
	$(PYSCHED) check data/$(DATA_MEM_WORKLOAD)-mem > /dev/null
	du -sh data/$(DATA_MEM_WORKLOAD)-mem

# The other seeds' traces (notebooks 05-07): data/barrier.
data-seeds: plugin guest
	rm -rf data/barrier
	$(PYSCHED) trace barrier --out data/barrier $(SEED_ARGS_barrier)
	$(PYSCHED) check data/barrier > /dev/null
	du -sh data/barrier
	$(foreach t,$(SEED_TRACES),rm -rf data/$(t) && \
	  $(PYSCHED) trace $(SEED_ARGS_$(t)) --out data/$(t) && \
	  $(PYSCHED) check data/$(t) > /dev/null && du -sh data/$(t) && ) true

# The main job: SuperFunctions, breakups, epoch similarity and page heatmaps of every shipped
# trace, with the paper's figures beside ours (results/summary.md); then a short evaluation of
# SchedTask and its baselines against linux on the same traces, 8 cores at the paper's 2X (two
# traced vCPUs' work per core: 8 copies of each 2-vCPU trace), each run a window of its first
# 5 epochs: the 2X part of the SchedTask paper study (results/sandbox/summary.md, beside the
# paper's section 6).
# The summaries quote each policy's one-line reason from the ablation at this study's setting:
# the one `make ablate-paper` (`make ablate-seeds`) wrote under out/, which `make run` leaves
# alone, else the one shipped in ablations/ (an ablation of another model or setting is named
# and not quoted).
RUN_EVAL_ARGS ?= --cores 8 --load 2 --variants none --epochs 5
quoted = $(patsubst %/ablation.csv,%,$(firstword $(wildcard $(1)/ablation.csv $(2)/ablation.csv)))
RUN_ABLATION = $(call quoted,$(ABLATE_OUT),ablations/schedtask-paper)
RUN_ABLATION_SEEDS = $(call quoted,$(ABLATE_SEEDS_OUT),ablations/seeds)
run: plugin guest
	rm -rf $(RUN_OUT)
	$(PYSCHED) analyse --data data --out $(RUN_OUT)
	$(PYSCHED) study schedtask-paper --data data $(RUN_EVAL_ARGS) --out $(RUN_OUT)/sandbox \
	    $(if $(RUN_ABLATION),--ablation $(RUN_ABLATION)) > /dev/null
	$(PYSCHED) seeds --data data --out $(RUN_OUT)/seeds \
	    $(if $(RUN_ABLATION_SEEDS),--ablation $(RUN_ABLATION_SEEDS)) > /dev/null
	@echo "make run: results in $(RUN_OUT)/summary.md, $(RUN_OUT)/sandbox/summary.md and $(RUN_OUT)/seeds/summary.md"

demo: plugin guest
	rm -rf $(DEMO_OUT)
	$(PYSCHED) trace --guest busybox --out $(DEMO_OUT) --vcpus 2 \
	    --cmd "sysloop 1000; spin 20 & spin 20 & wait; ls -R /proc/sys > /dev/null"
	$(PYSCHED) check $(DEMO_OUT)

# The sandbox: SchedTask and the baselines of its Table 3 against linux, epoch by epoch, on
# the shipped traces at the paper's 2X load (its Fig 7 setting; --load is relative to the
# machine: 8 copies of each 2-vCPU trace on 8 cores), 8 simulated cores.
EVAL_OUT ?= results/sandbox
EVAL_POLICIES ?= linux,schedtask,schedtask:steal=any,selective-offload,flexsc,disaggregate-os,slicc
evaluate: setup
	rm -rf $(EVAL_OUT)
	$(PYSCHED) evaluate $(addprefix data/,$(DATA_WORKLOADS)) --policies $(EVAL_POLICIES) \
	    --cores 8 --load 2 --out $(EVAL_OUT)

# A grid of sandbox runs on Dask (a local cluster on this machine's cores, or
# SWEEP_ARGS="--scheduler tcp://HOST:8786"); finished points in SWEEP_OUT are kept and skipped.
SWEEP ?= sweeps/example.toml
SWEEP_OUT ?= results/sweep
SWEEP_ARGS ?=
sweep: setup
	$(PYSCHED) sweep $(SWEEP) --out $(SWEEP_OUT) $(SWEEP_ARGS)

# JupyterLab from the project's environment (the `notebook` extra, installed on first use).
notebook: setup
	@test -x .venv/bin/jupyter-lab || .venv/bin/pip install -q -e '.[test,notebook]'
	.venv/bin/jupyter-lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)
# The study beside the SchedTask paper (section 6, Table 4, Figs 7-11): `pysched study
# schedtask-paper`, whose grid pysched/studies/schedtask_paper/study.py declares (every policy at
# 1X, 2X, 4X and 8X, SchedTask's stealing and Page-heatmap variants at 2X, on the eight
# workloads; loads relative to the machine: kX on PAPER_CORES cores is k * PAPER_CORES / 2 copies
# of a 2-vCPU trace). Its runs are sweep points on a local Dask cluster (a worker per core),
# stored under PAPER_OUT/points as they finish, so an interrupted study resumes where it
# stopped; the summary beside the paper's figures is written when every run is stored.
PAPER_OUT ?= out/paper
PAPER_CORES ?= 8
# More `pysched study schedtask-paper` options, e.g. PAPER_ARGS="--epochs 5" (a window of each
# replay instead of the whole; the summary says so), "--load 2 --variants none" (the 2X
# figures only), "--workers 1" or "--scheduler tcp://HOST:8786".
# The study is given the ablation shipped for its core count (ablations/schedtask-paper at 8
# cores, ablations/schedtask-paper-32 at 32) and the one `make ablate-paper` wrote, which wins;
# it quotes those made at its setting and names the others.
PAPER_ARGS ?=
PAPER_SHIPPED = ablations/schedtask-paper$(if $(filter-out 8,$(PAPER_CORES)),-$(PAPER_CORES))
PAPER_ABLATIONS = $(patsubst %/ablation.csv,%,$(wildcard $(PAPER_SHIPPED)/ablation.csv \
    $(ABLATE_OUT)/ablation.csv))
evaluate-paper: setup
	$(PYSCHED) study schedtask-paper --data data --cores $(PAPER_CORES) $(PAPER_ARGS) \
	    $(addprefix --ablation ,$(PAPER_ABLATIONS)) --out $(PAPER_OUT)

# Which rule of the sandbox's model decides each technique's result beside the SchedTask
# paper: `pysched ablate` of SchedTask (both stealing readings) and the baselines of its
# Table 3 against linux on the eight workloads, 8 cores at 2X, make run's window of 5 epochs
# (out/ablation/ablation.md; a re-run resumes). `make run` and evaluate-paper quote its
# one-line reason per technique when they find ABLATE_OUT/ablation.csv.
ABLATE_OUT ?= out/ablation
ABLATE_POLICIES ?= schedtask selective-offload flexsc disaggregate-os slicc
ABLATE_ARGS ?= --cores 8 --load 2 --epochs 5 --factor schedtask:steal=same,any
ablate-paper: setup
	$(PYSCHED) ablate $(addprefix data/,$(DATA_WORKLOADS)) \
	    $(addprefix --policy ,$(ABLATE_POLICIES)) $(ABLATE_ARGS) --out $(ABLATE_OUT)

# The same for seed 001: HRRS against linux on barrier, seed 001's machine (one big and three
# small cores), one copy, the whole replay; then the seeds' summary with its one-line reason
# (out/seeds-ablated/summary.md).
ABLATE_SEEDS_OUT ?= out/ablation-seeds
ablate-seeds: setup
	$(PYSCHED) ablate data/barrier --policy hrrs --baseline linux \
	    --machine machines/seed001-acmp.toml --cores 4 --load 1 --out $(ABLATE_SEEDS_OUT)
	rm -rf out/seeds-ablated
	$(PYSCHED) seeds --data data --ablation $(ABLATE_SEEDS_OUT) --out out/seeds-ablated \
	    > /dev/null

# The suite CI runs; it ends with its 25 slowest tests, the ones to look at when it nears the
# 30 minutes it must stay well under.
# The test files run on TEST_JOBS workers (pytest-xdist), each file whole on one worker so that
# a module's guest capture is made once.
TEST_JOBS ?= auto
test: plugin guest
	$(PY) -m pytest -q -m "not slow" -n $(TEST_JOBS) --dist loadfile --durations=25

test-all: plugin guest
	$(PY) -m pytest -q

# The tracer on a second kernel (Debian KERNEL_SUITE's linux-image-amd64, trixie's 6.12 by
# default, bullseye's 5.10 with KERNEL_SUITE=bullseye) on the busybox test guest, checked as
# the first (tests/test_guest_kernel2.py).
KERNEL_SUITE ?= trixie
test-kernel2: plugin guest
	$(MAKE) -C guest kernel2-guest KERNEL_SUITE=$(KERNEL_SUITE)
	PYSCHED_GUEST2=$(abspath build/guest-$(KERNEL_SUITE)) $(PY) -m pytest -q tests/test_guest_kernel2.py

bench: bench-tracer bench-exec-encoding bench-models bench-analysis bench-sandbox \
	bench-sandbox-coherent bench-run

bench-tracer: plugin guest
	$(PY) benchmarks/tracer.py --out benchmarks/results/tracer.json

clean:
	rm -rf build out
	$(MAKE) -C qemu-plugin clean

# Cache models against pycachesim on the shipped data-access trace (no guest or plugin needed).
# The exec table's successor encodings (/1 and /2) on every shipped trace: bytes per instruction
bench-exec-encoding: setup
	$(PY) benchmarks/exec_encoding.py --out benchmarks/results/exec-encoding.json \
	    --part-rows 4194304,16777216

bench-models: setup
	$(PY) benchmarks/models.py --out benchmarks/results/models.json

# SuperFunction segmentation + page heatmaps: instructions/s and peak memory on the largest
# shipped trace and a >= 1 G-instruction trace (recorded under /tmp when missing).
bench-analysis: plugin guest
	$(PY) benchmarks/analysis.py --out benchmarks/results/analysis.json

# The scheduler sandbox: every shipped trace x every policy x 8 and 32 cores at 2X (3-epoch
# window), the compiled engine's simulated instructions/s, its speed-up over the plain engine
# and their identity (8 cores), preparation time and peak RSS, and the scaling runs; the
# whole grid takes about half an hour on 2 cores (26 min on 2026-11-29):
# BENCH_SANDBOX_ARGS="--traces iscp,find --policies linux" measures a part. BENCH_SANDBOX_ARGS=--sweep-only measures the sweep's points per minute.
BENCH_SANDBOX_ARGS ?=
bench-sandbox: setup
	$(PY) benchmarks/sandbox.py --out benchmarks/results/sandbox.json --scaling $(BENCH_SANDBOX_ARGS)

# The sandbox on machines/coherent.toml (inclusive, coherent caches: the access-at-a-time cache
# kernel and its sharers table) on four traces with data accesses, two policies, 8 and 32
# cores and the scaling runs: about 13 minutes on 2 cores
BENCH_SANDBOX_COHERENT_ARGS ?= --traces find,oltp,chase-mid,dss-mem --policies linux,schedtask
bench-sandbox-coherent: setup
	$(PY) benchmarks/sandbox.py --out benchmarks/results/sandbox-coherent.json --scaling \
	    --machine machines/coherent.toml $(BENCH_SANDBOX_COHERENT_ARGS)

# make run's three steps timed after set-up: its first run (the prepared-trace cache empty)
# and a warm one (benchmarks/make_run.py; BENCH_RUN_ARGS="--modes warm" for one of them,
# "--modes cold" with numba's cache empty too)
BENCH_RUN_ARGS ?=
bench-run: plugin guest
	$(PY) benchmarks/make_run.py --out benchmarks/results/make-run.json $(BENCH_RUN_ARGS)
