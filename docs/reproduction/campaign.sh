#!/usr/bin/env bash
# The reproduction campaign, part by part, on one core (taskset) so the machine's other core stays
# free. Resumable: every sweep skips the cells already in the store and a killed training resumes
# from its checkpoint, so after an interruption run the same command again.
# Each part's records are copied to docs/reproduction/records/ as they land (JSON, one file a cell).
#   bash docs/reproduction/campaign.sh [PART...]     (no PART: all parts in order)
# Order: the paper's PTQ table, sweet spots and QAT first, then the named sweeps beyond them, cheapest
# first (each sweep's header states its cost). atari_hub needs the model hub, which this machine
# cannot reach: that part prints its command, to run where the hub is.
set -euo pipefail
cd "$(dirname "$0")/../.."
STORE=outputs/campaign/results.sqlite
COMMON=(store.path=$STORE store.policies=outputs/campaign/policies
        hydra.callbacks.collate.enabled=false train.progress=false eval.progress=false)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

# A fresh machine (no campaign store yet) starts from the committed records, so every cell done
# anywhere before is skipped (their policies are not kept: a cell still to run trains its own).
[ -f "$STORE" ] || { mkdir -p outputs/campaign && quarl rebuild docs/reproduction/records --store "$STORE"; }

archive() {  # the campaign's records, as JSON, into docs/reproduction/records/, and the report
  quarl report --archive outputs/campaign
}

sweep() {  # sweep NAME [OVERRIDES...]
  local name=$1; shift
  local started=$SECONDS
  taskset -c 1 nice -n 5 python run.py -m "+sweep=$name" "${COMMON[@]}" "hydra.sweep.dir=outputs/campaign/$name" "$@"
  echo "campaign: $name $* took $((SECONDS - started)) s" | tee -a docs/reproduction/wall_times.txt
  archive  # after the wall time, so the report written with the records holds it
}

show() {  # show NAME [OVERRIDES...]: the command `sweep` would run, for a machine that can run it
  local name=$1; shift
  echo "campaign: $name is not run here (it needs the model hub); where the hub is reachable, run"
  echo "  python run.py -m +sweep=$name ${COMMON[*]} hydra.sweep.dir=outputs/campaign/$name${*:+ $*}"
  echo "  quarl report --archive outputs/campaign"
}

part() {
  case $1 in
    ptq_table) sweep ptq_table_classic ;;                       # PTQ table, classic rows: 5 seeds
    sweet_spot) sweep ptq_classic ;;                            # PTQ sweet spots, 2..8 bits and fp32
    qat) sweep qat_classic quant.bits=2,4,6,8 ;;                # QAT vs PTQ at 2, 4, 6, 8 bits, 3 seeds
    atari_hub) show ptq_table_atari_hub ;;                      # Atari PTQ table on rl-zoo3's hub agents
    actorq_wide) sweep actorq_wide ;;                           # ActorQ, DQN 3x2048 on CartPole, 1 seed
    d4pg) sweep d4pg_cartpole ;;                                # ActorQ, D4PG on DMC cartpole balance, 1 seed
    d4pg_cpu) sweep d4pg_cartpole_cpu ;;                        # the same with 256x256 networks, which learn on a CPU
    actorq_gym) sweep actorq_gym ;;                             # ActorQ time to reward, DQN on Gym, 3 seeds
    extensions) sweep ptq_extensions ;;                         # PTQ sweet spots on the tasks the paper skipped
    published)                                                  # PTQ table rows under the published conditions,
      for a in dqn a2c ppo ddpg; do sweep ptq_table_published "algo=$a"; done ;;  # one algorithm at a time
    robust)                                                     # trained for robustness, one task (both techniques) at a time
      for e in cartpole acrobot box2d/lunarlander pendulum; do for r in sam noise; do
        a=dqn; [ "$e" = pendulum ] && a=sac
        sweep ptq_robust "algo=$a" "env=$e" "train.robust=$r"
      done; done ;;
    formats)                                                    # FP8, MX, NVFP4, NF4 beside int4/6/8, one task at a time
      for e in cartpole pendulum acrobot mountaincar_continuous box2d/lunarlander; do sweep ptq_formats "env=$e"; done ;;
    actorq_formats) sweep actorq_formats ;;                     # ActorQ actors in FP8, MX, NVFP4, NF4 beside fp32 ones, 3 seeds
    *) echo "unknown part $1: choose ptq_table, sweet_spot, qat, atari_hub, actorq_wide, d4pg, d4pg_cpu, actorq_gym," \
            "extensions, published, robust, formats, actorq_formats" >&2; exit 2 ;;
  esac
}

# Default order: cheapest first; ptq_table's last rows (DDPG on MountainCarContinuous, ~70 min a seed on an idle core) late.
for p in "${@:-sweet_spot qat atari_hub actorq_wide d4pg d4pg_cpu actorq_gym ptq_table extensions}"; do
  for q in $p; do part "$q"; done
done
