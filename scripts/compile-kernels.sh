#!/usr/bin/env bash
# Compile pysched's numba kernels into numba's on-disk cache (each subpackage's __pycache__),
# the last step of set-up, so that `make run` and the tests start with compiled kernels.
#
# numba compiles a kernel for the argument types of its first call, so the kernels are compiled
# by running what `make run` runs on one small shipped trace, in two processes at once (each
# kernel's cache entry is written once, atomically): the analysis then the seeds' studies, and
# the sandbox's 2X evaluation of the SchedTask study's policies for one epoch. --no-cache keeps
# the user's cache of prepared traces as it was. Outputs go to a temporary directory.
# A stamp named after a hash of the sources (and pyproject.toml) in pysched/__pycache__ skips
# the step until a source changes or the caches are removed. A failure is reported and leaves
# no stamp, but does not fail set-up: the kernels are then compiled on first use.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
log() { printf '[setup] %s\n' "$*"; }
py="$top/.venv/bin/python"
pysched="$top/.venv/bin/pysched"
trace=data/iscp

digest=$( { find pysched -name '*.py' -print0 | sort -z | xargs -0 sha1sum; sha1sum pyproject.toml; } \
          | sha1sum | cut -c1-16)
stamp="pysched/__pycache__/.kernels-$digest"
[ -f "$stamp" ] && exit 0
if [ ! -f "$trace/manifest.json" ]; then
  log "not compiling the numba kernels ahead: no $trace (they compile on first use)"
  exit 0
fi

log "compiling the numba kernels (a few minutes, once per change of the sources)"
tmp=$(mktemp -d)
# a stopped set-up stops the warm-up too: each job and the commands it started
trap 'for j in $(jobs -p); do pkill -TERM -P "$j" 2>/dev/null; kill "$j" 2>/dev/null; done
      rm -rf "$tmp"' EXIT
policies=$("$py" -c 'from pysched.studies.schedtask_paper.study import POLICIES
print(",".join(POLICIES))') || { log "kernel warm-up: pysched does not import"; exit 0; }
{ "$pysched" analyse "$trace" --out "$tmp/analyse" \
    && "$pysched" seeds --data data --out "$tmp/seeds" --workers 1 --no-cache; } \
  > "$tmp/analyse.log" 2>&1 &
a=$!
"$pysched" evaluate "$trace" --policies "$policies" --cores 8 --load 2 --epochs 1 --no-cache \
  --out "$tmp/evaluate" > "$tmp/evaluate.log" 2>&1 &
e=$!
ok=1
wait "$a" || { ok=0; log "kernel warm-up (analyse, seeds) failed:"; tail -n 20 "$tmp/analyse.log"; }
wait "$e" || { ok=0; log "kernel warm-up (evaluate) failed:"; tail -n 20 "$tmp/evaluate.log"; }
if [ "$ok" = 1 ]; then
  rm -f pysched/__pycache__/.kernels-* && mkdir -p pysched/__pycache__ && touch "$stamp"
  log "numba kernels compiled"
fi
exit 0
