"""Reverb: experience replay for reinforcement learning.

A drop-in replacement for dm-reverb. `import reverb` never imports
TensorFlow; the TensorFlow integration loads only when it is used.
"""

import os as _os
import sys as _sys

# libreverb and the extension carry their own gRPC/protobuf/abseil (Debian's).
# TensorFlow exports same-named symbols with RTLD_GLOBAL; RTLD_DEEPBIND makes
# our libraries bind to their own dependencies whichever is imported first.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_os.RTLD_NOW | _os.RTLD_DEEPBIND)
try:
  from reverb import pybind
finally:
  _sys.setdlopenflags(_flags)
del _flags

from reverb import client
from reverb import platform
from reverb.platform import checkpointers_lib as checkpointers
from reverb import errors
from reverb import item_selectors
from reverb import item_selectors as selectors
from reverb import rate_limiters
from reverb import replay_iterator
from reverb import replay_sample
from reverb import reverb_types
from reverb import server
from reverb import specs
from reverb import structured_writer
from reverb import structured_writer as structured
from reverb import trajectory_writer
from reverb._cmake import get_cmake_dir
from reverb.client import Client
from reverb.client import Writer
from reverb.errors import DeadlineExceededError
from reverb.errors import ReverbError
from reverb.replay_iterator import ReplayIterator
from reverb.replay_sample import ReplaySample
from reverb.replay_sample import SampleInfo
from reverb.server import Server
from reverb.trajectory_writer import TrajectoryColumn
from reverb.trajectory_writer import TrajectoryWriter
from reverb.server import Table
from reverb.server import TableExtensionBase


# The TensorFlow integration loads (and imports TensorFlow) only when used.
_LAZY = {
    'TrajectoryDataset': ('reverb.trajectory_dataset', 'TrajectoryDataset'),
    'TimestepDataset': ('reverb.timestep_dataset', 'TimestepDataset'),
    'TFClient': ('reverb.tf_client', 'TFClient'),
    'PatternDataset': ('reverb.pattern_dataset', 'PatternDataset'),
    'pattern_dataset': ('reverb.pattern_dataset', None),
    'trajectory_dataset': ('reverb.trajectory_dataset', None),
    'timestep_dataset': ('reverb.timestep_dataset', None),
    'tf_client': ('reverb.tf_client', None),
}


def __getattr__(name):
  if name not in _LAZY:
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
  import importlib  # pylint: disable=g-import-not-at-top
  module_name, attribute = _LAZY[name]
  module = importlib.import_module(module_name)
  return module if attribute is None else getattr(module, attribute)


# As with dm-reverb, importing reverb once TensorFlow is imported registers
# our ops with it, so that graphs holding them (a SavedModel) load.
# (A None entry is how some users block TensorFlow: nothing to register.)
if _sys.modules.get('tensorflow') is not None:
  from reverb import _datasets
  try:
    _datasets.load_ops(_sys.modules['tensorflow'])
  except (ImportError, AttributeError):
    pass  # Built without TensorFlow (datasets say so when made), or a
    # TensorFlow still being imported.
