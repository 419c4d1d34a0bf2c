"""`reverb.ServerLimits`: what one client may cost a server.

A client that goes past a limit gets an error naming it (its own call
fails); other clients and the data the tables hold are unaffected. The
defaults are far above what ordinary workloads need; see docs/concepts.md,
"Server limits".
"""

import dataclasses
from typing import Optional

from reverb import pybind

_DEFAULTS = pybind.ServerLimits()


@dataclasses.dataclass(frozen=True)
class ServerLimits:
  """Limits of a `reverb.Server` (`reverb.Server(..., limits=...)`).

  Every field left None takes its default.

  Attributes:
    max_held_chunk_bytes_per_stream: Bytes of chunks one insert stream (one
      writer) keeps on the server for its next items: its keep-alive window
      (`TrajectoryWriter` `num_keep_alive_refs` steps, legacy `Writer`
      `max_sequence_length` steps, plus up to one chunk per column), counted
      compressed. Beyond it the stream fails with RESOURCE_EXHAUSTED (the
      writer raises IndexError, as dm-reverb maps that code) and its kept
      chunks are freed. Default 1 GiB.
    max_held_chunk_bytes: The same, for all insert streams together. Default
      half of the machine's physical memory (at least 1 GiB).
    max_message_bytes: Largest request message the server accepts (an insert
      request carries the chunks of a step or more). Default 1 GiB.
    max_concurrent_streams_per_connection: Calls one client connection may
      have open at once; further calls wait for one to end. Default 1024.
    max_samples_per_request: Largest number of samples one sample request
      may ask for (`max_in_flight_samples_per_worker` of datasets and
      samplers); beyond it the stream fails with INVALID_ARGUMENT. Default
      2**20.
    stalled_sample_stream_timeout_seconds: A sample stream whose client has
      taken no response for this long is cancelled; the samples the server
      had taken for it are lost. `float('inf')`: never. Default 3600.
  """

  max_held_chunk_bytes_per_stream: Optional[int] = None
  max_held_chunk_bytes: Optional[int] = None
  max_message_bytes: Optional[int] = None
  max_concurrent_streams_per_connection: Optional[int] = None
  max_samples_per_request: Optional[int] = None
  stalled_sample_stream_timeout_seconds: Optional[float] = None

  def __post_init__(self):
    self.to_internal().validate()  # ValueError for a limit <= 0.

  def to_internal(self) -> pybind.ServerLimits:
    """The limits as the C++ server takes them, defaults filled in."""
    limits = pybind.ServerLimits()
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if value is not None:
        try:
          setattr(limits, field.name, value)
        except TypeError as e:
          raise ValueError(
              f'ServerLimits.{field.name} must be a positive '
              f'{type(getattr(_DEFAULTS, field.name)).__name__} in range, '
              f'got {value!r}') from e
    return limits

  @staticmethod
  def default(name: str):
    """The default of the field `name`."""
    return getattr(_DEFAULTS, name)
