"""TimestepDataset: a tf.data.Dataset of single timesteps of sampled items.

Every sampled item is split into its timesteps (all columns must have the
same length); each element is `ReplaySample(info, data)` with the item's
info and one row of every column. There is no end-of-item signal, as in
dm-reverb. Importing this module imports TensorFlow.
"""

from reverb import trajectory_dataset


class TimestepDataset(trajectory_dataset.TrajectoryDataset):
  """As TrajectoryDataset, but elements are timesteps; `shapes` are the
  shapes of one step."""

  _EMIT_TIMESTEPS = True
