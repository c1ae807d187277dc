#!/usr/bin/env bash
# The GPU work on a device machine, in one call of about ten minutes: the device ledger's next jobs
# that fit (benchmarks/device/ledger.yaml, docs/device.md). Prepare here first:
#   bash benchmarks/device/wheels.sh            # the packages the device lacks, as wheels in .whl/
# then the device tool's run: command "bash benchmarks/device/gpu.sh", carry
# [".whl", "benchmarks/device/state"] (the resumable jobs' checkpoints), timeout_s 600. Back here:
#   python benchmarks/device/ledger.py land <files_at> && quarl report
# Variants:
#   BUDGET_S=300 bash benchmarks/device/gpu.sh                      # a shorter call
#   LEDGER_ARGS="--only smoke amp" bash benchmarks/device/gpu.sh    # these jobs only
#   BUDGET_S=330 GPU_ARGS="--envs cartpole --cap-s 30" bash benchmarks/device/gpu.sh
#       # the whole GPU script (benchmarks/bench_actorq_gpu.py) as before the ledger: stdout.txt,
#       # log.txt, actorq_gpu.md, amp.csv, records.tar.gz, results.sqlite and runs.tar.gz in $OUT
# It installs the wheels beside the device's own torch (quarl from src/, without its torch pin) and
# names the GPU and the CPU; the ledger counts the install's seconds into the budget.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-outputs/device}
mkdir -p "$OUT"
SECONDS=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
{ nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; lscpu | grep -o -E "avx512_vnni|amx_[a-z0-9]+" | sort -u | tr '\n' ' '; echo;
  python3 -c "import torch; print('torch', torch.__version__)"; } > /tmp/device.txt 2>&1
cat /tmp/device.txt
if [ -z "${GPU_ARGS+set}" ]; then
  exec python3 benchmarks/device/ledger.py run --budget-s "${BUDGET_S:-540}" --spent-s "$SECONDS" --out "$OUT" \
    --device-info /tmp/device.txt ${LEDGER_ARGS:-}
fi
cp /tmp/device.txt "$OUT/stdout.txt"
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
