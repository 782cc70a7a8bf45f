"""Posterior spread against a reference: SMILE variants vs SGLD and tuned MCLMC at equal PEG.

For every check of `jaxml.smile.checks` (linear / logistic regression with minibatches, an
anisotropic Gaussian and a funnel at full batch) each method runs `--chains` chains on the
same per-chain budget of per-example gradient evaluations (PEG): SMILE takes 2 batch gradients
per step, SGLD 1, full-batch MCLMC 2N. The first half of each run is warmup. Printed: the rms
standardized mean error and the rms relative std error (reference-std units), as a markdown
table also written to `--out`.

Step sizes use one number from the reference, σ_min (the smallest reference std), the same
way for every target: SGLD ε = 0.05 σ_min², SMILE ε₀ = 0.5 σ_min √d; MCLMC tunes its own.
Rows marked "L" use a finite partial-refresh length L = scale · √d · rms(ref std) (MCLMC's
heuristic scale); the others the SMILE default L = ∞. "energy_var" is the absolute-target tuner
(3 batch gradients per step, so it takes fewer steps on the same PEG budget).

  python -m benchmarks.smile_spread [--steps 20000] [--chains 4] [--out runs/smile_spread.md]
"""

import argparse
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxml.smile import baselines, chains, checks, kernel


def methods(check: checks.Check, dim: int, scale_l: float) -> dict:
  """name -> ChainKernel (None marks full-batch MCLMC)."""
  smin = float(np.min(check.ref_std))
  eps = 0.5 * smin * math.sqrt(dim)
  l_finite = scale_l * math.sqrt(dim) * float(np.sqrt(np.mean(check.ref_std ** 2)))
  f = check.logdensity_fn
  return {
      "pSMILE tuned": chains.smile_chain_kernel(kernel.psmile(f, step_size=eps)),
      "pSMILE tuned energy_var": chains.smile_chain_kernel(kernel.psmile(f, step_size=eps, tuner="energy_var")),
      "pSMILE tuned energy_var L": chains.smile_chain_kernel(kernel.psmile(f, step_size=eps, tuner="energy_var",
                                                                           L=l_finite)),
      "pSMILE naive": chains.smile_chain_kernel(kernel.psmile(f, step_size=eps, tuned=False)),
      "pSMILE naive L": chains.smile_chain_kernel(kernel.psmile(f, step_size=eps, tuned=False, L=l_finite)),
      "SMILE naive": chains.smile_chain_kernel(kernel.smile(f, step_size=eps, tuned=False)),
      "SMILE naive L": chains.smile_chain_kernel(kernel.smile(f, step_size=eps, tuned=False, L=l_finite)),
      "SGLD": baselines.sgld_kernel(f, step_size=0.05 * smin ** 2),
      "MCLMC (full batch)": None,
  }


def run_check(check: checks.Check, *, steps: int, num_chains: int, seed: int, scale_l: float) -> list[dict]:
  dim = check.ref_mean.shape[0]
  n = int(check.data["y"].shape[0])
  b = check.batch_size
  budget = 2 * b * steps                                   # PEG per chain
  key = jax.random.key(seed)
  starts = check.init_scale * jax.random.normal(jax.random.fold_in(key, 1), (num_chains, dim))
  rows = []
  for name, kern in methods(check, dim, scale_l).items():
    t0 = time.perf_counter()
    if kern is None:
      total = max(budget // (2 * n), 40)
      num_samples = min(500, total // 2)
      thin = max((total - total // 2) // num_samples, 1)
      full = lambda th, batch=check.data: check.logdensity_fn(th, batch)
      res = chains.run_mclmc(full, starts, jax.random.fold_in(key, 2), data_size=n, num_tune=total // 2,
                             num_samples=num_samples, thin=thin)
    else:
      total = budget // (kern.grads_per_step * b)
      num_samples = 500
      thin = max((total // 2) // num_samples, 1)
      res = chains.run_chains(kern, starts, check.data, jax.random.fold_in(key, 2), batch_size=b,
                              num_warmup=total - num_samples * thin, num_samples=num_samples, thin=thin)
    pos = np.asarray(res.positions).reshape(-1, dim)
    mean_err, std_err = checks.spread_errors(pos, check)
    rows.append({"check": check.name, "method": name, "mean_err": mean_err, "std_err": std_err,
                 "peg": int(res.peg_per_chain), "final_eps": float(np.median(np.asarray(res.step_size))),
                 "seconds": time.perf_counter() - t0})
    print(f"{check.name:7s} {name:26s} mean {mean_err:8.3f} std {std_err:8.3f} peg {res.peg_per_chain:>9d} "
          f"eps {rows[-1]['final_eps']:.3g} ({rows[-1]['seconds']:.1f}s)", flush=True)
  return rows


def table(rows: list[dict]) -> str:
  names = list(dict.fromkeys(r["method"] for r in rows))
  checks_ = list(dict.fromkeys(r["check"] for r in rows))
  lines = ["| method | " + " | ".join(f"{c} mean | {c} std" for c in checks_) + " |",
           "|---|" + "---|---|" * len(checks_)]
  for m in names:
    cells = []
    for c in checks_:
      r = next(r for r in rows if r["method"] == m and r["check"] == c)
      cells += [f"{r['mean_err']:.3f}", f"{r['std_err']:.3f}"]
    lines.append(f"| {m} | " + " | ".join(cells) + " |")
  sgld = {r["check"]: r["std_err"] for r in rows if r["method"] == "SGLD"}
  lines.append("")
  lines.append("std error ÷ SGLD's: " + "; ".join(
      f"{m}: " + ", ".join(f"{c} {next(r for r in rows if r['method'] == m and r['check'] == c)['std_err'] / max(sgld[c], 1e-12):.2f}"
                           for c in checks_) for m in names if m != "SGLD"))
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--steps", type=int, default=20000, help="SMILE steps per chain (sets the PEG budget)")
  parser.add_argument("--chains", type=int, default=4)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--scale-l", type=float, default=1.0, help="finite L = scale · √d · rms(ref std)")
  parser.add_argument("--checks", default="linreg,linreg0,logreg,gauss,funnel")
  parser.add_argument("--out", default="runs/smile_spread.md")
  args = parser.parse_args()
  build = {"linreg": checks.linear_regression, "linreg0": lambda: checks.linear_regression(correlation=0.0), "logreg": checks.logistic_regression,
           "gauss": checks.anisotropic_gaussian, "funnel": checks.funnel}
  t0 = time.perf_counter()
  rows = []
  for name in args.checks.split(","):
    rows += run_check(build[name](), steps=args.steps, num_chains=args.chains, seed=args.seed,
                      scale_l=args.scale_l)
  text = table(rows)
  print(text)
  os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
  with open(args.out, "w") as fh:
    fh.write(f"steps={args.steps} chains={args.chains} seed={args.seed} scale_l={args.scale_l} "
             f"wall={time.perf_counter() - t0:.0f}s\n\n{text}\n")


if __name__ == "__main__":
  main()
