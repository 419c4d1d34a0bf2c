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
  from reverb import pybind as pybind
finally:
  _sys.setdlopenflags(_flags)
del _flags
from reverb import _logs  # noqa: F401  (routes libreverb's log lines)

# `import x as x`: a re-export (PEP 484), as linters and type checkers read it.
from reverb import client as client
from reverb import platform as platform
from reverb import errors as errors
from reverb import item_selectors as item_selectors
from reverb import rate_limiters as rate_limiters
from reverb import replay_iterator as replay_iterator
from reverb import replay_sample as replay_sample
from reverb import reverb_types as reverb_types
from reverb import security as security
from reverb import server as server
from reverb import specs as specs
from reverb import structured_writer as structured_writer
from reverb import trajectory_writer as trajectory_writer
from reverb._cmake import get_cmake_dir as get_cmake_dir
from reverb.client import Client as Client
from reverb.client import Writer as Writer
from reverb.errors import DeadlineExceededError as DeadlineExceededError
from reverb.errors import ReverbError as ReverbError
from reverb.replay_iterator import ReplayIterator as ReplayIterator
from reverb.replay_sample import ReplaySample as ReplaySample
from reverb.replay_sample import SampleInfo as SampleInfo
from reverb.security import TlsOptions as TlsOptions
from reverb.server import Server as Server
from reverb.server_limits import ServerLimits as ServerLimits
from reverb.trajectory_writer import TrajectoryColumn as TrajectoryColumn
from reverb.trajectory_writer import TrajectoryWriter as TrajectoryWriter
from reverb.server import Table as Table
from reverb.server import TableExtensionBase as TableExtensionBase

# dm-reverb's other names for three modules.
checkpointers = platform.checkpointers_lib
selectors = item_selectors
structured = structured_writer


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
  from reverb import _datasets as _datasets
  try:
    _datasets.load_ops(_sys.modules['tensorflow'])
  except (ImportError, AttributeError):
    pass  # Built without TensorFlow (datasets say so when made), or a
    # TensorFlow still being imported.
