"""The TFDS path (tfds.data_source + grain) on mock data: no download, no TensorFlow."""

import numpy as np
import tensorflow_datasets as tfds

from jaxml.data import tfds as jtfds


def test_mnist_batches_from_mock_data():
  with tfds.testing.mock_data(num_examples=16, policy=tfds.testing.MockPolicy.USE_CODE):
    it = jtfds.make_tfds_batches("mnist", split="train", batch_size=4, seed=0, process_index=1,
                                 process_count=2)
    batch = next(it)
  assert batch["x"].shape == (4, 28, 28, 1) and batch["x"].dtype == np.float32
  assert batch["y"].dtype == np.int32 and 0.0 <= batch["x"].min() and batch["x"].max() <= 1.0
