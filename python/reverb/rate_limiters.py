"""Rate limiters: when a table lets inserts and samples through.

A rate limiter watches `inserts * samples_per_insert - samples` (the cursor)
and the table size (`inserts - deletes`). Samples wait until the table holds
`min_size_to_sample` items and as long as the cursor would drop below
`min_diff`; inserts wait while the cursor would rise above `max_diff` (but
never while the table is at most `min_size_to_sample` items large).
"""

import abc
import logging
from typing import Tuple, Union

from reverb import pybind


class RateLimiter(metaclass=abc.ABCMeta):
  """Rate limiter with explicit settings; base of the named limiters."""

  def __init__(self, samples_per_insert: float, min_size_to_sample: int,
               min_diff: float, max_diff: float):
    """Raises ValueError unless samples_per_insert > 0, min_size_to_sample >= 1
    and min_diff <= max_diff."""
    self._set_internal(
        pybind.RateLimiter(
            samples_per_insert=samples_per_insert,
            min_size_to_sample=min_size_to_sample,
            min_diff=min_diff,
            max_diff=max_diff))

  def _set_internal(self, internal_limiter: pybind.RateLimiter):
    self.internal_limiter = internal_limiter
    self._samples_per_insert = internal_limiter.samples_per_insert
    self._min_size_to_sample = internal_limiter.min_size_to_sample
    self._min_diff = internal_limiter.min_diff
    self._max_diff = internal_limiter.max_diff

  def __repr__(self):
    return repr(self.internal_limiter)


class MinSize(RateLimiter):
  """Blocks sampling until the table holds `min_size_to_sample` items."""

  def __init__(self, min_size_to_sample: int):
    """Raises ValueError if min_size_to_sample < 1."""
    self._set_internal(pybind.min_size_rate_limiter(min_size_to_sample))


class SampleToInsertRatio(RateLimiter):
  """Keeps the ratio of samples to inserts near `samples_per_insert`.

  Once the table holds `min_size_to_sample` items, each item is sampled on
  average `samples_per_insert` times: the cursor must stay within the error
  buffer. A number `error_buffer` gives the range
  `spi * min_size_to_sample -/+ error_buffer`; a pair gives
  `(min_diff, max_diff)` directly.
  """

  def __init__(self, samples_per_insert: float, min_size_to_sample: int,
               error_buffer: Union[float, Tuple[float, float]]):
    """Raises ValueError for invalid settings (see the C++ presets)."""
    if isinstance(error_buffer, (int, float)):
      offset = samples_per_insert * min_size_to_sample
      min_diff, max_diff = offset - error_buffer, offset + error_buffer
    else:
      # Anything else must unpack into two numbers (ValueError otherwise).
      min_diff, max_diff = error_buffer
    limiter = pybind.sample_to_insert_ratio_rate_limiter(
        samples_per_insert, min_size_to_sample, min_diff, max_diff)
    if limiter.may_deadlock_without_concurrent_sampling():
      logging.warning(
          'The range covered by error_buffer is below '
          'samples_per_insert * min_size_to_sample. If the sampler cannot '
          'sample concurrently, this will result in a deadlock as soon as '
          'min_size_to_sample items have been inserted.')
    self._set_internal(limiter)


class Queue(RateLimiter):
  """Lets through at most `size` inserted but unsampled items (use with
  `Table.queue`). Raises ValueError if `size` < 0."""

  def __init__(self, size: int):
    self._set_internal(pybind.queue_rate_limiter(size))


class Stack(RateLimiter):
  """Numerically the same as `Queue`; use with `Table.stack`."""

  def __init__(self, size: int):
    self._set_internal(pybind.stack_rate_limiter(size))
