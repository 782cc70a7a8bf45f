"""Cost of X-EviProbe and its guarded extension (fit + score) relative to one GNN forward pass.

  python -m benchmarks.eviprobe_cost                       # Cora-ML, GCN, dense features
  python -m benchmarks.eviprobe_cost --dataset=citeseer --features=sparse --repeats=30

Medians of `--repeats` warm jitted calls on a freshly initialised backbone. Prints
`fit_score_over_forward=<x>` and `extension_extra_over_forward=<x>` (the target for each is <= 2)."""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.timing import repeat_time
from configs import eviprobe_graphs
from jaxml.data import graph_shift, offline
from jaxml.eviprobe import backbone as bb, baselines as bl, probe
from jaxml.eviprobe.api import probe_config


def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--dataset", default="cora_ml", choices=("cora_ml", "citeseer", "cora"))
  ap.add_argument("--features", default="dense", choices=("dense", "sparse"))
  ap.add_argument("--repeats", type=int, default=20)
  args = ap.parse_args()
  g = offline.load_graph(args.dataset, fmt="npz" if args.dataset == "cora_ml" else "planetoid")
  masks = graph_shift.gpn_split(g["labels"], 0)
  feats = bb.sparse_features(g["features"]) if args.features == "sparse" else {"x": g["features"]}
  batch = jax.device_put(dict(feats, edges=g["edges"], labels=g["labels"]))
  model = bb.make_backbone({"name": "gcn", "hidden": 64, "dropout": 0.8}, g["features"].shape[1], int(g["num_classes"]))
  params = bb.make_backbone_method(model).init(jax.random.key(0), batch)
  labels = jnp.asarray(g["labels"])
  tr, va = jnp.asarray(np.flatnonzero(masks["train_mask"])), jnp.asarray(np.flatnonzero(masks["val_mask"]))
  edges = jnp.asarray(g["edges"])
  config = eviprobe_graphs.get_config("small")
  cfg = probe_config(dict(config.eviprobe))   # the experiment's default probe
  ext = probe_config(dict(config.eviprobe) | dict(config.extension))
  out = jax.block_until_ready(bb.forward(model, params, batch))
  fit = jax.jit(probe.fit_probe, static_argnums=6)
  score = jax.jit(probe.score, static_argnums=5)

  t_fwd = repeat_time(lambda: bb.forward(model, params, batch), args.repeats)
  t_fit = repeat_time(lambda: fit(out["q"], out["z"], out["logits"], labels, tr, va, cfg), args.repeats)
  state = fit(out["q"], out["z"], out["logits"], labels, tr, va, cfg)
  t_score = repeat_time(lambda: score(state, out["q"], out["z"], out["logits"], edges, cfg), args.repeats)
  t_ext = repeat_time(lambda: score(state, out["q"], out["z"], out["logits"], edges, ext), args.repeats)
  gnnsafe = jax.jit(bl.gnnsafe)
  t_gnnsafe = repeat_time(lambda: gnnsafe(out["logits"], edges), args.repeats)
  t_mc = repeat_time(lambda: bb.mc_logits(model, params, batch, jax.random.key(1), 10), max(3, args.repeats // 4))
  n, f = g["features"].shape
  print(f"probe={cfg}\nextension={ext}")
  print(f"dataset={args.dataset} nodes={n} features={f} edges={g['edges'].shape[1]} feature_format={args.features} "
        f"devices={jax.device_count()} platform={jax.devices()[0].platform}")
  print(f"forward_ms={1e3 * t_fwd:.2f} probe_fit_ms={1e3 * t_fit:.2f} probe_score_ms={1e3 * t_score:.2f} "
        f"extension_score_ms={1e3 * t_ext:.2f} gnnsafe_ms={1e3 * t_gnnsafe:.2f} mc_dropout10_ms={1e3 * t_mc:.2f}")
  print(f"fit_over_forward={t_fit / t_fwd:.3f} score_over_forward={t_score / t_fwd:.3f} "
        f"mc_dropout10_over_forward={t_mc / t_fwd:.2f}")
  print(f"fit_score_over_forward={(t_fit + t_score) / t_fwd:.3f} "
        f"extension_fit_score_over_forward={(t_fit + t_ext) / t_fwd:.3f} "
        f"extension_extra_over_forward={(t_ext - t_score) / t_fwd:.3f}")


if __name__ == "__main__":
  main()
