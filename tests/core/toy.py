"""Tiny shared problems for the core tests (seeded, so every test sees the same numbers)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxml import core
from jaxml.nn.mlp import MLP

MODEL = MLP((16, 1))
MULTIHOST_STEPS = 12


def regression_data(n: int = 64, dim: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, dim)).astype(np.float32)
  y = (np.sin(x[:, 0]) + 0.5 * x[:, 1]).astype(np.float32)
  return {"x": x, "y": y}


def mlp_loss(params, batch, rng):
  del rng
  pred = MODEL.apply({"params": params}, batch["x"])[:, 0]
  return jnp.mean((pred - batch["y"]) ** 2), {"mae": jnp.mean(jnp.abs(pred - batch["y"]))}


def batch_fn(data: dict[str, np.ndarray], batch_size: int = 16):
  n = len(data["y"])

  def get(step):
    rows = np.random.default_rng([7, step]).choice(n, batch_size, replace=False)
    return {k: v[rows] for k, v in data.items()}

  return get


def fresh_state(seed: int = 0, lr: float = 1e-2):
  data = regression_data()
  params = MODEL.init(jax.random.key(seed), data["x"][:2])["params"]
  optimizer = optax.adam(lr)
  return core.create_train_state(params, optimizer, seed), optimizer, data
