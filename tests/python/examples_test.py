"""Every script in examples/ runs to completion."""

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / 'examples'


def test_table_demo_runs():
  result = subprocess.run(
      [sys.executable, str(EXAMPLES / 'table_demo.py'), '--seconds', '2'],
      capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  assert 'done:' in result.stdout
