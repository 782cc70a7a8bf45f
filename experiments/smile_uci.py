"""SMILE ensembles and their baselines on UCI regression, at an equal per-chain PEG budget.

Per (dataset, split), `jaxml.smile.run_split` trains K MAP members, starts one chain per member for
every sampler and evaluates the posterior predictive on the test rows; the `paper` preset runs
`jaxml.smile.run_classification` on CIFAR-10. Runs split into several jobs merge into one table:

  python -m experiments.smile_uci --merge=runs/a,runs/b --workdir=runs/merged
  python -m experiments.smile_uci --merge=runs/a,runs/b --extend=runs/c --workdir=runs/ext   # c: extra ε₀ values
"""

import sys
from typing import NamedTuple

import jax
import numpy as np

from experiments import common, smile_report
from jaxml import core, smile
from jaxml.data import offline

PROTOCOLS = ("smile", "standard", "auto", "tfds")
SPLIT_SOURCES = ("files", "authors")    # rows of the 70/10/20 sets: our index files, or the authors' seeds


class Plan(NamedTuple):
  """Everything the run reads from the config, as plain values (built before anything is written)."""

  seed: int
  data_dir: str | None
  datasets: tuple[str, ...]
  protocols: dict             # dataset -> data protocol ("smile" or "standard"; "auto" resolved per set)
  splits: dict                # dataset -> split indices of its protocol
  pipeline: dict              # the `jaxml.smile` pipeline settings (a plain dict)
  train: dict                 # core.train settings of the ensemble (num_steps set per data set)
  num_data: int


def plan(config) -> Plan:
  """Validates names and reads every config key the run uses (strict configs)."""
  s = config.smile
  common.validate_choice(s.protocol, PROTOCOLS, "protocol")
  for m in s.methods:
    common.validate_choice(m, smile.METHODS, "method")
  pipeline = {k: s[k] for k in smile.pipeline.config_keys(s.methods, s.protocol)}
  train = {"optim": {k: config.optim[k] for k in config.optim.keys()}, "log_every": int(config.log_every),
           "checkpoint_every": int(config.checkpoint_every), "steps_per_dispatch": int(config.steps_per_dispatch)}
  core.make_optimizer(train["optim"])      # a bad optimizer fails here, before anything is written
  datasets, protocols, splits = (), {}, {}
  if s.protocol != "tfds":
    common.validate_choice(s.noise, ("global", "heteroscedastic"), "noise model")
    common.validate_choice(s.likelihood_scale, ("ratio", "floor"), "likelihood scale")
    common.validate_choice(s.split_source, SPLIT_SOURCES, "split source")
    datasets, given = tuple(s.datasets), tuple(int(i) for i in s.splits)
    for d in datasets:
      # auto: the 20-split protocol where a set has it; the smile-only sets use their splits 1-3 for 0-2.
      protocols[d] = smile_report.data_protocol(s.protocol, d)
      allowed = offline.UCI_SMILE_DATASETS if protocols[d] == "smile" else tuple(
          x for x in offline.UCI_DATASETS if x not in offline.UCI_SMILE_ONLY)
      common.validate_dataset(d, allowed, f"dataset for protocol {protocols[d]!r}")
      splits[d] = tuple(i + 1 for i in given) if s.protocol == "auto" and protocols[d] == "smile" else given
  return Plan(int(config.seed), config.data_dir, datasets, protocols, splits, pipeline, train,
              int(config.mesh.num_data))


def member_batches(train: dict, batch_size: int, seed: int, k: int) -> list:
  """Member m walks its own seeded permutation of the training rows."""
  return [core.epoch_batches(train, batch_size, seed=seed * 1000 + m) for m in range(k)]


def run(config, workdir: str) -> list[dict]:
  p = plan(config)
  s = p.pipeline
  mesh = core.make_mesh(p.num_data or None)
  if s["protocol"] == "tfds":
    return run_paper(p, workdir, mesh)
  rows: list[dict] = []
  for dataset in p.datasets:
    samplers = None       # one set of compiled runners serves every split of the same shapes
    s = p.pipeline | {"protocol": p.protocols[dataset]}
    for split in p.splits[dataset]:
      authors = s["protocol"] == "smile" and s["split_source"] == "authors"
      data = offline.load_uci(dataset, split, protocol=s["protocol"], root=p.data_dir,
                              row_order=(lambda n, seed=split: smile.authors_row_order(seed, n)) if authors else None,
                              test_batch=int(s["batch_size"]) if authors else 0)
      n = len(data["y_train"])
      if samplers is None or samplers.data_size != n:
        samplers = smile.make_samplers(s, data_size=n, budget_epochs=float(s["budget_epochs"]))
      b, per_epoch, steps = smile.member_plan(s, n)
      log_every = per_epoch * max(p.train["log_every"] // per_epoch, 1)   # epoch-aligned: K steps per dispatch
      member_seed = p.seed * 100 + split
      train = {"x": data["x_train"], "y": data["y_train"]}
      results = smile.run_split(s, p.train | {"num_steps": steps, "log_every": log_every}, samplers, data,
                                member_batches(train, b, member_seed, int(s["num_members"])), seed=member_seed,
                                chain_key=jax.random.key(p.seed * 7919 + split),
                                rng=np.random.default_rng([p.seed, split]), steps_per_epoch=per_epoch,
                                workdir=workdir, name=f"members_{dataset}_{split}", mesh=mesh, progress=True)
      for method, (metrics, cost) in results.items():
        extra = "".join(f" {k} {metrics[k]:.4g}" for k in ("valid_lppd", "step_size0", "final_step_size", "eps_spread", "eps_drift",
                                                              "nonfinite", "chains_kept", "lppd_kept") if k in metrics)
        print(f"[smile_uci] {dataset}/split{split} {method:13s} lppd {metrics['lppd']:+.3f} rmse {metrics['rmse']:.3f} "
              f"peg {cost.get('peg', 0):.3g} wall {cost.get('wall_s', 0):.1f}s{extra}", flush=True)
        rows.append(common.row(method=method, dataset=dataset, split=split, seed=p.seed, metrics=metrics, cost=cost))
  return smile_report.summarize(rows, workdir, {d for d, pr in p.protocols.items() if pr == "smile"})


def run_paper(p: Plan, workdir: str, mesh) -> list[dict]:
  """Accelerator preset: K ResNet members (core.train), then pSMILE and SGLD chains on CIFAR-10."""
  from jaxml.data.tfds import load_tfds_arrays
  from jaxml.nn.resnet import ResNet
  s = p.pipeline
  train, test = (load_tfds_arrays(s["paper_dataset"], split=part, batch_size=int(s["paper_load_batch"]),
                                  limit=int(s[f"paper_{part}_limit"]), data_dir=p.data_dir)
                 for part in ("train", "test"))
  net = ResNet(num_classes=int(s["num_classes"]), stage_sizes=tuple(s["resnet_stage_sizes"]),
               width=int(s["resnet_width"]))
  b = min(int(s["paper_batch"]), len(train["y"]))
  results = smile.run_classification(
      s, p.train | {"num_steps": int(s["member_max_steps"])}, lambda prm, x: net.apply({"params": prm}, x),
      lambda r, x: net.init(r, x)["params"], train, test, member_batches(train, b, p.seed, int(s["num_members"])),
      seed=p.seed, batch_size=b, workdir=workdir, mesh=mesh)
  for method, (metrics, _) in results.items():
    print(f"[smile_uci] {s['paper_dataset']} {method}: {metrics}", flush=True)
  return [common.row(method=m, dataset=s["paper_dataset"], split=0, seed=p.seed, metrics=met, cost=cost)
          for m, (met, cost) in results.items()]


if __name__ == "__main__":
  if any(a.startswith("--merge") for a in sys.argv[1:]):
    smile_report.merge_main(sys.argv[1:])
  else:
    common.run_main(run, experiment="smile_uci", plan=plan)
