"""One SOL fit on the reduced CountDots-K30 setup of docs/results/sol.md, with the validation detail
that `experiments.sol_ordinal` does not record (issue 18: when relabelling reaches the selected model).

  PYTHONPATH=. python benchmarks/sol_countdots_probe.py --noise gaussian:0.4 --relabel_start 300 \
      --out runs/sol_cd_probe.json

Same data, noise draw, settings and seeds as
`experiments.sol_ordinal --config=configs/sol_ordinal.py:countdots:methods=sol,partitions=1,noise=<noise>`
with num_train / num_test / steps / batch_size / relabel_start / relabel_every overridden (the rank
set is the noise setting's own, as in the experiment since h38). The experiment's own `prepare`, `train_config` and
`rows_for` are called, so its test MAEs are the experiment's. It adds every decoder's noisy-validation
MAE at the selected and the final step, and each relabelling's statistics. Writes one JSON file and
prints it.
"""

import argparse
import json
import time
from typing import Any

from configs import sol_ordinal as sol_config
from experiments import sol_ordinal
from jaxml import sol


def probe(noise: str, relabel_start: int, relabel_every: int, *, num_train: int = 1000, num_test: int = 500,
          steps: int = 600, batch_size: int = 32, partition: int = 0) -> dict[str, Any]:
  """Fits SOL on one CountDots partition and returns validation and test MAEs per decoder."""
  cfg = sol_config.get_config(f"countdots:methods=sol,noise={noise}")
  cfg.data.partitions = (partition,)
  cfg.data.countdots.num_train, cfg.data.countdots.num_test = num_train, num_test
  cfg.train.steps, cfg.train.batch_size = steps, batch_size
  cfg.sol.relabel_start, cfg.sol.relabel_every = relabel_start, relabel_every
  sol_ordinal.plan(cfg)
  t0 = time.time()
  parts, num_ranks = sol_ordinal.prepare(cfg, "countdots")
  d = parts[0]
  trainer = sol.make_trainer("sol", {**dict(cfg.sol), "num_classes": num_ranks[noise]}, sol_ordinal.train_config(cfg))
  (y_noisy, corruption), (y_val, _) = d["noisy"][noise]
  fitted = sol.fit(trainer, d["x_train"], y_noisy, d["x_val"], y_val, seed=int(cfg.seed) + 1000 * d["partition"],
                   name="probe", log=lambda m: print(m, flush=True))
  rows = sol_ordinal.rows_for(cfg, trainer, fitted, d, noise, "sol", "countdots", y_noisy, corruption)
  return {"noise": noise, "relabel_start": relabel_start, "relabel_every": relabel_every, "num_ranks": num_ranks[noise],
          "relabel_steps": sol.relabel_steps(trainer.learner.settings, trainer.steps), "n_val": int(len(y_val)),
          "decoder": fitted.decoder, "best_step": fitted.best_step, "val_mae": fitted.val_mae,
          "final_val_mae": fitted.final_val_mae, "refreshes": fitted.refreshes, "fit_wall_s": fitted.wall_s,
          "steps_per_s": fitted.steps_per_s, "total_wall_s": time.time() - t0,
          "test": {r["method"]: r["metrics"]["mae"] for r in rows}, "row": rows[0]["metrics"]}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--noise", default="gaussian:0.4")
  ap.add_argument("--relabel_start", type=int, default=300)
  ap.add_argument("--relabel_every", type=int, default=100)
  ap.add_argument("--num_train", type=int, default=1000)
  ap.add_argument("--num_test", type=int, default=500)
  ap.add_argument("--steps", type=int, default=600)
  ap.add_argument("--batch_size", type=int, default=32)
  ap.add_argument("--partition", type=int, default=0)
  ap.add_argument("--out", required=True)
  a = ap.parse_args()
  res = probe(a.noise, a.relabel_start, a.relabel_every, num_train=a.num_train, num_test=a.num_test, steps=a.steps,
              batch_size=a.batch_size, partition=a.partition)
  with open(a.out, "w") as f:
    json.dump(res, f, indent=1, default=float)
  print(json.dumps(res, indent=1, default=float), flush=True)


if __name__ == "__main__":
  main()
