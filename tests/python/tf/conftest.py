"""TensorFlow tests: a pytest process of their own (.ci/test runs them
apart), because once TensorFlow is imported signatures decode to TF specs,
which would change what the other tests see."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

if importlib.util.find_spec('tensorflow') is None:
  collect_ignore_glob = ['*_test.py']


@pytest.fixture(name='tf', scope='session')
def tf_fixture():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


_OTHER_PYTHON = (pathlib.Path(__file__).resolve().parents[3] / '.venv-dmreverb' /
                 'bin' / 'python')


@pytest.fixture(name='other_tensorflow_python', scope='session')
def other_tensorflow_python_fixture():
  """The dm-reverb venv's Python (TensorFlow 2.14), to run our op library
  under another TensorFlow. Skips where it is missing, or where it is
  another Python version than this one (our extension is built for this
  one only)."""
  if not _OTHER_PYTHON.exists():
    pytest.skip(f'{_OTHER_PYTHON} is missing (.ci/dmreverb_venv makes it)')
  version = subprocess.run(
      [str(_OTHER_PYTHON), '-I', '-c', 'import sys; print(*sys.version_info[:2])'],
      capture_output=True, text=True, timeout=60, check=True).stdout.split()
  if tuple(int(v) for v in version) != sys.version_info[:2]:
    pytest.skip(f'{_OTHER_PYTHON} is Python {".".join(version)}, and the '
                f'package under test is built for Python '
                f'{sys.version_info.major}.{sys.version_info.minor}')
  return _OTHER_PYTHON
