"""Seeded synthetic spurious-preference benchmark (numpy only; causal_reward spec section 3.1).

Prompt u ~ N(0, I_4), causal latents c ~ N(0, I_8), nuisance n ~ N(0, I_8), one latent per cue. Gold
reward r* = w*^T c + 0.5 c^T B u; observation h = G([u, c, render(cues), n]) + 0.05 eps with G a fixed
random tanh network ("entangled"; "linear" is the easy variant); eps is stored, so a do-intervention
re-renders h with only its target changed. Cues are user-defined `Cue`s (default `length_cue()`,
`sycophancy_cue()`), e.g. `make_world(0, cues=DEFAULT_CUES + (Cue("emoji", sample=..., hack=...),))`.

Labels ~ Bernoulli(sigmoid(2 (r*_a - r*_b))), then stratified so that, per cue, the chosen response has
the larger cue in a fraction rho of the differing pairs. Test sets: T-id (as train), T-gold (labels
1[r*_w > r*_l]), T-anti (gold labels, rho = 0.2)."""

import itertools
import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

__all__ = ["Cue", "length_cue", "sycophancy_cue", "shift_value", "set_value", "DEFAULT_CUES", "World",
           "make_world", "sample_responses", "render", "gold_reward", "cues", "cue_names", "intervene",
           "make_pairs", "make_benchmark", "sample_policy_pool", "DIM_U", "DIM_C", "DIM_N"]

DIM_U, DIM_C, DIM_N = 4, 8, 8


def shift_value(latent: np.ndarray, value: float) -> np.ndarray:
  """do(cue := cue + value): the intervention of a continuous cue."""
  return latent + value


def set_value(latent: np.ndarray, value: float) -> np.ndarray:
  """do(cue := value): the intervention of a binary cue."""
  return np.full_like(latent, float(value))


class Cue(NamedTuple):
  """A spurious attribute of a response, as numpy functions: sample(rng, n) -> latent [n]; render(latent)
  -> renderer inputs (default 2 x); observe(latent) -> the proxy t a cue-aware model sees; intervene(latent,
  value) (default a shift); hack(rng, n) -> the latent of the base policy's hack component."""

  name: str
  sample: Callable[[np.random.Generator, int], np.ndarray]
  render: Callable[[np.ndarray], np.ndarray] = lambda x: 2.0 * x
  observe: Callable[[np.ndarray], np.ndarray] = lambda x: x
  intervene: Callable[[np.ndarray, float], np.ndarray] = shift_value
  hack: Callable[[np.random.Generator, int], np.ndarray] | None = None


def length_cue(scale: float = 2.0, hack_mean: float = 1.5) -> Cue:
  """Standardised log length l ~ N(0, 1); hacks are verbose: l = hack_mean + 0.5 |xi|."""
  return Cue("length", sample=lambda rng, n: rng.normal(size=n), render=lambda x: scale * x,
             intervene=shift_value, hack=lambda rng, n: hack_mean + 0.5 * np.abs(rng.normal(size=n)))


def sycophancy_cue(p: float = 0.3, scale: float = 2.0) -> Cue:
  """Sycophantic opener s ~ Bernoulli(p); hacks are always sycophantic."""
  return Cue("sycophancy", sample=lambda rng, n: (rng.random(n) < p).astype(np.float64),
             render=lambda x: scale * x, intervene=set_value, hack=lambda rng, n: np.ones(n))


DEFAULT_CUES = (length_cue(), sycophancy_cue())
_BASE_KEYS = ("u", "c", "nz", "eps")


class World(NamedTuple):
  """Fixed random parameters of one synthetic world, and its cues."""

  w_star: np.ndarray   # [DIM_C]
  b_mat: np.ndarray    # [DIM_C, DIM_U]
  w1: np.ndarray       # [DIM_IN, H]
  b1: np.ndarray       # [H]
  w2: np.ndarray       # [H, D]
  linear: bool
  noise: float
  cues: tuple = DEFAULT_CUES


def _render_cue(cue: Cue, latent: np.ndarray) -> np.ndarray:
  return np.asarray(cue.render(np.asarray(latent, np.float64)), np.float64).reshape(len(latent), -1)


def cue_names(world: World) -> tuple[str, ...]:
  return tuple(c.name for c in world.cues)


def make_world(seed: int, *, dim: int = 64, hidden: int = 128, renderer: str = "tanh",
               noise: float = 0.05, cues: Sequence[Cue] = DEFAULT_CUES) -> World:
  """Draws w*, B and the renderer G from `seed` (renderer 'tanh' or 'linear')."""
  if renderer not in ("tanh", "linear"):
    raise ValueError(f"unknown renderer {renderer!r}; expected 'tanh' or 'linear'")
  cues = tuple(cues)
  names = [c.name for c in cues]
  if len(set(names)) != len(names) or set(names) & set(_BASE_KEYS):
    raise ValueError(f"cue names must be unique and differ from {_BASE_KEYS}: {names}")
  probe = np.random.default_rng(0)
  widths = [_render_cue(c, c.sample(probe, 3)).shape[1] for c in cues]
  rng = np.random.default_rng([seed, 1])
  d_in = DIM_U + DIM_C + sum(widths) + DIM_N
  w_star = rng.normal(size=DIM_C) / np.sqrt(DIM_C)
  b_mat = rng.normal(size=(DIM_C, DIM_U)) / np.sqrt(DIM_C * DIM_U)
  w1 = rng.normal(size=(d_in, hidden)) / np.sqrt(d_in)
  b1 = 0.1 * rng.normal(size=hidden)
  w2 = rng.normal(size=(hidden, dim)) / np.sqrt(hidden)
  return World(w_star, b_mat, w1, b1, w2, renderer == "linear", float(noise), cues)


def sample_responses(world: World, rng: np.random.Generator, n: int, u: np.ndarray | None = None
                     ) -> dict[str, np.ndarray]:
  """n responses (optionally for given prompt contexts u [n, 4]): latents u, c, one per cue
  (under the cue's name), nz and the observation noise eps."""
  out = {"u": rng.normal(size=(n, DIM_U)) if u is None else np.asarray(u, np.float64),
         "c": rng.normal(size=(n, DIM_C))}
  out |= {cue.name: np.asarray(cue.sample(rng, n), np.float64) for cue in world.cues}
  out["nz"] = rng.normal(size=(n, DIM_N))
  out["eps"] = rng.normal(size=(n, world.w2.shape[1]))
  return out


def render(world: World, resp: dict[str, np.ndarray]) -> np.ndarray:
  """h = G([u, c, render_k(cue_k)..., n]) + noise eps, float32 [n, D]."""
  v = np.concatenate([resp["u"], resp["c"]] + [_render_cue(c, resp[c.name]) for c in world.cues]
                     + [resp["nz"]], axis=1)
  pre = v @ world.w1 + world.b1
  hid = pre if world.linear else np.tanh(pre)
  return (hid @ world.w2 + world.noise * resp["eps"]).astype(np.float32)


def gold_reward(world: World, resp: dict[str, np.ndarray]) -> np.ndarray:
  """r* = w*^T c + 0.5 c^T B u, float64 [n]; depends on neither the cues nor n."""
  return resp["c"] @ world.w_star + 0.5 * np.einsum("ni,ij,nj->n", resp["c"], world.b_mat, resp["u"])


def cues(world: World, resp: dict[str, np.ndarray]) -> np.ndarray:
  """Observable cue proxies t = [observe_k(cue_k)]_k, float32 [n, K]."""
  return np.stack([np.asarray(c.observe(resp[c.name]), np.float64) for c in world.cues], axis=1).astype(np.float32)


def intervene(world: World, resp: dict[str, np.ndarray], **values: float) -> dict[str, np.ndarray]:
  """do(cue := cue.intervene(cue, value)) for each named cue: a copy with only those latents changed."""
  by_name = {c.name: c for c in world.cues}
  out = dict(resp)
  for name, value in values.items():
    if name not in by_name:
      raise ValueError(f"unknown cue {name!r}; this world has {tuple(by_name)}")
    out[name] = np.asarray(by_name[name].intervene(resp[name], value), np.float64)
  return out


def _stratified_counts(n: int, p_tie: Sequence[float], rho: float) -> dict[tuple[int, ...], int]:
  """Cell targets: per cue 1 = chosen larger, 0 = chosen smaller, 2 = equal (ties keep their rate)."""
  probs = {cell: math.prod(tie if side == 2 else (1.0 - tie) * (rho if side else 1.0 - rho)
                           for side, tie in zip(cell, p_tie))
           for cell in itertools.product((0, 1, 2), repeat=len(p_tie))}
  keys = [cell for cell, p in probs.items() if p > 0]    # product order is sorted order
  raw = np.array([n * probs[k] for k in keys])
  counts = np.floor(raw).astype(int)
  for i in np.argsort(-(raw - counts))[: n - counts.sum()]:  # largest remainder
    counts[i] += 1
  return dict(zip(keys, counts.tolist()))


def _candidate_pairs(world, rng, m, labels, annotator):
  u = rng.normal(size=(m, DIM_U))
  a, b = sample_responses(world, rng, m, u), sample_responses(world, rng, m, u)
  ra, rb = gold_reward(world, a), gold_reward(world, b)
  if labels == "gold":
    a_wins = ra > rb
  elif labels == "noisy":
    logit = 2.0 * (ra - rb)
    if annotator is not None:
      logit = logit + (cues(world, a) - cues(world, b)).astype(np.float64) @ np.asarray(annotator, np.float64)
    a_wins = rng.random(m) < 1.0 / (1.0 + np.exp(-logit))
  else:
    raise ValueError(f"unknown labels {labels!r}; expected 'noisy' or 'gold'")
  w = {k: np.where(a_wins.reshape((-1,) + (1,) * (a[k].ndim - 1)), a[k], b[k]) for k in a}
  l = {k: np.where(a_wins.reshape((-1,) + (1,) * (a[k].ndim - 1)), b[k], a[k]) for k in a}
  return w, l


def make_pairs(world: World, seed: int | np.random.Generator, n: int, *, rho: float | None = None,
               labels: str = "noisy", annotator: Sequence[float] | None = None,
               with_latents: bool = False) -> dict[str, np.ndarray]:
  """n labelled pairs; rho=None: no selection. Returns h_w, h_l [n, D] float32, t_w, t_l [n, K], r_w, r_l
  [n] gold rewards (and "resp_w", "resp_l" with `with_latents`); `annotator` [K]: per-cue label-logit bias."""
  rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng([seed, 2])
  if rho is None:
    w, l = _candidate_pairs(world, rng, n, labels, annotator)
  else:
    parts, need = [], None
    while True:
      parts.append(_candidate_pairs(world, rng, 4 * n + 64, labels, annotator))
      w_all, l_all = ({k: np.concatenate([p[j][k] for p in parts]) for k in parts[0][j]} for j in (0, 1))
      tw, tl = cues(world, w_all), cues(world, l_all)
      side = np.where(tw == tl, 2, (tw > tl).astype(int))          # [m, K]
      if need is None:  # the tie rates are properties of the pool, kept as they are
        need = _stratified_counts(n, [float(np.mean(side[:, k] == 2)) for k in range(side.shape[1])], rho)
      codes = side @ (3 ** np.arange(side.shape[1]))
      cells = {key: np.flatnonzero(codes == int(np.dot(key, 3 ** np.arange(len(key))))) for key in need}
      if all(len(cells[key]) >= cnt for key, cnt in need.items()):
        break
    idx = np.concatenate([cells[key][:cnt] for key, cnt in sorted(need.items())])
    idx = idx[rng.permutation(len(idx))]
    w, l = ({k: v[idx] for k, v in d.items()} for d in (w_all, l_all))
  out = {"h_w": render(world, w), "h_l": render(world, l), "t_w": cues(world, w), "t_l": cues(world, l),
         "r_w": gold_reward(world, w), "r_l": gold_reward(world, l)}
  if with_latents:
    out["resp_w"], out["resp_l"] = w, l
  return out


def make_benchmark(seed: int, rho: float, *, n_train: int = 20000, n_val: int = 2000, n_test: int = 5000,
                   dim: int = 64, renderer: str = "tanh", annotator: Sequence[float] | None = None,
                   anti_rho: float = 0.2, cues: Sequence[Cue] = DEFAULT_CUES) -> dict:
  """World + splits: train / val / test_id (noisy labels, selection rho, or annotator bias with
  no selection when `annotator` is given), oracle_train (noisy labels, no selection),
  test_gold (gold labels, no selection), test_anti (gold labels, selection anti_rho)."""
  world = make_world(seed, dim=dim, renderer=renderer, cues=cues)
  sel = None if annotator is not None else rho
  return {"world": world,
          "train": make_pairs(world, seed * 1000 + 1, n_train, rho=sel, annotator=annotator),
          "val": make_pairs(world, seed * 1000 + 2, n_val, rho=sel, annotator=annotator),
          "test_id": make_pairs(world, seed * 1000 + 3, n_test, rho=sel, annotator=annotator),
          "oracle_train": make_pairs(world, seed * 1000 + 4, n_train),
          "test_gold": make_pairs(world, seed * 1000 + 5, n_test, labels="gold"),
          "test_anti": make_pairs(world, seed * 1000 + 6, n_test, rho=anti_rho, labels="gold")}


def sample_policy_pool(world: World, seed: int, num_prompts: int, num_candidates: int, *,
                       hack_frac: float = 0.1, hack_shift: float = 1.5) -> dict[str, np.ndarray]:
  """Base-policy candidates for best-of-N, [P, M] per prompt; a fraction `hack_frac` are hacks (every cue
  at its `hack` value, c <- c - hack_shift * w*/||w*||). Returns h [P, M, D], gold, hack and each cue's latent."""
  rng = np.random.default_rng([seed, 3])
  p, m = num_prompts, num_candidates
  u = np.repeat(rng.normal(size=(p, DIM_U)), m, axis=0)
  resp = sample_responses(world, rng, p * m, u)
  hack = rng.random(p * m) < hack_frac
  for cue in world.cues:
    value = cue.hack(rng, p * m) if cue.hack is not None else cue.sample(rng, p * m)
    resp[cue.name] = np.where(hack, np.asarray(value, np.float64), resp[cue.name])
  resp["c"] = resp["c"] - hack_shift * hack[:, None] * (world.w_star / np.linalg.norm(world.w_star))
  out = {"h": render(world, resp).reshape(p, m, -1), "gold": gold_reward(world, resp).reshape(p, m),
         "hack": hack.reshape(p, m)}
  return out | {cue.name: resp[cue.name].reshape(p, m) for cue in world.cues}
