"""The TensorFlow integration under other import orders and another
TensorFlow version.

Our datasets use only public tf.data API (no op library), so one build must
work with any TensorFlow 2.x: a subprocess runs them under TensorFlow 2.14
from the dm-reverb venv (`.ci/dmreverb_venv`), with our package put first
on its path.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import reverb

_REPO = pathlib.Path(__file__).resolve().parents[3]
_OTHER_PYTHON = _REPO / '.venv-dmreverb' / 'bin' / 'python'

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


def test_runs_under_another_tensorflow(tmp_path):
  if not _OTHER_PYTHON.exists():
    pytest.skip(f'{_OTHER_PYTHON} is missing (.ci/dmreverb_venv makes it)')
  # That venv has dm-reverb's own `reverb`: put ours first on the path.
  (tmp_path / 'reverb').symlink_to(PACKAGE, target_is_directory=True)
  version = run(_OTHER_PYTHON, 'import reverb\nimport tensorflow as tf',
                tmp_path / 'reverb', extra_path=tmp_path)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert version != tf.__version__
  assert version.startswith('2.')
