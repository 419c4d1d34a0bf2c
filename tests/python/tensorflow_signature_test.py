"""Signatures given as tf.TensorSpec (only when TensorFlow is installed)."""

import pytest

import reverb

tf = pytest.importorskip('tensorflow')


def test_tf_specs_round_trip_as_tf_specs():
  signature = {
      'obs': tf.TensorSpec([None, 4], tf.float32, 'obs'),
      'action': tf.TensorSpec([], tf.int64, 'action'),
  }
  table = reverb.Table('t', reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                       10, reverb.rate_limiters.MinSize(1), signature=signature)
  assert table.info.signature == signature
