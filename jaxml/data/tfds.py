"""TFDS catalogue datasets (mnist, cifar10, ...) for users who have them, without TensorFlow: `tfds.data_source`
(array_record) + grain, unlike `tfds.load`, work without it. Each process reads its own shard of the split."""

from typing import Iterator

import numpy as np

__all__ = ["make_tfds_batches", "load_tfds_arrays"]


def make_tfds_batches(name: str, *, split: str, batch_size: int, seed: int, data_dir: str | None = None,
                      process_index: int = 0, process_count: int = 1, image_key: str = "image",
                      label_key: str = "label", shuffle: bool = True,
                      num_epochs: int | None = None) -> Iterator[dict[str, np.ndarray]]:
  """Yields {"x": float32 [b, ...] in [0, 1], "y": int32 [b]} of this process's rows (`batch_size` per process),
  from a dataset already prepared in `data_dir` (or the TFDS default; tests use `tfds.testing.mock_data`)."""
  import grain.python as grain  # lazy: only users of catalogue data pay for these imports
  import tensorflow_datasets as tfds

  source = tfds.data_source(name, split=split, data_dir=data_dir)
  sampler = grain.IndexSampler(num_records=len(source), shard_options=grain.ShardOptions(
      shard_index=process_index, shard_count=process_count, drop_remainder=True),
      shuffle=shuffle, num_epochs=num_epochs, seed=seed)

  class _ToArrays(grain.MapTransform):
    def map(self, record):
      image = np.asarray(record[image_key])
      x = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else image.astype(np.float32)
      return {"x": x, "y": np.asarray(record[label_key], np.int32)}

  loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=0,
                            operations=[_ToArrays(), grain.Batch(batch_size, drop_remainder=True)])
  return iter(loader)


def load_tfds_arrays(name: str, *, split: str, batch_size: int, limit: int = 0,
                     data_dir: str | None = None) -> dict[str, np.ndarray]:
  """A split in order as {"x", "y"} numpy arrays, read in `batch_size` batches (a last partial batch is
  dropped); its first `limit` rows when limit > 0."""
  parts = []
  for batch in make_tfds_batches(name, split=split, batch_size=batch_size, seed=0, data_dir=data_dir, shuffle=False,
                                 num_epochs=1):
    parts.append(batch)
    if limit and batch_size * len(parts) >= limit:
      break
  return {k: np.concatenate([b[k] for b in parts])[:limit or None] for k in ("x", "y")}
