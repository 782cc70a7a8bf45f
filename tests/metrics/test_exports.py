"""jaxml.metrics exports every public function of its modules from the package itself."""

import inspect

import jaxml.metrics as metrics


def test_package_exports_every_module_function():
  from jaxml.metrics import energy_distance  # noqa: F401  (a top-level name that once failed to import)
  for module_name in ("calibration", "generative", "mcmc", "mia", "ood", "ranking", "representation", "tables"):
    module = getattr(metrics, module_name)
    for name in module.__all__:
      assert name in metrics.__all__, f"jaxml.metrics does not export {module_name}.{name}"
      assert getattr(metrics, name) is getattr(module, name)
  assert all(hasattr(metrics, name) for name in metrics.__all__)
  assert all(inspect.isfunction(getattr(metrics, n)) or inspect.ismodule(getattr(metrics, n)) for n in metrics.__all__)
