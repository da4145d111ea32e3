#!/usr/bin/env bash
# Prepare the shipped traces (data/*) for the sandbox into the user's cache of prepared traces
# (`pysched cache --prepare`), the last step of set-up, so that `make run` reads them instead
# of segmenting them (several minutes on 2 cores, once per change of a trace or of the code
# that prepares it; a trace already in the cache costs a hash of its files).
# Skipped when CI is set: the tests keep caches of their own. A failure is reported and does
# not fail set-up: the traces are then prepared on first use.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
log() { printf '[setup] %s\n' "$*"; }
if [ -n "${CI:-}" ]; then
  exit 0
fi
traces=()
for d in data/*/; do
  [ -f "$d/manifest.json" ] && traces+=("${d%/}")
done
[ "${#traces[@]}" -gt 0 ] || exit 0
log "preparing the shipped traces for the sandbox (minutes, once per change of a trace or the code)"
"$top/.venv/bin/pysched" cache --prepare "${traces[@]}" | sed 's/^/[setup]   /' \
  || log "preparing the shipped traces failed; they are prepared on first use"
exit 0
