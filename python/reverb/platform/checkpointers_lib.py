"""Checkpointers: where a server saves its tables and restores them from.

Also `reverb.checkpointers`. A checkpoint is a directory
`<path>/<UTC time>` with `tables.tfrecord`, `items.tfrecord`,
`chunks.tfrecord` and `DONE`, in dm-reverb's format (each reads the
other's). `reverb.Server(tables, checkpointer=...)` restores the newest
complete checkpoint at start (else the fallback checkpoint, else starts
empty); `Client.checkpoint()` saves one.

Beyond dm-reverb: saves are atomic (a crash never leaves a checkpoint that
looks complete), corrupt files are detected and an older checkpoint is
loaded instead, `keep_latest` checkpoints are kept, the zlib level is
yours, and `use_checkpoint_table_options=False` restores items and counters
into the server's own table options (for instance a smaller `max_size`,
whose remover then evicts the surplus as the items are restored in their
original order).
"""

import abc
import tempfile
from typing import Optional

from reverb import pybind


class CheckpointerBase(metaclass=abc.ABCMeta):
  """A checkpointer usable by `reverb.Server`."""

  @abc.abstractmethod
  def internal_checkpointer(self) -> pybind.Checkpointer:
    """The C++ checkpointer the server uses."""


class DefaultCheckpointer(CheckpointerBase):
  """Checkpoints in directory `path` (created when needed).

  Args:
    path: Root directory of the checkpoints.
    group: Must be empty (groups are not supported, as in dm-reverb).
    fallback_checkpoint_path: A checkpoint directory to restore when `path`
      holds none (to start from another experiment's checkpoint).
    keep_latest: Checkpoints kept after each save (older ones are deleted).
    zlib_level: Compression of the files, 0 (none, fastest; the default:
      chunks are snappy-compressed already) to 9.
    use_checkpoint_table_options: Restore table options (selectors,
      max_size, max_times_sampled, rate limiter, signature) from the
      checkpoint, as dm-reverb does; False keeps the server's tables' options
      and restores only their items and counters.
  """

  def __init__(self,
               path: str,
               group: str = '',
               fallback_checkpoint_path: Optional[str] = None,
               *,
               keep_latest: int = 1,
               zlib_level: int = 0,
               use_checkpoint_table_options: bool = True):
    if keep_latest < 1:
      raise ValueError(f'keep_latest ({keep_latest}) must be >= 1')
    if not 0 <= zlib_level <= 9:
      raise ValueError(f'zlib_level ({zlib_level}) must be in [0, 9]')
    self._path = path
    self._checkpointer = pybind.Checkpointer(
        path, group, fallback_checkpoint_path, keep_latest, zlib_level,
        use_checkpoint_table_options)

  def internal_checkpointer(self) -> pybind.Checkpointer:
    return self._checkpointer

  def __repr__(self) -> str:
    return repr(self._checkpointer)


class TempDirCheckpointer(DefaultCheckpointer):
  """Checkpoints in a new temporary directory."""

  def __init__(self):
    super().__init__(tempfile.mkdtemp())


def default_checkpointer(group: Optional[str] = None) -> CheckpointerBase:
  """The checkpointer of a server given none: a fresh temporary directory.

  `group` is ignored, as in dm-reverb.
  """
  del group
  return TempDirCheckpointer()
