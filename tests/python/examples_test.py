"""Every script in examples/ runs to completion and does what it says."""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / 'examples'


def run(name, *args):
  result = subprocess.run([sys.executable, str(EXAMPLES / name), *args],
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Traceback' not in result.stderr, result.stderr[-3000:]
  return result.stdout


def first_and_last_loss(output):
  """The numbers of a learner's "loss FIRST -> LAST" line."""
  first, last = output.split('loss ')[1].split(' -> ')
  return float(first), float(last)


def test_actor_learner_runs_and_validates_its_samples():
  assert ' 0 bad samples' in run('actor_learner.py', '--seconds', '3')


def test_quickstart():
  output = run('quickstart.py')
  assert output.count('ReplaySample(') == 2
  assert 'data=[array(0), array(1)]' in output


def test_n_step_adder():
  # 5 episodes of 20 steps; 3-step transitions from the 4th step on.
  assert run('n_step_adder.py').startswith('85 transitions')


def test_numpy_learner():
  assert run('numpy_learner.py', '--steps', '10').startswith('10 batches')


@pytest.mark.skipif(importlib.util.find_spec('tensorflow') is None,
                    reason='TensorFlow is not installed')
def test_tf_learner():
  output = run('tf_learner.py', '--steps', '10')
  assert output.startswith('10 steps')
  first, last = first_and_last_loss(output)
  assert last < first


@pytest.mark.skipif(importlib.util.find_spec('ray') is None,
                    reason='Ray is not installed')
def test_ray_actor_learner(needs_sharded_client, monkeypatch):
  del needs_sharded_client
  monkeypatch.setenv('RAY_USAGE_STATS_ENABLED', '0')
  output = run('ray_actor_learner.py', '--seconds', '2')
  assert '3 shards: ' in output
  assert ' 0 bad samples' in output


@pytest.mark.skipif(importlib.util.find_spec('torch') is None,
                    reason='PyTorch is not installed')
def test_pytorch_learner():
  # 30 steps: by then the loss has reliably fallen several-fold.
  output = run('pytorch_learner.py', '--steps', '30')
  assert output.startswith('30 batches')
  first, last = first_and_last_loss(output)
  assert last < first / 2
