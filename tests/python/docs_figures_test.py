"""docs/make_figures.py draws every figure the docs show, and the docs show
every figure it draws."""

import pathlib
import re
import subprocess
import sys

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_SCRIPT = _ROOT / 'docs' / 'make_figures.py'
_PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def _shown_figures():
  """figures/NAME.png linked from the docs and the README."""
  names = set()
  for doc in [_ROOT / 'README.md', *(_ROOT / 'docs').glob('*.md')]:
    names.update(re.findall(r'\]\((?:docs/)?figures/([\w.-]+\.png)\)',
                            doc.read_text()))
  return names


def test_the_script_draws_the_committed_figures_and_the_docs_show_them(
    tmp_path):
  pytest.importorskip('matplotlib')
  subprocess.run([sys.executable, str(_SCRIPT), str(tmp_path)], check=True,
                 capture_output=True, timeout=300)
  drawn = {p.name for p in tmp_path.glob('*.png')}
  committed = {p.name for p in (_ROOT / 'docs' / 'figures').glob('*.png')}
  assert drawn == committed
  assert _shown_figures() == drawn
  for name in drawn:
    assert (tmp_path / name).read_bytes().startswith(_PNG_MAGIC), name
    assert (tmp_path / name).stat().st_size > 10_000, name
