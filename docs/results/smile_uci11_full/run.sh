#!/bin/bash
# The `uci11` protocol at the authors' full budget (50k + 10k steps, 200-epoch members), one job per
# (data set, split), so that it can be run in pieces on a 2-core machine and resumed in a later session.
# A finished job's results.json / config.json / summary.md are copied here (<set>_<split>/) and skipped on a rerun;
# the table is the merge of the finished jobs (README.md). Run from the repository root:
#   bash docs/results/smile_uci11_full/run.sh                       # every job not yet here, in the order below
#   JOBS="boston_0 boston_1" bash docs/results/smile_uci11_full/run.sh
#   DEADLINE=$(date -d 19:35 +%s) bash docs/results/smile_uci11_full/run.sh   # start no job after 19:35
# Methods: pSMILE-naive and pSMILE-clamp (the pSMILE variants `psmile_best` chooses between), SGLD and SGHMC (the
# must-reach baselines), DE (free: the members); the authors' ε₀ grids. LOCK (default /tmp/cpu.lock) serialises
# heavy jobs on a shared machine. A job's number is the config's split index (`splits=`): on airfoil and bikesharing,
# which have only the 70/10/20 splits 1-3, the uci11 preset maps 0-2 to those, so airfoil_0 holds the rows of split 1.
cd "$(dirname "$0")/../../.." || exit 1
OUT=docs/results/smile_uci11_full
PY=${PY:-.venv/bin/python}
LOCK=${LOCK:-/tmp/cpu.lock}
DEADLINE=${DEADLINE:-0}
M=de+psmile_naive+psmile_clamp+sgld+sghmc
ALL="boston_0 boston_1 boston_2 yacht_0 yacht_1 yacht_2 power-plant_0 power-plant_1 power-plant_2
     concrete_0 concrete_1 concrete_2 energy_0 energy_1 energy_2 wine-quality-red_0 wine-quality-red_1
     wine-quality-red_2 kin8nm_0 kin8nm_1 kin8nm_2 naval_0 naval_1 naval_2 airfoil_0 airfoil_1 airfoil_2
     bikesharing_0 bikesharing_1 bikesharing_2 protein_0 protein_1 protein_2"
for job in ${JOBS:-$ALL}; do
  name=${job%_*}; split=${job##*_}
  [ -f "$OUT/$job/results.json" ] && { echo "skip $job (done)"; continue; }
  [ "$DEADLINE" -gt 0 ] && [ "$(date +%s)" -gt "$DEADLINE" ] && { echo "deadline: stop before $job"; break; }
  wd=runs/uci11_full/$job; rm -rf "$wd"; mkdir -p runs/uci11_full
  t0=$(date +%s); echo "$(date -u +%T) start $job"
  flock "$LOCK" nice -n 5 "$PY" -m experiments.smile_uci \
    --config="configs/smile_uci.py:uci11:datasets=$name,splits=$split,methods=$M" --workdir="$wd" > "$wd.log" 2>&1
  rc=$?; echo "$(date -u +%T) end $job rc=$rc wall=$(( $(date +%s) - t0 ))s"
  [ $rc = 0 ] && mkdir -p "$OUT/$job" && cp "$wd"/{results,config}.json "$wd/summary.md" "$OUT/$job/"
done
