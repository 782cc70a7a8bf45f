#!/bin/bash
# Named extension of the full-budget uci11 table: for every finished job (<set>_<split>/ here) whose SGLD or SGHMC
# validation choice is an edge of its grid, run that baseline alone at one decade beyond the edge (SGLD 1e-7 below
# 1e-6, 1e-3 above 1e-4; SGHMC 1e-5 below 1e-4, 1e-1 above 1e-2), same protocol otherwise, into <method>_<ε₀>/<job>/,
# and again a decade further while the choice over the grid so far is still its edge (status.py: at most MAX_DECADES).
# The baselines due on one (set, split) in a round run in one job (members trained once); its files go into each
# run's folder.
# status.py combines them with experiments.smile_uci.extend_grid (validation LPPD over the union grid): a baseline
# whose optimum lies outside the authors' grid would otherwise lose by construction. Same knobs as run.sh (JOBS,
# DEADLINE, LOCK, PY). Run from the repository root:
#   bash docs/results/smile_uci11_full/extend_edges.sh
cd "$(dirname "$0")/../../.." || exit 1
OUT=docs/results/smile_uci11_full
PY=${PY:-.venv/bin/python}
LOCK=${LOCK:-/tmp/cpu.lock}
DEADLINE=${DEADLINE:-0}
# The runs due (edge choices without an extension run here) come from status.py, which holds the grids; it is asked
# again after each round, since a finished run can make the next decade due. A run is tried once per call.
tried=" "
while :; do
  PYTHONPATH=. "$PY" $OUT/status.py --pending > /tmp/extend_edges.$$ || exit 1
  ran=0
  # One experiments.smile_uci job per (set, split) and round: the baselines due there share its members (trained
  # once), and a chain's draws do not depend on the other (method, ε₀) of its run (pipeline.combo_chain_ids).
  for job in $(cut -d' ' -f1 /tmp/extend_edges.$$ | uniq); do
    [ -n "${JOBS:-}" ] && case " $JOBS " in *" $job "*) ;; *) continue ;; esac
    methods=; flags=; runs=
    while read -r j method eps; do
      [ "$j" = "$job" ] || continue
      case "$tried" in *" $job:$method:$eps "*) continue ;; esac
      tried="$tried$job:$method:$eps "
      methods=${methods:+$methods+}$method; flags="$flags --config.smile.${method}_step_size=($eps,)"
      runs="$runs ${method}_$eps"
    done < /tmp/extend_edges.$$
    [ -z "$runs" ] && continue
    name=${job%_*}; split=${job##*_}
    [ "$DEADLINE" -gt 0 ] && [ "$(date +%s)" -gt "$DEADLINE" ] && { echo "deadline: stop before$runs $job"; break 2; }
    tag=${runs# }; wd=runs/uci11_full_ext/${tag// /+}/$job; rm -rf "$wd"; mkdir -p "$(dirname "$wd")"
    t0=$(date +%s); echo "$(date -u +%T) start$runs $job"; ran=1
    flock "$LOCK" nice -n 5 "$PY" -m experiments.smile_uci \
      --config="configs/smile_uci.py:uci11:datasets=$name,splits=$split,methods=$methods" $flags \
      --workdir="$wd" > "$wd.log" 2>&1 < /dev/null
    rc=$?; echo "$(date -u +%T) end$runs $job rc=$rc wall=$(( $(date +%s) - t0 ))s"
    # each run's folder gets the job's files (status.py reads only its own method's row from results.json)
    [ $rc = 0 ] && for r in $runs; do mkdir -p "$OUT/$r/$job" && cp "$wd"/{results,config}.json "$wd/summary.md" "$OUT/$r/$job/"; done
  done
  [ $ran = 0 ] && break
done
rm -f /tmp/extend_edges.$$
