"""SOL as a `core.Method`, its ablations, the GOL-style variant, decoding and the refresh step.

Non-trainable state in `TrainState.extra` (arrays, so one compilation serves every partition and refresh):
centroids [C, d], labels [N] (current, possibly relabelled ranks), valid [C] (ranks present), flagged [N],
embeddings [N, d] and t_train [N] (at the last refresh, for k-NN / profile decoding), log_prior [C], kappa
(`decoders.fit_kappa`), decoder (index into DECODERS used last), refreshes. Batches are {"x": [2B, ...],
"idx": [2B] int32} (B bases then B references); ranks come from `extra["labels"][idx]`, exact under resume."""

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxml import core
from jaxml.sol import baselines
from jaxml.sol import decoders as D
from jaxml.sol import losses as L
from jaxml.sol.model import RankNet
from jaxml.sol.refine import RELABEL_STEPS, refine_labels

__all__ = ["SOL_FAMILY", "BASELINES", "ALL_METHODS", "DEFAULTS", "RELABEL_DECODERS", "RankLearner", "sol_settings",
           "host_pair_count", "make_learner", "make_method", "init_extra", "make_embed_fn", "make_refresh_fn"]

RELABEL_DECODERS = ("auto",) + D.DECODERS

# Package defaults for users who call make_* without a config; experiments pass every key.
DEFAULTS: dict[str, Any] = dict(
    num_classes=10, sigma=1.0, tau=1, margin=0.25, neighbourhood=1, pairs_per_class=32,
    w_so=1.0, w_d=1.0, w_center=1.0, eta=0.9, relabel=True, relabel_start=1000, relabel_every=200,
    refresh_every=100, relabel_step="round_mean", relabel_decoder="auto", backbone="mlp", hidden=(128, 128),
    embed_dim=32, knn=50, profile_window=4, soft_sigma=1.0, poe_kl=1e-3, poe_margin=0.5, poe_weight=0.1)

# Ablations and GOL as overrides of the SOL settings (spec §5).
_VARIANTS: dict[str, dict[str, Any]] = {
    "sol": {},
    "sol_no_so": {"w_so": 0.0},
    "sol_no_d": {"w_d": 0.0},
    "sol_sigma0": {"sigma": 0.0},
    "sol_no_relabel": {"relabel": False},
    # GOL = σ → 0, learnable reference points, no refinement; metric loss + center loss.
    "gol": {"sigma": 0.0, "relabel": False, "w_d": 0.0},
}
SOL_FAMILY = tuple(_VARIANTS)          # method names are the keys of the registries (_VARIANTS, baselines.RULES)
BASELINES = baselines.BASELINES
ALL_METHODS = SOL_FAMILY + BASELINES


class RankLearner(NamedTuple):
  """One method's pure pieces, reused for every partition: decode(params, extra, x) -> [R, B] int32 ranks (one
  row per decoder), batch_kind "pairs" (x + idx) or "plain" (x + y), refresh (`make_refresh_fn`) or None."""

  name: str
  method: core.Method
  decode: Callable[[Any, Any, jax.Array], jax.Array]
  decoders: tuple[str, ...]
  batch_kind: str
  refresh: Callable | None
  settings: dict[str, Any]


def sol_settings(config: Mapping[str, Any] | None = None, variant: str = "sol") -> dict[str, Any]:
  """DEFAULTS <- config (a dict or ConfigDict; unknown keys are errors) <- variant overrides."""
  if variant not in _VARIANTS:
    raise ValueError(f"unknown SOL variant {variant!r}; expected one of {tuple(_VARIANTS)}")
  given = dict(config or {})
  core.reject_unknown(given, DEFAULTS, "SOL")
  # typed once here (DEFAULTS' types), so no reader converts again
  s = {k: type(DEFAULTS[k])(v) for k, v in {**DEFAULTS, **given, **_VARIANTS[variant]}.items()}
  for key, allowed in (("relabel_step", RELABEL_STEPS), ("relabel_decoder", RELABEL_DECODERS)):
    if s[key] not in allowed:
      raise ValueError(f"unknown {key} {s[key]!r}; expected one of {allowed}")
  if s["relabel_every"] % s["refresh_every"]:
    raise ValueError("relabel_every must be a multiple of refresh_every")
  if s["relabel_start"] % s["refresh_every"]:   # labels are refined at refresh steps only:
    raise ValueError("relabel_start must be a multiple of refresh_every")   # else relabelling never runs
  return s


def host_pair_count(s: Mapping[str, Any]) -> int:
  """Pairs per class drawn on the host (`pairs.sample_pairs_rows`): in a jitted CPU step it costs more than L_SO."""
  return s["pairs_per_class"]


def _net(s: Mapping[str, Any], head: str) -> RankNet:
  return RankNet(num_classes=s["num_classes"], head=head, backbone=s["backbone"],
                 hidden=s["hidden"], embed_dim=s["embed_dim"])


def make_method(config: Mapping[str, Any] | None = None, variant: str = "sol") -> core.Method:
  """SOL (or an ablation / GOL) as a core.Method whose loss takes `extra` (`uses_extra=True`):
  L = w_so · L_SO + w_d · mean_b L_D(b) (+ w_center · center loss for GOL). Pairs come from the batch
  ("pair_base" / "pair_ref" / "pair_valid", sampled on the host) or are drawn in the step (`losses.sample_pairs`)."""
  s = sol_settings(config, variant)
  learnable = variant == "gol"
  net = _net(s, "gol" if learnable else "embed")
  c, sigma, tau = s["num_classes"], s["sigma"], s["tau"]
  table = L.gaussian_table(c, sigma)
  # constants of the step (ranks are integers): the pairs' order probabilities (`L.order_probs` of their
  # Gaussian rows) as one [C, C, 3] lookup, and L_D as a linear map A of the profile (rows A Q)
  order_table = jnp.stack(L.order_prob_tables(table, tau), -1)
  d_table = jnp.asarray(L.discriminative_weights(c, s["neighbourhood"])) @ table

  def init(rng: jax.Array, batch: core.Batch) -> core.Params:
    return net.init(rng, jnp.asarray(batch["x"]))["params"]

  def loss_fn(params, batch, rng, extra):
    out = net.apply({"params": params}, batch["x"])
    e = out["embedding"]
    ranks = extra["labels"][batch["idx"]]
    cent = out["centroids"] if learnable else jax.lax.stop_gradient(extra["centroids"])
    if "pair_base" in batch:   # drawn with the batch on the host (`pairs.make_pair_batches`)
      pairs = L.Pairs(batch["pair_base"], batch["pair_ref"], batch["pair_valid"])
    else:
      pairs = L.sample_pairs(rng, ranks, tau, s["pairs_per_class"])
    # The profile S = expected_profile(e, cent, table) enters only through pair gaps S^i − S^k ([P, C])
    # and L_D(b) = A[r_b]·S_b, both affine in e (`L.profile_affine`): no [B, C] profile is formed.
    rb, rr = ranks[pairs.base], ranks[pairs.ref]
    p_gt, p_lt, p_sim = jnp.moveaxis(order_table[rb, rr], -1, 0)
    gap = L.profile_gaps(e, L.profile_affine(cent, table), pairs.base, pairs.ref)
    l_so = L.stochastic_order_loss(gap, rb, rr, (p_gt, p_lt, p_sim), s["margin"], pairs.valid)
    d_aff = L.profile_affine(cent, d_table)
    e2 = jnp.sum(jnp.square(e), -1)
    l_d = jnp.mean(d_aff.scale[ranks] * e2 + d_aff.bias[ranks] - 2.0 * jnp.sum(e * d_aff.weight[ranks], -1))
    loss = s["w_so"] * l_so + s["w_d"] * l_d
    aux = {"l_so": l_so, "l_d": l_d, "pairs": pairs.valid.sum()}
    if learnable:
      l_c = L.center_loss(e, cent, ranks)
      loss = loss + s["w_center"] * l_c
      aux["l_center"] = l_c
    return loss, aux

  return core.Method(init, loss_fn, None)


def make_embed_fn(config: Mapping[str, Any] | None = None, *, chunk: int = 1024) -> Callable:
  """embed(params, x) -> [N, d] unit embeddings, in chunks of `chunk` rows (lax.map)."""
  net = _net(sol_settings(config), "embed")

  def embed(params, x):
    n, size = x.shape[0], min(chunk, x.shape[0])
    xp = jnp.pad(x, [(0, -n % size)] + [(0, 0)] * (x.ndim - 1))   # full chunks: one shape, as in training
    one = lambda row: net.apply({"params": params}, row[None])["embedding"][0]  # noqa: E731
    return jax.lax.map(one, xp, batch_size=size)[:n]

  return embed


def _decode_chunks(fn: Callable[[jax.Array], jax.Array], n: int, chunk: int = 512) -> jax.Array:
  """fn(rows [size] int) -> [R, size], applied over rows 0..n−1 in full chunks (bounded k-NN memory); [R, n]."""
  size = min(chunk, n)
  rows = jnp.minimum(jnp.arange(n + -n % size), n - 1)
  return jax.lax.map(lambda i: fn(i[None])[:, 0], rows, batch_size=size)[:n].T


def make_refresh_fn(config: Mapping[str, Any] | None = None, variant: str = "sol") -> Callable:
  """Jitted refresh(params, extra, x_train, x_val, y_val, relabel) -> (extra, stats): re-embeds the training set
  and recomputes centroids, valid ranks, positions, prior and κ; if `relabel` (traced), decodes the training
  set with `relabel_decoder` ("auto": lowest noisy-validation MAE), refines the labels (spec §2.6) and
  recomputes the centroids (spec §2.1)."""
  s = sol_settings(config, variant)
  c, sigma, k, window = s["num_classes"], s["sigma"], s["knn"], s["profile_window"]
  table = L.gaussian_table(c, sigma)
  embed = make_embed_fn(s)
  fixed = s["relabel_decoder"]

  def geometry(e, labels):
    cent = L.soft_centroids(e, L.gaussian_rows(labels, c, sigma))
    valid = jnp.zeros((c,), bool).at[labels].set(True)
    logp = D.log_prior(labels, c)
    return {"centroids": cent, "valid": valid,
            "t_train": D.profile_position(D.masked_profile(e, cent, table, valid), table, valid, window),
            "log_prior": logp, "kappa": D.fit_kappa(D.masked_dists(e, cent, valid), labels, logp)}

  @jax.jit
  def refresh(params, extra, x_train, x_val, y_val, relabel):
    e = embed(params, x_train)
    labels = extra["labels"]
    new = {**extra, **geometry(e, labels), "embeddings": e, "refreshes": extra["refreshes"] + 1}

    def do_relabel(new):
      if fixed == "auto":
        val_pred = D.decode_all(embed(params, x_val), new, table, k=k, window=window)
        choice = jnp.argmin(jnp.abs(val_pred - y_val[None, :]).mean(-1)).astype(jnp.int32)
      else:
        choice = jnp.asarray(D.DECODERS.index(fixed), jnp.int32)
      n = labels.shape[0]
      pred = _decode_chunks(lambda rows: D.decode_all(e[rows], new, table, k=k, window=window, query_idx=rows), n)
      ref = refine_labels(pred[choice], labels, eta=s["eta"], step_rule=s["relabel_step"])
      return ({**new, **geometry(e, ref.labels), "labels": ref.labels,
               "flagged": new["flagged"] | ref.flagged, "decoder": choice},
              {"flagged": ref.flagged.sum(), "changed": (ref.labels != labels).sum(), "shift": ref.step})

    def skip(new):
      return new, {"flagged": jnp.zeros((), jnp.int32), "changed": jnp.zeros((), jnp.int32), "shift": jnp.zeros(())}

    return jax.lax.cond(relabel, do_relabel, skip, new)

  return refresh


def init_extra(config: Mapping[str, Any] | None, params: core.Params, x_train: np.ndarray,
               labels: np.ndarray, refresh: Callable, x_val: np.ndarray, y_val: np.ndarray) -> dict[str, jax.Array]:
  """Initial `extra`: centroids from the untrained encoder (the refresh before step 0)."""
  s = sol_settings(config)
  labels = jnp.asarray(labels, jnp.int32)
  n, c, d = labels.shape[0], s["num_classes"], s["embed_dim"]
  extra = {"centroids": jnp.zeros((c, d), jnp.float32), "labels": labels, "valid": jnp.zeros((c,), bool),
           "flagged": jnp.zeros((n,), jnp.bool_), "embeddings": jnp.zeros((n, d), jnp.float32),
           "t_train": jnp.zeros((n,), jnp.float32), "log_prior": jnp.zeros((c,), jnp.float32),
           "kappa": jnp.zeros((), jnp.float32), "decoder": jnp.zeros((), jnp.int32),
           "refreshes": jnp.zeros((), jnp.int32)}
  extra, _ = refresh(params, extra, jnp.asarray(x_train), jnp.asarray(x_val), jnp.asarray(y_val, jnp.int32),
                     jnp.asarray(False))
  return {**extra, "refreshes": jnp.zeros((), jnp.int32)}


def _sol_decode(s: Mapping[str, Any], learnable: bool) -> Callable:
  net = _net(s, "gol" if learnable else "embed")
  table = L.gaussian_table(s["num_classes"], s["sigma"])

  @jax.jit
  def decode(params, extra, x):
    """[len(DECODERS), B], rows in DECODERS order (module `decoders`)."""
    out = net.apply({"params": params}, x)
    if learnable:
      extra = {**extra, "centroids": out["centroids"]}
    return D.decode_all(out["embedding"], extra, table, k=s["knn"], window=s["profile_window"])

  return decode


def make_learner(name: str, config: Mapping[str, Any] | None = None) -> RankLearner:
  """Any method of ALL_METHODS with the same encoder settings (config: dict or ConfigDict)."""
  if name in SOL_FAMILY:
    s = sol_settings(config, name)
    return RankLearner(name, make_method(config, name), _sol_decode(s, name == "gol"), D.DECODERS, "pairs",
                       make_refresh_fn(config, name), s)
  if name in BASELINES:
    s = sol_settings(config)
    method, predict = baselines.make_baseline(name, s)
    decode = jax.jit(lambda params, extra, x: predict(params, extra, x)[None, :])
    return RankLearner(name, method, decode, (baselines.RULES[name],), "plain", None, s)
  raise ValueError(f"unknown method {name!r}; expected one of {ALL_METHODS}")
