"""Types shared across the Python API (as dm-reverb's reverb_types)."""

import dataclasses
from typing import Any, Optional, Union

from reverb import pybind
from reverb import structured_value
from reverb.cc import schema_pb2

Fifo = pybind.FifoSelector
Heap = pybind.HeapSelector
Lifo = pybind.LifoSelector
Prioritized = pybind.PrioritizedSelector
Uniform = pybind.UniformSelector

SelectorType = Union[Fifo, Heap, Lifo, Prioritized, Uniform]

# A nest (dicts, lists, tuples, namedtuples) of tf.TensorSpec or
# reverb.specs.TensorSpec.
SpecNest = Any


@dataclasses.dataclass
class TableInfo:
  """What a table reports about itself (`Table.info`, `Client.server_info`).

  `sampler_options`, `remover_options`, `rate_limiter_info` and
  `table_worker_time` are the protocol buffer messages of
  `reverb.cc.schema_pb2`; `signature` is the decoded nest of specs, or None:
  `tf.TensorSpec`s whenever TensorFlow can be imported (it is imported for
  them), else `reverb.specs.TensorSpec`s.
  """
  name: str
  sampler_options: Any
  remover_options: Any
  max_size: int
  max_times_sampled: int
  rate_limiter_info: Any
  signature: Optional[SpecNest]
  current_size: int
  num_episodes: int
  num_deleted_episodes: int
  num_unique_samples: int
  table_worker_time: Any

  @classmethod
  def from_serialized_proto(cls, proto: bytes) -> 'TableInfo':
    info = schema_pb2.TableInfo.FromString(proto)
    return cls(
        name=info.name,
        sampler_options=info.sampler_options,
        remover_options=info.remover_options,
        max_size=info.max_size,
        max_times_sampled=info.max_times_sampled,
        rate_limiter_info=info.rate_limiter_info,
        signature=(structured_value.decode(info.signature,
                                           import_tensorflow=True)
                   if info.HasField('signature') else None),
        current_size=info.current_size,
        num_episodes=info.num_episodes,
        num_deleted_episodes=info.num_deleted_episodes,
        num_unique_samples=info.num_unique_samples,
        table_worker_time=info.table_worker_time,
    )
