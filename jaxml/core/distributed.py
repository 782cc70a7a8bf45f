"""Multi-host initialisation behind a flag: the same code path a TPU pod takes."""

import jax

__all__ = ["maybe_initialize", "is_main_process"]


def maybe_initialize(enabled: bool, *, coordinator_address: str | None = None,
                     num_processes: int | None = None, process_id: int | None = None,
                     cpu_collectives: str | None = None) -> None:
  """Calls `jax.distributed.initialize` only when asked (it fails on a plain single host).

  On TPU pods and SLURM/GPU clusters all arguments are found automatically; on CPU, pass
  the coordinator, counts and `cpu_collectives="gloo"` explicitly.
  """
  if not enabled:
    return
  if cpu_collectives:
    jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
  kwargs = {k: v for k, v in dict(coordinator_address=coordinator_address, num_processes=num_processes,
                                  process_id=process_id).items() if v is not None}
  jax.distributed.initialize(**kwargs)


def is_main_process() -> bool:
  return jax.process_index() == 0

