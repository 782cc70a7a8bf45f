"""Why SOL's rank centroids 'collapse' (issue 18): the loss on an ideal arc, and centroid shrinkage
under label noise on a synthetic task whose ideal embedding is known.

  PYTHONPATH=. python benchmarks/sol_geometry.py --out runs/sol_geometry

Part 1 (no training): one embedding per rank on an arc of span Θ; SOL's L_SO and L_D (exact over
the class-balanced pair distribution) as functions of Θ, for several margins m and τ / C.
Part 2 (training): x = r / (C−1) + tiny noise, so a perfect encoder exists (ranks on an arc);
train SOL (no relabelling) on clean and open-range-noisy labels and measure the arc span of the
clean-rank class means, the span of the noisy-rank centroids, the slope of centroid position vs
noisy rank against the reliability ρ = Var(y) / (Var(y) + s²), and test MAE per decoder.
Prints one line per setting and writes geometry.png under --out.
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from jaxml import sol  # noqa: E402
from jaxml.sol import geometry  # noqa: E402

C = 30


def _task(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  y = rng.integers(0, C, n)
  return (y / (C - 1) + 0.002 * rng.normal(size=n)).astype(np.float32)[:, None], y.astype(np.int32)


def _noisy(y: np.ndarray, p: float, seed: int) -> np.ndarray:
  s = p * (C - 1)
  return np.maximum(np.rint(y + np.random.default_rng(seed).normal(0, s, y.size)), 0).astype(np.int32)


def trained(p: float, *, embed_dim: int = 32, margin: float = 0.25, w_d: float = 1.0, steps: int = 1600) -> dict:
  x, y = _task(1200, 1)
  xv, yv = _task(300, 3)
  xt, yt = _task(600, 2)
  yn, yvn = _noisy(y, p, 5), _noisy(yv, p, 6)
  k = int(max(yn.max(), yvn.max())) + 1
  trainer = sol.make_trainer("sol", dict(num_classes=k, tau=3, margin=margin, embed_dim=embed_dim, w_d=w_d,
                                         relabel=False, refresh_every=100),
                             dict(optim=dict(name="adam", lr=1e-3, weight_decay=1e-4, schedule="cosine"),
                                  steps=steps, batch_size=64, select_every=steps, log_every=10 ** 6))
  fitted = sol.fit(trainer, x, yn, xv, yvn, seed=0)
  emb, cent = np.asarray(fitted.extra["embeddings"]), np.asarray(fitted.extra["centroids"])
  has = np.bincount(yn, minlength=k) > 0
  clean = np.stack([emb[y == j].mean(0) for j in range(C)])
  clean /= np.linalg.norm(clean, axis=1, keepdims=True)
  pos = np.argmax(cent @ clean.T, 1)                 # nearest clean-rank mean of each noisy-rank centroid
  slope = float(np.polyfit(np.arange(k)[has], pos[has], 1)[0])
  maes = {d: float(np.abs(sol.predict(trainer, fitted, xt, d) - yt).mean()) for d in sol.DECODERS}
  return {"p": p, "ranks": k, "clean_span": geometry.centroid_span(clean)["end_to_end_deg"],
          "noisy_span": geometry.centroid_span(cent[has])["end_to_end_deg"],
          "min_cos_mid": geometry.centroid_span(cent[has])["min_cos_to_middle"], "slope": slope,
          "rho": geometry.reliability(y, p * (C - 1)), "mae": maes}


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--out", default="runs/sol_geometry")
  ap.add_argument("--steps", type=int, default=1600)
  args = ap.parse_args()
  os.makedirs(args.out, exist_ok=True)
  spans = np.arange(10, 301, 10)
  curves = {}
  for m in (0.1, 0.25, 0.5):
    tot = [float(sum(geometry.arc_loss(C, np.radians(t) / (C - 1), tau=3, margin=m)[:2])) for t in spans]
    curves[m] = tot
    print(f"arc C={C} tau=3 m={m}: loss-minimising span {spans[int(np.argmin(tot))]} deg")
  a = geometry.arc_loss(C, np.radians(90) / (C - 1))
  print(f"arc span 90 deg, m=0.25: L_SO={float(a.so):.4f} (similar {float(a.so_similar):.4f}, ordered "
        f"{float(a.so_ordered):.4f}), L_D={float(a.d):+.5f}")
  runs = []
  for kw in (dict(p=0.0), dict(p=0.1), dict(p=0.2), dict(p=0.4), dict(p=0.0, embed_dim=512), dict(p=0.4, embed_dim=512),
             dict(p=0.0, margin=0.1), dict(p=0.0, w_d=0.0)):
    r = trained(steps=args.steps, **kw)
    r.update({k: v for k, v in kw.items() if k != "p"})
    runs.append(r)
    print(f"p={r['p']:.1f} {kw}: ranks {r['ranks']}, clean-rank arc {r['clean_span']:.0f} deg, noisy-rank "
          f"centroids {r['noisy_span']:.0f} deg (min cos to middle {r['min_cos_mid']:.2f}), centroid slope "
          f"{r['slope']:.2f} vs rho {r['rho']:.2f}; test MAE " +
          " ".join(f"{d} {v:.2f}" for d, v in r["mae"].items()), flush=True)
  fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
  for m, tot in curves.items():
    ax[0].plot(spans, tot, label=f"m = {m}")
  ax[0].set_xlabel("arc span of the 30 ranks (deg)")
  ax[0].set_ylabel("L_SO + L_D on the ideal arc")
  ax[0].set_title("clean labels: the margin sets the span")
  ax[0].legend()
  base = [r for r in runs if set(r) == {"p", "ranks", "clean_span", "noisy_span", "min_cos_mid", "slope", "rho", "mae"}]
  ax[1].plot([0, 1], [0, 1], "k:", lw=1, label="slope = ρ")
  ax[1].scatter([r["rho"] for r in base], [r["slope"] for r in base], c="C1", zorder=3)
  for r in base:
    ax[1].annotate(f"p={r['p']:.0%}", (r["rho"], r["slope"]), textcoords="offset points", xytext=(4, -10))
  ax[1].set_xlabel("label reliability ρ = Var(y) / (Var(y) + s²)")
  ax[1].set_ylabel("slope: centroid position vs noisy rank")
  ax[1].set_title("noisy labels: centroids shrink by ≈ ρ")
  ax[1].legend()
  fig.tight_layout()
  fig.savefig(os.path.join(args.out, "geometry.png"), dpi=110)
  print(f"wrote {os.path.join(args.out, 'geometry.png')}")


if __name__ == "__main__":
  main()
