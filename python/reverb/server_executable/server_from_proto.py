"""Tables from configuration protos (`PriorityTableCheckpoint`)."""

from typing import Sequence

from reverb import pybind
from reverb import rate_limiters
from reverb import server


def selector_from_proto(options) -> pybind.ItemSelector:
  """A selector from a `KeyDistributionOptions` message."""
  return pybind.selector_from_proto(options.SerializeToString())


def rate_limiter_from_proto(proto) -> rate_limiters.RateLimiter:
  """A rate limiter from a `RateLimiterCheckpoint` message."""
  return rate_limiters.RateLimiter(
      samples_per_insert=proto.samples_per_insert,
      min_size_to_sample=proto.min_size_to_sample,
      min_diff=proto.min_diff,
      max_diff=proto.max_diff)


def tables_from_proto(configs: Sequence) -> Sequence[server.Table]:
  """Empty tables (no signatures, no extensions) from table configs."""
  return [
      server.Table(
          name=config.table_name,
          sampler=selector_from_proto(config.sampler),
          remover=selector_from_proto(config.remover),
          max_size=config.max_size,
          rate_limiter=rate_limiter_from_proto(config.rate_limiter),
          max_times_sampled=config.max_times_sampled)
      for config in configs
  ]
