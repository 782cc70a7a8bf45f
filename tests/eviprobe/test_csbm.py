"""End-to-end checks on a CSBM graph (spec §6): a GCN trained through core.train, then the probe."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import eviprobe_graphs as cfg_module
from jaxml import core
from jaxml.data import csbm, graph_shift as gs
from jaxml.eviprobe import backbone as bb, baselines, probe
from jaxml.eviprobe.probe import ProbeConfig
from jaxml.metrics import ood

TRAIN = {"optim": {"name": "adam", "lr": 0.01}, "num_steps": 120, "eval_every": 1, "log_every": 120}


@pytest.fixture(scope="module")
def graph():
  return csbm.make_csbm(num_nodes=600, num_classes=5, num_features=32, p_in=0.04, p_out=0.004, mean_scale=3.0, seed=0)


def _fit(model, batch, workdir):
  return core.train(bb.make_backbone_method(model), lambda _step: batch, TRAIN, workdir=workdir, name="gcn",
                    eval_batches=[batch], select=bb.selection(patience=20), shard_batch_rows=False, progress=False)


def _train(graph, labels, masks, num_classes, workdir):
  batch = {"x": graph["features"], "edges": graph["edges"], "labels": labels,
           "train_mask": masks["train_mask"].astype(np.float32), "val_mask": masks["val_mask"].astype(np.float32)}
  model = bb.make_backbone({"name": "gcn", "hidden": 16, "dropout": 0.5}, graph["features"].shape[1], num_classes)
  res = _fit(model, batch, workdir)
  return model, batch, res.params, res


def _probe(model, batch, params, labels, masks):
  out = bb.forward(model, params, batch)
  st = probe.fit_probe(out["q"], out["z"], out["logits"], jnp.asarray(labels), jnp.flatnonzero(masks["train_mask"]),
                       jnp.flatnonzero(masks["val_mask"]))
  return st, out


@pytest.mark.slow
def test_held_out_block(graph, tmp_path):
  masks = gs.gpn_split(graph["labels"], 0, train=0.1, val=0.15)
  loc = gs.leave_out_classes(graph["labels"], 5, masks, fraction=0.2)
  model, batch, params, res = _train(graph, loc["labels"], loc, loc["num_classes"], str(tmp_path / "ck"))
  assert res.resumed_from is None
  # selection kept the parameters of the best validation cross-entropy
  val_ce = jax.jit(bb.make_backbone_method(model).eval_fn)(params, batch)["val_ce"]
  np.testing.assert_allclose(float(val_ce), res.best_metric, rtol=1e-5)
  st, out = _probe(model, batch, params, loc["labels"], loc)
  res = probe.score(st, out["q"], out["z"], out["logits"], jnp.asarray(graph["edges"]))
  test = loc["test_mask"] | loc["ood_test_mask"]
  is_ood = loc["ood_test_mask"][test]
  auc = ood.auroc(np.asarray(res["u_epi"])[test], is_ood)
  auc_msp = ood.auroc(np.asarray(baselines.msp(out["logits"])["ood"])[test], is_ood)
  assert auc > 0.9 and auc > auc_msp, (auc, auc_msp)
  idt = loc["test_mask"]
  wrong = np.asarray(out["logits"]).argmax(-1)[idt] != loc["labels"][idt]
  assert ood.auroc(np.asarray(res["u_alea"])[idt], wrong) > 0.6
  # a rerun resumes from the checkpoint and selects the same parameters
  again = _fit(model, batch, str(tmp_path / "ck"))
  assert again.resumed_from is not None
  np.testing.assert_array_equal(bb.forward(model, again.params, batch)["logits"], out["logits"])


@pytest.fixture(scope="module")
def noisy(graph, tmp_path_factory):
  masks = gs.gpn_split(graph["labels"], 1, train=0.1, val=0.15)
  model, batch, params, _ = _train(graph, graph["labels"], masks, 5, str(tmp_path_factory.mktemp("noise") / "ck"))
  st, _ = _probe(model, batch, params, graph["labels"], masks)
  nodes = gs.select_perturbed(masks, seed=0)
  x = gs.perturb_features(graph["features"], nodes, "normal", seed=0, scale=5.0 * graph["features"].std())
  out = bb.forward(model, params, dict(batch, x=x))
  test = masks["test_mask"]
  auc_msp = ood.auroc(np.asarray(baselines.msp(out["logits"])["ood"])[test], nodes[test])
  return st, out, nodes[test], test, auc_msp, (model, batch, params, nodes)


def _noise_auc(graph, noisy, config):
  st, out, is_ood, test, auc_msp, _ = noisy
  res = probe.score(st, out["q"], out["z"], out["logits"], jnp.asarray(graph["edges"]), config)
  return ood.auroc(np.asarray(res["u_epi"])[test], is_ood), auc_msp


@pytest.mark.slow
@pytest.mark.parametrize("config", [ProbeConfig(propagation="tau"), ProbeConfig(propagation="none")],
                         ids=["A3b_tau_only", "A3_no_propagation"])
def test_gaussian_noise_evasion(graph, noisy, config):
  auc, auc_msp = _noise_auc(graph, noisy, config)
  assert auc > 0.95 and auc > auc_msp, (auc, auc_msp)


@pytest.mark.slow
def test_linear_propagation_dilutes_an_isolated_noisy_node(graph, noisy):
  """The spec's §2 rule (linear propagation of S = E·τ, a = 0.1) refills a noisy node from its clean
  neighbours: it ranks the noisy nodes clearly worse than the same evidence without propagation."""
  auc_linear, auc_msp = _noise_auc(graph, noisy, ProbeConfig())
  auc_none, _ = _noise_auc(graph, noisy, ProbeConfig(propagation="none"))
  assert auc_linear < auc_none - 0.05 and auc_linear > auc_msp, (auc_linear, auc_none, auc_msp)


@pytest.mark.slow
def test_centre_guard_flags_zeroed_rows(graph, noisy):
  """Zeroed feature rows land at the data centre of q, where the paper's probe finds them *more* typical than
  real nodes; the extension's centre guard (the experiment's γ_o, γ_c) ranks them as OOD."""
  st, _, is_ood, test, _, (model, batch, params, nodes) = noisy
  x = np.array(graph["features"], copy=True)
  x[nodes] = 0.0
  out = bb.forward(model, params, dict(batch, x=x))
  ext = dict(cfg_module.get_config("smoke").extension)
  aucs = {}
  for name, config in (("paper", ProbeConfig(teleport=0.5)),
                       ("guard", ProbeConfig(teleport=0.5, own_guard=ext["own_guard"], centre_guard=ext["centre_guard"]))):
    res = probe.score(st, out["q"], out["z"], out["logits"], jnp.asarray(graph["edges"]), config)
    aucs[name] = ood.auroc(np.asarray(res["u_epi"])[test], is_ood)
  assert aucs["guard"] > 0.95 and aucs["guard"] > aucs["paper"] + 0.1, aucs
