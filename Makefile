# pysched: full-system traces of Linux guests for OS-scheduler studies.
#   make run    set everything up, then trace the demo workload and check the trace
#   make test   set everything up, then run the test suite (what CI runs)
PY      := .venv/bin/python
PYSCHED := .venv/bin/pysched
RUN_OUT ?= out/demo

.PHONY: setup plugin guest run test test-all bench bench-tracer clean bench-models

setup:
	bash scripts/setup.sh

plugin: setup
	$(MAKE) -C qemu-plugin

guest: setup
	$(MAKE) -C guest busybox-guest

run: plugin guest
	rm -rf $(RUN_OUT)
	$(PYSCHED) trace --out $(RUN_OUT) --vcpus 2 \
	    --cmd "sysloop 1000; spin 20 & spin 20 & wait; ls -R /proc/sys > /dev/null"
	$(PYSCHED) check $(RUN_OUT)

test: plugin guest
	$(PY) -m pytest -q -m "not slow"

test-all: plugin guest
	$(PY) -m pytest -q

bench: bench-tracer bench-models

bench-tracer: plugin guest
	$(PY) benchmarks/tracer.py --out benchmarks/results/tracer.json

clean:
	rm -rf build out
	$(MAKE) -C qemu-plugin clean

bench-models: plugin guest
	$(PY) benchmarks/models.py --out benchmarks/results/models.json
