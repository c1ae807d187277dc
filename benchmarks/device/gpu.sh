#!/usr/bin/env bash
# The GPU study on a device machine, in one call of about ten minutes. Prepare here first:
#   bash benchmarks/device/wheels.sh            # the packages the device lacks, as wheels in .whl/
# then run on the device, carrying .whl (the command the device tool takes):
#   bash benchmarks/device/gpu.sh               # with carry [".whl"] and timeout_s 600
#   BUDGET_S=250 GPU_ARGS="--envs cartpole" bash benchmarks/device/gpu.sh   # a shorter call: one env
# It installs the wheels beside the device's own torch (quarl from src/, without its torch pin),
# names the GPU and the CPU, runs benchmarks/bench_actorq_gpu.py and leaves in $OUT: stdout.txt,
# log.txt, actorq_gpu.md, amp.csv, records.tar.gz, results.sqlite and runs.tar.gz. Back here:
#   tar xzf <files_at>/records.tar.gz -C docs/reproduction/records && quarl report
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-outputs/device}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
{ nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; lscpu | grep -o -E "avx512_vnni|amx_[a-z0-9]+" | sort -u | tr '\n' ' '; echo; 
  python3 -c "import torch; print('torch', torch.__version__)"; } 2>&1 | tee "$OUT/stdout.txt"
keep() {  # what landed so far into $OUT, so that a call cut short by the device's time still brings it back
  for f in log.txt actorq_gpu.md amp.csv records.tar.gz results.sqlite; do [ -f "/tmp/gpu/$f" ] && cp "/tmp/gpu/$f" "$OUT/"; done
  [ -f /tmp/gpu/learner_trace.json ] && [ ! -f "$OUT/learner_trace.json.gz" ] && gzip -c /tmp/gpu/learner_trace.json > "$OUT/learner_trace.json.gz"
  [ -d /tmp/gpu/runs ] && tar czf "$OUT/runs.tar.gz.part" -C /tmp/gpu runs && mv "$OUT/runs.tar.gz.part" "$OUT/runs.tar.gz"
}
( while sleep 20; do keep 2>/dev/null; done ) & keeper=$!
timeout "${BUDGET_S:-540}" python3 benchmarks/bench_actorq_gpu.py --out /tmp/gpu --budget-s $(( ${BUDGET_S:-540} - 15 )) ${GPU_ARGS:-} 2>&1 | tee -a "$OUT/stdout.txt"
status=${PIPESTATUS[0]}
kill "$keeper" 2>/dev/null
keep  # each run's folder: its record, curves and log, even if cut short
exit "$status"
