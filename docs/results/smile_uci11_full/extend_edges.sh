#!/bin/bash
# Named extension of the full-budget uci11 table: for every finished job (<set>_<split>/ here) whose SGLD or SGHMC
# validation choice is an edge of its grid, run that baseline alone at one decade beyond the edge (SGLD 1e-7 below
# 1e-6, 1e-3 above 1e-4; SGHMC 1e-5 below 1e-4, 1e-1 above 1e-2), same protocol otherwise, into <method>_<ε₀>/<job>/,
# and again a decade further while the choice over the grid so far is still its edge (status.py: at most MAX_DECADES).
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
  while read -r job method eps; do
    [ -n "${JOBS:-}" ] && case " $JOBS " in *" $job "*) ;; *) continue ;; esac
    case "$tried" in *" $job:$method:$eps "*) continue ;; esac
    tried="$tried$job:$method:$eps "
    name=${job%_*}; split=${job##*_}
    [ "$DEADLINE" -gt 0 ] && [ "$(date +%s)" -gt "$DEADLINE" ] && { echo "deadline: stop before $method $job"; break 2; }
    wd=runs/uci11_full_ext/${method}_$eps/$job; rm -rf "$wd"; mkdir -p "$(dirname "$wd")"
    t0=$(date +%s); echo "$(date -u +%T) start $method $eps $job"; ran=1
    flock "$LOCK" nice -n 5 "$PY" -m experiments.smile_uci \
      --config="configs/smile_uci.py:uci11:datasets=$name,splits=$split,methods=$method" \
      --config.smile.${method}_step_size="($eps,)" --workdir="$wd" > "$wd.log" 2>&1 < /dev/null
    rc=$?; echo "$(date -u +%T) end $method $eps $job rc=$rc wall=$(( $(date +%s) - t0 ))s"
    dest=$OUT/${method}_$eps/$job
    [ $rc = 0 ] && mkdir -p "$dest" && cp "$wd"/{results,config}.json "$wd/summary.md" "$dest/"
  done < /tmp/extend_edges.$$
  [ $ran = 0 ] && break
done
rm -f /tmp/extend_edges.$$
