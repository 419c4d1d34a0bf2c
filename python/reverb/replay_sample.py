"""What samples are made of: `SampleInfo` and `ReplaySample`."""

from typing import Any, NamedTuple


class SampleInfo(NamedTuple):
  """Per-sample information, as the server saw it when sampling.

  Fields: `key` (item key, uint64), `probability` (of picking this item,
  float64), `table_size` (items in the table, int64), `priority` (float64)
  and `times_sampled` (including this sample, int32).
  """
  key: Any
  probability: Any
  table_size: Any
  priority: Any
  times_sampled: Any

  @classmethod
  def tf_dtypes(cls):
    """TensorFlow dtypes of the fields (imports TensorFlow)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return cls(tf.uint64, tf.double, tf.int64, tf.double, tf.int32)

  @classmethod
  def tf_shapes(cls):
    """Shapes of the fields: all scalars (imports TensorFlow)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return cls(*[tf.TensorShape([]) for _ in cls._fields])

  @classmethod
  def zeros(cls):
    return cls(0, 0.0, 0, 0.0, 0)


class ReplaySample(NamedTuple):
  """A sample: its `SampleInfo` and its data (a nest, or a flat list)."""
  info: SampleInfo
  data: Any
