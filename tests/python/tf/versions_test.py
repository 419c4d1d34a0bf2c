"""The TensorFlow integration under other import orders and another
TensorFlow version.

Our op library uses only TensorFlow's stable C API (tf_ops/README.md), so
the build made next to the CI's TensorFlow must load and sample under
another TensorFlow 2.x: a subprocess runs a dataset under TensorFlow 2.14
from the dm-reverb venv (`.ci/dmreverb_venv`), with our package put first
on its path.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import reverb


SCRIPT = """
import sys
{imports}
import numpy as np
assert reverb.__file__.startswith({package!r}), reverb.__file__
server = reverb.Server([reverb.Table(
    't', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 100,
    reverb.rate_limiters.MinSize(1),
    signature={{'x': tf.TensorSpec([2], tf.float32)}})])
client = server.localhost_client()
with client.trajectory_writer(1) as writer:
  writer.append({{'x': np.arange(2, dtype=np.float32)}})
  writer.create_item('t', 1.0, {{'x': writer.history['x'][-1]}})
dataset = reverb.TrajectoryDataset.from_table_signature(
    f'localhost:{{server.port}}', 't', 10, max_samples=6)
batch = next(iter(dataset.batch(6)))
assert batch.data['x'].numpy().tolist() == [[0.0, 1.0]] * 6
print('OK', tf.__version__)
"""


def run(python, imports, package_dir, extra_path=None):
  code = SCRIPT.format(imports=textwrap.dedent(imports),
                       package=str(package_dir))
  if extra_path:
    code = f'import sys; sys.path.insert(0, {str(extra_path)!r})\n' + code
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  for name in ('PYTHONPATH', 'PYTHONHOME'):
    env.pop(name, None)
  result = subprocess.run([str(python), '-I', '-c', code], env=env,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout.split()[-1]


PACKAGE = pathlib.Path(reverb.__file__).parent


@pytest.mark.parametrize('imports', [
    'import tensorflow as tf\nimport reverb',
    'import reverb\nimport tensorflow as tf',
    'import grpc\nimport reverb\nimport tensorflow as tf',
    'import tensorflow as tf\nimport grpc\nimport reverb',
])
def test_import_orders(imports):
  run(sys.executable, imports, PACKAGE)


def test_runs_under_another_tensorflow(tmp_path, other_tensorflow_python):
  # That venv has dm-reverb's own `reverb`: put ours first on the path.
  (tmp_path / 'reverb').symlink_to(PACKAGE, target_is_directory=True)
  version = run(other_tensorflow_python, 'import reverb\nimport tensorflow as tf',
                tmp_path / 'reverb', extra_path=tmp_path)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert version != tf.__version__
  assert version.startswith('2.')


def test_a_build_without_the_op_library_says_so(tmp_path):
  # A package built where TensorFlow was absent has no op library.
  shutil.copytree(PACKAGE, tmp_path / 'reverb',
                  ignore=shutil.ignore_patterns('libreverb_tf_ops.so'))
  code = textwrap.dedent(f"""
      import sys
      sys.path.insert(0, {str(tmp_path)!r})
      import reverb
      import tensorflow as tf
      try:
        reverb.TrajectoryDataset('localhost:1', 't', tf.int64, [], 1)
      except ImportError as e:
        print('ImportError:', e)
      """)
  result = subprocess.run([sys.executable, '-I', '-c', code],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'ImportError: reverb was built without TensorFlow' in result.stdout
