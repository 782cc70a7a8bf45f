"""The classifier under unlearning: an encoder g and a linear head h, x -> h(g(x)). Any Linen module with
submodules `encoder` and `head` works (`Classifier`); `MLPClassifier` is the CPU-scale one (z = post-ReLU features)."""

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxml.core.types import Params
from jaxml.nn.mlp import MLP

__all__ = ["MLPEncoder", "MLPClassifier", "Conv1DEncoder", "Classifier", "encode", "head_logits", "head_kernel",
           "make_classifier"]


class MLPEncoder(nn.Module):
  """[B, ...] -> [B, D]: flatten, Dense-ReLU stack, ReLU on the last layer too."""

  features: Sequence[int] = (256, 128)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    x = x.reshape(x.shape[0], -1)
    return nn.relu(MLP(tuple(self.features), name="mlp")(x))


class Conv1DEncoder(nn.Module):
  """[B, L] or [B, L, C] -> [B, features]: `layers` x (Conv1D `kernel`, `channels`, ReLU), flatten,
  Dense(features) ReLU (the deeper encoder of the spec's mnist1d CNN option)."""

  features: int = 128
  channels: int = 32
  layers: int = 3
  kernel: int = 5

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    if x.ndim == 2:
      x = x[..., None]
    for i in range(self.layers):
      x = nn.relu(nn.Conv(self.channels, (self.kernel,), padding="SAME", name=f"conv_{i}")(x))
    return nn.relu(nn.Dense(self.features, name="dense")(x.reshape(x.shape[0], -1)))


class Classifier(nn.Module):
  """`encoder` + linear head, submodules named `encoder` and `head` (as ResNet's)."""

  encoder: nn.Module
  num_classes: int

  def setup(self):
    self.head = nn.Dense(self.num_classes)

  def __call__(self, x: jax.Array) -> jax.Array:
    return self.head(self.encoder(x))


def MLPClassifier(num_classes: int, features: Sequence[int] = (256, 128)) -> Classifier:  # noqa: N802
  """`MLPEncoder(features)` + linear head."""
  return Classifier(MLPEncoder(tuple(features)), num_classes)


def encode(model: nn.Module, params: Params, x: jax.Array) -> jax.Array:
  """z = g(x): [B, ...] -> [B, D]; `params` is the full {'encoder', 'head'} tree."""
  return model.apply({"params": params}, x, method=lambda module, v: module.encoder(v))


def head_logits(model: nn.Module, params: Params, z: jax.Array) -> jax.Array:
  """h(z) = z W + b: [B, D] -> [B, C]."""
  return model.apply({"params": params}, z, method=lambda module, v: module.head(v))


def head_kernel(params: Params) -> jax.Array:
  """Class prototypes w_c as rows: the head kernel transposed, [C, D]."""
  return jnp.asarray(params["head"]["kernel"]).T


def make_classifier(arch: str, num_classes: int, *, features: Sequence[int] = (256, 128), conv_channels: int = 32,
                    conv_layers: int = 3, conv_kernel: int = 5, resnet_stage_sizes: Sequence[int] = (2, 2, 2, 2),
                    resnet_width: int = 64) -> nn.Module:
  """The classifier by name: "mlp" (`MLPClassifier`, encoder widths `features`), "cnn1d"
  (`Conv1DEncoder` + head, z of width features[-1]) or "resnet" (`jaxml.nn.resnet.ResNet`)."""
  if arch == "resnet":
    from jaxml.nn.resnet import ResNet
    return ResNet(num_classes, tuple(resnet_stage_sizes), resnet_width)
  if arch == "cnn1d":
    return Classifier(Conv1DEncoder(features[-1], conv_channels, conv_layers, conv_kernel), num_classes)
  if arch == "mlp":
    return MLPClassifier(num_classes, tuple(features))
  raise ValueError(f"unknown classifier {arch!r}; expected 'mlp', 'cnn1d' or 'resnet'")
