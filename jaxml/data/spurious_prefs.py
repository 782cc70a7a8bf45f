"""Seeded synthetic spurious-preference benchmark (numpy only; causal_reward spec section 3.1).

World: prompt context u ~ N(0, I_4); response latents c ~ N(0, I_8) (causal), length
l ~ N(0, 1) (standardised log-length), sycophancy s ~ Bernoulli(0.3), nuisance style n ~ N(0, I_8).
Gold reward r*(x, y) = w*^T c + 0.5 c^T B u (independent of l, s, n).
Observation h = G([u, c, 2 l, 2 s, n]) + 0.05 eps, G a fixed random 2-layer tanh network to R^D
("entangled"; `renderer="linear"` is the easy variant). The noise eps is stored with each response,
so a do-intervention re-renders h with only the targeted input changed.

Training labels: candidate pairs for one prompt, label ~ Bernoulli(sigmoid(2 (r*_a - r*_b)))
[+ annotator bias], then stratified subsampling so that in a fraction rho of kept pairs the chosen
response is the longer one and, independently, the sycophantic one when the two differ.
Test sets: T-id (same as train), T-gold (labels 1[r*_w > r*_l], no selection), T-anti (gold labels,
selected with rho = 0.2, i.e. chosen is shorter / non-sycophantic in 80% of pairs).
Cues t = [l, s] are what a cue-aware model may observe.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["World", "make_world", "sample_responses", "render", "gold_reward", "cues", "intervene",
           "make_pairs", "make_benchmark", "sample_policy_pool", "DIM_U", "DIM_C", "DIM_N", "P_SYC"]

DIM_U, DIM_C, DIM_N = 4, 8, 8
P_SYC = 0.3
_RESP_KEYS = ("u", "c", "ell", "s", "nz", "eps")


class World(NamedTuple):
  """Fixed random parameters of one synthetic world."""

  w_star: np.ndarray   # [DIM_C]
  b_mat: np.ndarray    # [DIM_C, DIM_U]
  w1: np.ndarray       # [DIM_IN, H]
  b1: np.ndarray       # [H]
  w2: np.ndarray       # [H, D]
  linear: bool
  noise: float
  spur_scale: float


def make_world(seed: int, *, dim: int = 64, hidden: int = 128, renderer: str = "tanh",
               noise: float = 0.05, spur_scale: float = 2.0) -> World:
  """Draws w*, B and the renderer G from `seed` (renderer 'tanh' or 'linear')."""
  if renderer not in ("tanh", "linear"):
    raise ValueError(f"unknown renderer {renderer!r}; expected 'tanh' or 'linear'")
  rng = np.random.default_rng([seed, 1])
  d_in = DIM_U + DIM_C + 2 + DIM_N
  w_star = rng.normal(size=DIM_C) / np.sqrt(DIM_C)
  b_mat = rng.normal(size=(DIM_C, DIM_U)) / np.sqrt(DIM_C * DIM_U)
  w1 = rng.normal(size=(d_in, hidden)) / np.sqrt(d_in)
  b1 = 0.1 * rng.normal(size=hidden)
  w2 = rng.normal(size=(hidden, dim)) / np.sqrt(hidden)
  return World(w_star, b_mat, w1, b1, w2, renderer == "linear", float(noise), float(spur_scale))


def sample_responses(world: World, rng: np.random.Generator, n: int, u: np.ndarray | None = None
                     ) -> dict[str, np.ndarray]:
  """n responses (optionally for given prompt contexts u [n, 4]); dict of latents and noise."""
  dim = world.w2.shape[1]
  return {
      "u": rng.normal(size=(n, DIM_U)) if u is None else np.asarray(u, np.float64),
      "c": rng.normal(size=(n, DIM_C)),
      "ell": rng.normal(size=n),
      "s": (rng.random(n) < P_SYC).astype(np.float64),
      "nz": rng.normal(size=(n, DIM_N)),
      "eps": rng.normal(size=(n, dim)),
  }


def render(world: World, resp: dict[str, np.ndarray]) -> np.ndarray:
  """h = G([u, c, k l, k s, n]) + noise eps, float32 [n, D]."""
  k = world.spur_scale
  v = np.concatenate([resp["u"], resp["c"], k * resp["ell"][:, None], k * resp["s"][:, None], resp["nz"]], axis=1)
  pre = v @ world.w1 + world.b1
  hid = pre if world.linear else np.tanh(pre)
  return (hid @ world.w2 + world.noise * resp["eps"]).astype(np.float32)


def gold_reward(world: World, resp: dict[str, np.ndarray]) -> np.ndarray:
  """r* = w*^T c + 0.5 c^T B u, float64 [n]; depends on neither l, s nor n."""
  c, u = resp["c"], resp["u"]
  return c @ world.w_star + 0.5 * np.einsum("ni,ij,nj->n", c, world.b_mat, u)


def cues(resp: dict[str, np.ndarray]) -> np.ndarray:
  """Observable cue proxies t = [l, s], float32 [n, 2]."""
  return np.stack([resp["ell"], resp["s"]], axis=1).astype(np.float32)


def intervene(resp: dict[str, np.ndarray], *, ell_shift: float | None = None, s: float | None = None
              ) -> dict[str, np.ndarray]:
  """do(l := l + ell_shift) and/or do(s := s): a copy with only those latents changed."""
  out = {k: v for k, v in resp.items()}
  if ell_shift is not None:
    out["ell"] = resp["ell"] + ell_shift
  if s is not None:
    out["s"] = np.full_like(resp["s"], float(s))
  return out


def _take(resp: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
  return {k: v[idx] for k, v in resp.items()}


def _stratified_counts(n: int, p_tie: float, rho: float) -> dict[tuple[int, int], int]:
  """Cell targets for (L = chosen longer, S = chosen sycophantic / 2 when s equal)."""
  probs = {}
  for L in (0, 1):
    pl = rho if L else 1.0 - rho
    probs[(L, 2)] = pl * p_tie
    for S in (0, 1):
      probs[(L, S)] = pl * (1.0 - p_tie) * (rho if S else 1.0 - rho)
  keys = sorted(probs)
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
      beta_l, beta_s = annotator
      logit = logit + beta_l * (a["ell"] - b["ell"]) + beta_s * (a["s"] - b["s"])
    a_wins = rng.random(m) < 1.0 / (1.0 + np.exp(-logit))
  else:
    raise ValueError(f"unknown labels {labels!r}; expected 'noisy' or 'gold'")
  w = {k: np.where(a_wins.reshape((-1,) + (1,) * (a[k].ndim - 1)), a[k], b[k]) for k in a}
  l = {k: np.where(a_wins.reshape((-1,) + (1,) * (a[k].ndim - 1)), b[k], a[k]) for k in a}
  return w, l


def make_pairs(world: World, seed: int | np.random.Generator, n: int, *, rho: float | None = None,
               labels: str = "noisy", annotator: tuple[float, float] | None = None,
               with_latents: bool = False) -> dict[str, np.ndarray]:
  """n labelled pairs. rho=None: no selection; else stratified selection (see module docstring).

  Returns h_w, h_l [n, D] float32, t_w, t_l [n, 2] float32, r_w, r_l [n] gold rewards, and with
  `with_latents` the response dicts under "resp_w", "resp_l".
  """
  rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng([seed, 2])
  if rho is None:
    w, l = _candidate_pairs(world, rng, n, labels, annotator)
  else:
    parts_w, parts_l, cells = [], [], None
    m = 4 * n + 64
    need = None
    while True:
      cw, cl = _candidate_pairs(world, rng, m, labels, annotator)
      parts_w.append(cw)
      parts_l.append(cl)
      w_all = {k: np.concatenate([p[k] for p in parts_w]) for k in cw}
      l_all = {k: np.concatenate([p[k] for p in parts_l]) for k in cl}
      L = (w_all["ell"] > l_all["ell"]).astype(int)
      S = np.where(w_all["s"] == l_all["s"], 2, (w_all["s"] > l_all["s"]).astype(int))
      if need is None:  # the tie rate of s is a property of the pool, kept as is
        need = _stratified_counts(n, float(np.mean(S == 2)), rho)
      cells = {key: np.flatnonzero((L == key[0]) & (S == key[1])) for key in need}
      if all(len(cells[key]) >= cnt for key, cnt in need.items()):
        break
    idx = np.concatenate([cells[key][:cnt] for key, cnt in sorted(need.items())])
    idx = idx[rng.permutation(len(idx))]
    w, l = _take(w_all, idx), _take(l_all, idx)
  out = {"h_w": render(world, w), "h_l": render(world, l), "t_w": cues(w), "t_l": cues(l),
         "r_w": gold_reward(world, w), "r_l": gold_reward(world, l)}
  if with_latents:
    out["resp_w"], out["resp_l"] = w, l
  return out


def make_benchmark(seed: int, rho: float, *, n_train: int = 20000, n_val: int = 2000, n_test: int = 5000,
                   dim: int = 64, renderer: str = "tanh", annotator: tuple[float, float] | None = None,
                   anti_rho: float = 0.2) -> dict:
  """World + splits: train / val / test_id (noisy labels, selection rho, or annotator bias with
  no selection when `annotator` is given), oracle_train (noisy labels, no selection),
  test_gold (gold labels, no selection), test_anti (gold labels, selection anti_rho)."""
  world = make_world(seed, dim=dim, renderer=renderer)
  sel = None if annotator is not None else rho
  return {
      "world": world,
      "train": make_pairs(world, seed * 1000 + 1, n_train, rho=sel, annotator=annotator),
      "val": make_pairs(world, seed * 1000 + 2, n_val, rho=sel, annotator=annotator),
      "test_id": make_pairs(world, seed * 1000 + 3, n_test, rho=sel, annotator=annotator),
      "oracle_train": make_pairs(world, seed * 1000 + 4, n_train),
      "test_gold": make_pairs(world, seed * 1000 + 5, n_test, labels="gold"),
      "test_anti": make_pairs(world, seed * 1000 + 6, n_test, rho=anti_rho, labels="gold"),
  }


def sample_policy_pool(world: World, seed: int, num_prompts: int, num_candidates: int, *,
                       hack_frac: float = 0.1, hack_shift: float = 1.5) -> dict[str, np.ndarray]:
  """Base-policy candidates for best-of-N: [P, M] responses per prompt.

  A fraction `hack_frac` are verbose, sycophantic and worse: l = 1.5 + 0.5 |xi|, s = 1,
  c <- c - hack_shift * w*/||w*||. Returns h [P, M, D] float32, gold [P, M], ell, s, hack [P, M].
  """
  rng = np.random.default_rng([seed, 3])
  p, m = num_prompts, num_candidates
  u = np.repeat(rng.normal(size=(p, DIM_U)), m, axis=0)
  resp = sample_responses(world, rng, p * m, u)
  hack = rng.random(p * m) < hack_frac
  resp["ell"] = np.where(hack, 1.5 + 0.5 * np.abs(rng.normal(size=p * m)), resp["ell"])
  resp["s"] = np.where(hack, 1.0, resp["s"])
  unit = world.w_star / np.linalg.norm(world.w_star)
  resp["c"] = resp["c"] - hack_shift * hack[:, None] * unit
  h = render(world, resp)
  return {"h": h.reshape(p, m, -1), "gold": gold_reward(world, resp).reshape(p, m),
          "ell": resp["ell"].reshape(p, m), "s": resp["s"].reshape(p, m), "hack": hack.reshape(p, m)}
