#!/usr/bin/env bash
# The reproduction campaign, part by part, on one core (taskset) so the machine's other core stays
# free. Resumable: every sweep skips the cells already in the store and a killed training resumes
# from its checkpoint, so after an interruption run the same command again.
# Each part's records are copied to docs/reproduction/records/ as they land (JSON, one file a cell).
#   bash docs/reproduction/campaign.sh [PART...]     (no PART: all parts in order)
set -euo pipefail
cd "$(dirname "$0")/../.."
COMMON=(store.path=outputs/campaign/results.sqlite store.policies=outputs/campaign/policies
        hydra.callbacks.collate.enabled=false train.progress=false eval.progress=false)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

archive() {  # the campaign's records, as JSON, into docs/reproduction/records/, and the report
  quarl report --archive outputs/campaign
}

sweep() {  # sweep NAME [OVERRIDES...]
  local name=$1; shift
  local started=$SECONDS
  taskset -c 1 nice -n 5 python run.py -m "+sweep=$name" "${COMMON[@]}" "hydra.sweep.dir=outputs/campaign/$name" "$@"
  archive
  echo "campaign: $name $* took $((SECONDS - started)) s" | tee -a docs/reproduction/wall_times.txt
}

part() {
  case $1 in
    ptq_table) sweep ptq_table_classic ;;                       # PTQ table, classic rows: 5 seeds
    sweet_spot) sweep ptq_classic ;;                            # PTQ sweet spots, 2..8 bits and fp32
    qat) sweep qat_classic quant.bits=2,4,6,8 ;;                # QAT vs PTQ at 2, 4, 6, 8 bits, 3 seeds
    *) echo "unknown part $1: choose ptq_table, sweet_spot, qat" >&2; exit 2 ;;
  esac
}

for p in "${@:-ptq_table sweet_spot qat}"; do
  for q in $p; do part "$q"; done
done
