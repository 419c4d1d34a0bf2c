"""Every script in examples/ runs to completion."""

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / 'examples'


def test_actor_learner_runs_and_validates_its_samples():
  result = subprocess.run(
      [sys.executable, str(EXAMPLES / 'actor_learner.py'), '--seconds', '3'],
      capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  assert ' 0 bad samples' in result.stdout
  assert 'Traceback' not in result.stderr, result.stderr
