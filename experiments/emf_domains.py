"""EMF's benchmark domains: 2-D toys, GP functions, mnist1d, digits and point clouds as train / eval / floor /
validation sets, and their training batches."""

from typing import Any, Callable, Mapping

import numpy as np

from jaxml import core
from jaxml.data import offline, toys

__all__ = ["load_domain", "make_batches"]


def load_domain(name: str, d: Mapping[str, Any], *, digits_as_images: bool = False) -> dict[str, Any]:
  """train x (+ y), held-out eval set, a disjoint real 'floor' set and a validation set of the eval size, and
  extras. `d`: the sizes (toy_train, toy_eval, gp_train, gp_eval, pc_train, pc_eval, pc_points) and
  `dequantize` (digits); `digits_as_images`: digits as [n, 8, 8, 1] (a U-Net) instead of [n, 64]."""
  if name in toys.TOY2D:
    out = toys.toy_domain(name, num_train=d["toy_train"], num_eval=d["toy_eval"])
    out["val"] = ((toys.toy2d(name, d["toy_eval"], 103) - out["mean"]) / out["std"]).astype(np.float32)
    if name == "checkerboard":   # the 8 black unit cells as boxes, in standardised coordinates
      cells = np.array([(i, j) for i in range(4) for j in range(4) if (i + j) % 2 == 0], np.float64) - 2
      out["boxes"] = ((cells - out["mean"]) / out["std"], 1.0 / out["std"])
    return out
  if name == "gp":
    (tr, cov), (ev, _), (fl, _), (va, _) = (
        toys.gp_functions(n, np.random.default_rng(s))
        for n, s in ((d["gp_train"], 200), (d["gp_eval"], 201), (d["gp_eval"], 202), (d["gp_eval"], 203)))
    return {"train": tr, "eval": ev, "floor": fl, "val": va, "cov": cov}
  if name == "pointclouds":
    (tr, ytr), (ev, _), (fl, _), (va, _) = (
        toys.point_clouds(n, np.random.default_rng(s), num_points=d["pc_points"])
        for n, s in ((d["pc_train"], 500), (d["pc_eval"], 501), (d["pc_eval"], 502), (d["pc_eval"], 503)))
    return {"train": tr, "y_train": ytr, "eval": ev, "floor": fl, "val": va}
  if name == "mnist1d":
    raw = offline.load_mnist1d(seed=0)
    mean, std = float(raw["x_train"].mean()), float(raw["x_train"].std())
    prep = lambda a: ((a - mean) / std).astype(np.float32)
    floor_seed = 300
  else:
    raw = offline.load_digits(seed=0)
    img = digits_as_images
    prep = lambda a: (2 * a - 1).reshape((len(a), 8, 8, 1) if img else (len(a), 64)).astype(np.float32)
    floor_seed = 400
  # Real-vs-real floor and validation reference: two disjoint test-sized sets of training rows (the
  # validation set that picks weightings and variants never touches the test set).
  n_test = len(raw["x_test"])
  perm = np.random.default_rng(floor_seed).permutation(len(raw["x_train"]))
  floor_rows, val_rows = perm[:n_test], perm[n_test:2 * n_test]
  out = {"train": prep(raw["x_train"]), "y_train": raw["y_train"], "eval": prep(raw["x_test"]),
         "y_eval": raw["y_test"], "floor": prep(raw["x_train"][floor_rows]), "val": prep(raw["x_train"][val_rows]),
         "num_classes": 10}
  if name == "digits":
    out["dequantize"] = 1.0 / 16 if d["dequantize"] else 0.0
  return out


def make_batches(data: dict, batch_size: int, seed: int) -> Callable[[int], dict]:
  """`batch_at(step)` of training rows (core.epoch_batches); digits add uniform dequantization noise
  of width data['dequantize'], drawn from (seed, step) so a resumed run sees the same batches."""
  base = core.epoch_batches({"x": data["train"]}, batch_size, seed=seed)
  width = data.get("dequantize", 0.0)
  if not width:
    return base

  def batch_at(step):
    b = base(step)
    noise = core.numpy_rng(seed, 7, int(step)).uniform(-width, width, b["x"].shape)
    return {"x": (b["x"] + noise).astype(np.float32)}

  return batch_at
