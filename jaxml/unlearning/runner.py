"""One entry point for every unlearning run (RU variants, each baseline, Retrain, the original), one signature:
`run_method("ru", {"beta": 0.1}, model, params0, task, seed=0).predict(x) -> (logits, feats)`.

Settings: `api.DEFAULTS` for RU variants, `baselines.SPECS[name].defaults` otherwise (unknown keys are errors).
`cache` (one per model) keeps compiled steps; float settings travel as arrays, so a grid compiles once."""

import time
from typing import Any, Callable, Hashable, Mapping, MutableMapping, NamedTuple, Sequence

import jax
import numpy as np

from jaxml import core
from jaxml.unlearning import api, baselines
from jaxml.unlearning import evaluate as ev
from jaxml.unlearning import model as model_lib
from jaxml.unlearning.defaults import ANCHOR_DEFAULTS  # ru_zs_anchor's own settings (besides api.DEFAULTS)
from jaxml.unlearning.fitting import CHUNK, cached, encode_rows
from jaxml.unlearning.targets import head_probs
from jaxml.unlearning.task import UnlearningTask

__all__ = ["RU_METHODS", "METHODS", "ZERO_SHOT", "ANCHOR_DEFAULTS", "RunOutput", "run_method", "predictor", "tune",
           "check_grid", "check_settings", "choose_settings", "mean_collision", "masked_head_shift",
           "OVERLAP_K", "knn_other_side", "knn_any", "retained_flips", "representation_overlap", "compare"]

# Our extensions: ru_uniform / ru_zs_uniform move the forget target to the nearest point where the frozen head is
# uniform over the retained classes (`targets.uniform_target`); ru_zs_anchor adds the identity anchor, its weight
# chosen from the forget rows alone (`_anchor_search`). ru_val: RU under the caller's validation-chosen settings.
RU_METHODS = ("ru", "ru_zs", "ru_uniform", "ru_zs_uniform", "ru_zs_anchor", "ru_val")
METHODS = RU_METHODS + baselines.BASELINES + baselines.ZERO_SHOT_BASELINES + ("original",)
ZERO_SHOT = ("ru_zs", "ru_zs_uniform", "ru_zs_anchor") + baselines.ZERO_SHOT_BASELINES


class RunOutput(NamedTuple):
  params: Any
  predict: Callable[[np.ndarray], tuple[jax.Array, jax.Array]]   # x -> (logits, features)
  wall_s: float          # the whole run incl. compile and pre-computation
  steady_s: float        # the same without the compiling first steps
  num_steps: int
  info: dict | None = None   # RU runs: the forget target's collision check (`targets.target_info`)


def predictor(model, cache: MutableMapping[Hashable, Any] | None = None) -> Callable:
  """predict(params, x) -> (logits, g(x)) of a plain classifier (jitted once per model)."""
  return cached(cache, ("predict", model), lambda: jax.jit(
      lambda p, x: (model.apply({"params": p}, x), model_lib.encode(model, p, x))))


def _forget_accuracy(predict: Callable, task: UnlearningTask) -> float:
  """% of the forget rows D_f that `predict` assigns their own label (the rows every regime holds)."""
  rows = np.asarray(task.forget_idx)
  if not rows.size:
    return 0.0
  logits = core.batched_apply(lambda x: predict(x)[0], task.x_train[rows], CHUNK)
  return 100.0 * float(np.mean(np.argmax(logits, -1) == np.asarray(task.y_train)[rows]))


def _anchor_search(config: Mapping[str, Any] | None, model, params0: Any, task: UnlearningTask, *, seed: int,
                   cache: MutableMapping[Hashable, Any] | None, train_config: Mapping[str, Any] | None) -> RunOutput:
  """ru_zs_anchor: ru_zs_uniform at each identity weight of `anchor_grid`, largest first, until the forget rows'
  accuracy is <= `anchor_tol` (else weight 0); costs summed over the tries, `info` adds weight, tries, accuracy."""
  cfg = dict(ANCHOR_DEFAULTS) | dict(config or {})
  grid, tol = tuple(float(g) for g in cfg.pop("anchor_grid")), float(cfg.pop("anchor_tol"))
  if float(cfg.get("identity_weight", 0.0)):
    raise ValueError("ru_zs_anchor chooses identity_weight from anchor_grid itself; leave identity_weight at 0")
  if not grid or min(grid) <= 0.0 or tol < 0.0:
    raise ValueError(f"ru_zs_anchor needs a non-empty anchor_grid of positive weights and anchor_tol >= 0; "
                     f"got {grid}, {tol}")
  if not task.forget_classes:
    raise baselines.NotApplicable("ru_zs_anchor's rule (forget accuracy ~ 0) holds for class forgetting only")
  t0 = time.perf_counter()
  steady = steps = 0.0
  for tries, gamma in enumerate(sorted(grid, reverse=True) + [0.0], start=1):
    run = run_method("ru_zs_uniform", cfg | {"identity_weight": gamma}, model, params0, task, seed=seed, cache=cache,
                     train_config=train_config)
    t_check = time.perf_counter()
    fa = _forget_accuracy(run.predict, task)
    steady += run.steady_s + time.perf_counter() - t_check
    steps += run.num_steps
    if fa <= tol:
      break
  info = dict(run.info or {}) | {"anchor_gamma": gamma, "anchor_tries": float(tries), "anchor_forget_acc": fa}
  return run._replace(wall_s=time.perf_counter() - t0, steady_s=steady, num_steps=int(steps), info=info)


def _ru_settings(name: str, config: Mapping[str, Any] | None) -> dict[str, Any]:
  cfg = dict(config or {})
  if "hidden" in cfg:
    cfg["hidden"] = tuple(cfg["hidden"])
  # The name fixes the target, except for ru_val, whose settings (the target among them) are the caller's.
  target = ("uniform" if name in ("ru_uniform", "ru_zs_uniform")
            else cfg.get("target", "mean") if name == "ru_val" else "mean")
  return cfg | {"zero_shot": name in ZERO_SHOT, "target": target}


def run_method(name: str, config: Mapping[str, Any] | None, model, params0: Any, task: UnlearningTask, *,
               seed: int, cache: MutableMapping[Hashable, Any] | None = None,
               train_config: Mapping[str, Any] | None = None) -> RunOutput:
  """Runs method `name` from the trained classifier `params0` ("original" trains on all rows, ignoring params0);
  `train_config`: core.train's loop keys. Raises baselines.NotApplicable when the method does not apply."""
  if name not in METHODS:
    raise ValueError(f"unknown unlearning method {name!r}; expected one of {', '.join(METHODS)}")
  if name == "ru_zs_anchor":
    return _anchor_search(config, model, params0, task, seed=seed, cache=cache, train_config=train_config)
  if name in RU_METHODS:
    cfg = _ru_settings(name, config)
    out = api.unlearn(cfg, model, params0, task.x_train, task.y_train, task.retain_idx, task.forget_idx,
                      num_classes=task.num_classes, forget_classes=task.forget_classes, seed=seed, cache=cache,
                      train_config=train_config)
    s = api._cfg(cfg)
    pred = cached(cache, ("ru_predict", model, s["transform"], tuple(s["hidden"])),
                   lambda: api.make_predict_fn(cfg, model))
    return RunOutput(out.params, lambda x: pred(out.params, x), out.wall_s, out.steady_s, out.fit.num_steps,
                     out.target_info)
  if name == "original":
    out = baselines.train_classifier(baselines.hyperparameters("retrain", config), model, task,
                                     np.arange(task.x_train.shape[0]), seed=seed, cache=cache, name="original",
                                     train_config=train_config)
  else:
    out = baselines.run_baseline(name, model, params0, task, seed=seed, overrides=config, cache=cache,
                                 train_config=train_config)
  plain = baselines.ensemble_predictor(model, cache) if name in baselines.ENSEMBLES else predictor(model, cache)
  return RunOutput(out.params, lambda x: plain(out.params, x), out.wall_s, out.steady_s, out.num_steps)


def tune(name: str, config: Mapping[str, Any] | None, param: str, values: Sequence[Any], model, params0: Any,
         task: UnlearningTask, reference: Mapping[str, float], *, seed: int,
         cache: MutableMapping[Hashable, Any] | None = None, train_config: Mapping[str, Any] | None = None,
         score: Callable[[Mapping[str, float]], float] | None = None,
         eval_chunk: int = ev.EVAL_CHUNK) -> tuple[Any, dict[Any, float]]:
  """The value of `param` among `values` with the smallest Avg. Gap to `reference` (Retrain's metrics on `task`),
  or the smallest `score(metrics)` when given; a diverged run scores inf. Returns (best or None if not
  applicable, scores)."""
  gaps: dict[Any, float] = {}
  for v in values:
    try:
      out = run_method(name, dict(config or {}) | {param: v}, model, params0, task, seed=seed, cache=cache,
                       train_config=train_config)
    except baselines.NotApplicable:
      return None, {}
    except core.NonFiniteLossError:
      gaps[v] = float("inf")        # diverged: never chosen
      continue
    m = ev.unlearning_metrics(ev.collect_outputs(out.predict, task, eval_chunk), task)
    gaps[v] = score(m) if score is not None else ev.avg_gap(m, reference)
  return (min(gaps, key=gaps.get) if gaps else None), gaps


def check_settings(name: str, settings: Mapping[str, Any]) -> None:
  """Raises ValueError on a setting method `name` does not have (before anything runs)."""
  if name not in RU_METHODS:
    baselines.hyperparameters("retrain" if name == "original" else name, settings)
  elif unknown := set(settings) - set(api.DEFAULTS) - set(ANCHOR_DEFAULTS if name == "ru_zs_anchor" else ()):
    raise ValueError(f"unknown {name} settings {sorted(unknown)}")


def check_grid(name: str, param: str, score: str, settings: Mapping[str, Any]) -> None:
  """Raises ValueError when the grid of method `name` varies a setting it lacks or names an unknown score."""
  if param not in settings:
    raise ValueError(f"grid of {name!r} varies {param!r}, which is not one of its settings")
  if score not in ev.SCORES:
    raise ValueError(f"unknown grid score of {name} {score!r}; expected one of {', '.join(ev.SCORES)}")


def choose_settings(grids: Mapping[str, tuple[str, Sequence[Any]]], score_names: Mapping[str, str],
                    settings: Mapping[str, Mapping[str, Any]], model, task: UnlearningTask, *, seed: int,
                    cache: MutableMapping[Hashable, Any] | None = None,
                    train_config: Mapping[str, Any] | None = None, eval_chunk: int = ev.EVAL_CHUNK,
                    orig: RunOutput | None = None) -> tuple[dict[str, dict], dict[str, Any], RunOutput]:
  """On a validation task: the original (trained unless `orig` is given) and Retrain, then `tune` for every method
  of `grids` ({method: (param, values)}) by its score `score_names[m]` (`evaluate.SCORES`). Returns (the chosen
  {method: {param: value}} of the applicable methods, a log of their scores (non-finite -> None), the original)."""
  if orig is None:
    orig = run_method("original", settings["original"], model, None, task, seed=seed, cache=cache,
                      train_config=train_config)
  rt = run_method("retrain", settings["retrain"], model, orig.params, task, seed=seed, cache=cache,
                  train_config=train_config)
  ref, ref_orig = (ev.unlearning_metrics(ev.collect_outputs(r.predict, task, eval_chunk), task) for r in (rt, orig))
  scores = {m: ev.scorer(score_names[m], ref, ref_orig) for m in grids}
  chosen, log = {}, {}
  for name, (param, values) in grids.items():
    best, gaps = tune(name, settings[name], param, values, model, orig.params, task, ref, seed=seed, cache=cache,
                      train_config=train_config, score=scores[name], eval_chunk=eval_chunk)
    if best is not None:
      chosen[name] = {param: best}
      gaps = {str(k): (v if np.isfinite(v) else None) for k, v in gaps.items()}
      log[name] = {"param": param, "chosen": best, "gaps": gaps, "score": score_names[name]}
  return chosen, log, orig


def mean_collision(model, params: Any, task: UnlearningTask,
                   cache: MutableMapping[Hashable, Any] | None = None) -> dict[str, float]:
  """The known failure of the mean target, measured: the frozen head's class and max-probability at
  the mean training representation, and whether that class is a forgotten one (nan when none is)."""
  z_mean = encode_rows(model, params, task.x_train, cache).mean(axis=0)
  probs = head_probs(model, params, z_mean)
  hit = float(int(np.argmax(probs)) in task.forget_classes) if task.forget_classes else float("nan")
  return {"head_mean_argmax": float(np.argmax(probs)), "head_mean_pmax": float(np.max(probs)),
          "mean_is_forget_class": hit}


def masked_head_shift(orig: ev.Outputs, task: UnlearningTask) -> dict[str, float]:
  """The original with the forgotten classes' logits at -inf (a diagnostic): `mask_FA` and the shifts `mask_dRA`,
  `mask_dTA_r` against the unmasked original (points); where `mask_dTA_r` exceeds the bar's tolerance, forgetting
  alone cannot meet the bar's TA_r side. Empty without forgotten classes."""
  mask = task.test_forget_mask
  if not task.forget_classes or mask is None or not mask.any() or not task.forget_idx.size:
    return {}
  y_train = np.asarray(task.y_train)

  def acc(logits, y, hide):
    lg = np.array(logits, np.float64)
    if hide:
      lg[:, list(task.forget_classes)] = -np.inf
    return 100.0 * float(np.mean(np.argmax(lg, -1) == y))

  shift = lambda lg, y: acc(lg, y, True) - acc(lg, y, False)  # noqa: E731
  return {"mask_FA": acc(orig.logits_train[task.forget_idx], y_train[task.forget_idx], True),
          "mask_dRA": shift(orig.logits_train[task.retain_idx], y_train[task.retain_idx]),
          "mask_dTA_r": shift(orig.logits_test[~mask], np.asarray(task.y_test)[~mask])}


# Neighbours per row in `representation_overlap`.
OVERLAP_K = 10


def knn_other_side(z: np.ndarray, side: np.ndarray, k: int, *, chunk: int = 1024) -> np.ndarray:
  """[N] bool: whether a row has, among its k nearest other rows (Euclidean), one with the other `side`."""
  z = np.asarray(z, np.float64)
  sq = (z * z).sum(1)
  hit = np.zeros(z.shape[0], bool)
  for i in range(0, z.shape[0], chunk):
    d = sq[i:i + chunk, None] + sq[None, :] - 2.0 * z[i:i + chunk] @ z.T
    d[np.arange(d.shape[0]), np.arange(i, i + d.shape[0])] = np.inf       # not its own neighbour
    nn = np.argpartition(d, k - 1, axis=1)[:, :k]
    hit[i:i + chunk] = (side[nn] != side[i:i + chunk, None]).any(axis=1)
  return hit


def knn_any(query: np.ndarray, ref: np.ndarray, ref_mask: np.ndarray, k: int, *, chunk: int = 1024) -> np.ndarray:
  """[Q] bool: whether any of a query row's k nearest `ref` rows (Euclidean) has `ref_mask` set."""
  q, ref = np.asarray(query, np.float64), np.asarray(ref, np.float64)
  sq = (ref * ref).sum(1)
  out = np.zeros(q.shape[0], bool)
  for i in range(0, q.shape[0], chunk):
    d = sq[None, :] - 2.0 * q[i:i + chunk] @ ref.T                           # + |q|^2, the same per row
    out[i:i + chunk] = ref_mask[np.argpartition(d, k - 1, axis=1)[:, :k]].any(axis=1)
  return out


def retained_flips(orig: ev.Outputs, out: ev.Outputs, task: UnlearningTask, mean_class: float, *,
                   k: int = OVERLAP_K) -> dict[str, float]:
  """Where a method loses retained-class test accuracy (class forgetting): `flip_r` (% right before, wrong
  now; `fix_r` the reverse), of the flips the % now at the head's mean class (`flip_to_mean_cls`) and with a
  forget row among their k nearest training rows (`flip_near_forget`; base rate `near_forget_r`)."""
  mask = task.test_forget_mask
  if mask is None or not mask.any() or not task.forget_idx.size:
    return {}
  r = ~mask
  y = np.asarray(task.y_test)[r]
  p0, p1 = np.argmax(orig.logits_test[r], -1), np.argmax(out.logits_test[r], -1)
  flip, fix = (p0 == y) & (p1 != y), (p0 != y) & (p1 == y)
  is_f = np.isin(np.arange(orig.feats_train.shape[0]), task.forget_idx)
  near = knn_any(orig.feats_test[r], orig.feats_train, is_f, k)
  pct = lambda a, b: 100.0 * float(a.sum()) / float(b.sum()) if b.any() else float("nan")  # noqa: E731
  return {"flip_r": pct(flip, r[r]), "fix_r": pct(fix, r[r]), "flip_to_mean_cls": pct(flip & (p1 == mean_class), flip),
          "flip_near_forget": pct(flip & near, flip), "near_forget_r": pct(near, r[r])}


def representation_overlap(model, params: Any, task: UnlearningTask, cache: MutableMapping[Hashable, Any] | None = None,
                           *, k: int = OVERLAP_K, chunk: int = 1024) -> dict[str, float]:
  """How entangled D_f is with D_r in the original z: % of retained rows with a forget row among their k nearest
  training rows (self excluded), and % of forget rows with a retained row among theirs."""
  if not task.forget_idx.size or not task.retain_idx.size:
    return {"retain_knn_forget": float("nan"), "forget_knn_retain": float("nan")}
  z = encode_rows(model, params, task.x_train, cache)
  is_f = np.isin(np.arange(z.shape[0]), task.forget_idx)
  hit = knn_other_side(z, is_f, k, chunk=chunk)
  return {"retain_knn_forget": 100.0 * float(hit[task.retain_idx].mean()),
          "forget_knn_retain": 100.0 * float(hit[task.forget_idx].mean())}


def compare(methods: Sequence[str], settings: Mapping[str, Mapping[str, Any]], model, orig: RunOutput,
            task: UnlearningTask, *, seed: int, representation_checks: bool = True,
            cache: MutableMapping[Hashable, Any] | None = None, train_config: Mapping[str, Any] | None = None,
            log: Callable[[str], None] = lambda s: None,
            eval_chunk: int = ev.EVAL_CHUNK) -> list[tuple[str, dict[str, float], dict[str, float]]]:
  """Retrain and every method of `methods` from the original run `orig` on one forget split: (method, metrics,
  cost) for "original", "retrain" and each method (metrics: `unlearning_metrics`, FA, Avg. Gap, divergences and
  the diagnostics above; cost: seconds, steps, ratios to Retrain). A diverged method gets {"diverged": 1.0}."""
  out: list[tuple[str, dict[str, float], dict[str, float]]] = []
  rt = run_method("retrain", settings["retrain"], model, orig.params, task, seed=seed, cache=cache,
                  train_config=train_config)
  out_orig, out_rt = (ev.collect_outputs(r.predict, task, eval_chunk) for r in (orig, rt))
  ref = ev.unlearning_metrics(out_rt, task)
  coll = mean_collision(model, orig.params, task, cache) | representation_overlap(model, orig.params, task, cache)
  coll |= masked_head_shift(out_orig, task)
  if task.forget_classes:
    coll["forget_class"] = float(task.forget_classes[0])

  def record(method, outputs, run):
    m = ev.unlearning_metrics(outputs, task)
    m |= {"FA": 100.0 - m["UA"], "avg_gap": ev.avg_gap(m, ref)} | coll
    m |= {f"ru_{k}": v for k, v in (run.info or {}).items()}
    m |= ev.divergences(outputs, out_rt, task) | retained_flips(out_orig, outputs, task, coll["head_mean_argmax"])
    if representation_checks:
      m |= ev.representation_checks(outputs, out_orig, task, seed=seed)
    cost = {"wall_s": run.wall_s, "steady_s": run.steady_s, "steps": run.num_steps,
            "rte": run.steady_s / rt.steady_s, "rte_wall": run.wall_s / rt.wall_s}
    out.append((method, m, cost))
    return m, cost

  record("original", out_orig, orig)
  record("retrain", out_rt, rt)
  log(f"|D_f|={task.forget_idx.size} retrain {rt.steady_s:.2f}s (wall {rt.wall_s:.2f}s) UA*={ref['UA']:.1f} "
      f"RA*={ref['RA']:.1f} TA*={ref['TA']:.1f} MIA*={ref['MIA']:.1f}")
  for method in methods:
    try:
      run = run_method(method, settings[method], model, orig.params, task, seed=seed, cache=cache,
                       train_config=train_config)
    except baselines.NotApplicable as e:
      log(f"{method}: not applicable ({e})")
      continue
    except core.NonFiniteLossError as e:
      log(f"{method}: DIVERGED ({e})")
      out.append((method, {"diverged": 1.0}, {}))
      continue
    m, cost = record(method, ev.collect_outputs(run.predict, task, eval_chunk), run)
    log(f"{method:16s} gap {m['avg_gap']:6.2f} UA {m['UA']:5.1f} RA {m['RA']:5.1f} TA {m['TA']:5.1f} "
        f"MIA {m['MIA']:5.1f} | RTE {100 * cost['rte']:6.2f}% steady, {100 * cost['rte_wall']:6.1f}% wall "
        f"({run.num_steps} steps)")
  return out
