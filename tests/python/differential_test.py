"""Differential tests: every scenario of tests/python/differential/ runs
under our package and under dm-reverb 0.14 (`.venv-dmreverb`, made by
`.ci/dmreverb_venv`), and their outcomes (results, exception types and
messages) must be equal.

A scenario whose outcomes differ on purpose is listed in `DELIBERATE` with a
phrase that docs/migration.md must contain (where the difference is
explained); such a scenario must still differ, so that a stale entry fails.
The tests skip when the dm-reverb venv is absent. Scenarios that need
TensorFlow (modules named `scenarios_tf*`) skip when this interpreter has no
TensorFlow; the subprocesses import it, never this process.
"""

import concurrent.futures
import functools
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
_SCENARIOS = _HERE / 'differential'
_RUNNER = _SCENARIOS / 'runner.py'
_DMREVERB_PYTHON = _HERE.parent.parent / '.venv-dmreverb' / 'bin' / 'python'
_MIGRATION_DOC = _HERE.parent.parent / 'docs' / 'migration.md'
# A module's run under one package (seconds); the runner's own watchdog
# (240 s) fires first and dumps its stacks.
_RUN_TIMEOUT = 300

# 'module.scenario': a phrase of docs/migration.md that explains why ours
# answers differently.
DELIBERATE = {}


def _load(path: pathlib.Path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


_runner = _load(_RUNNER)


def _modules():
  return sorted(p.stem[len('scenarios_'):]
                for p in _SCENARIOS.glob('scenarios_*.py'))


def _cases():
  for module in _modules():
    scenarios = _load(_SCENARIOS / f'scenarios_{module}.py')
    for name in _runner.scenario_names(scenarios):
      yield f'{module}.{name}'


def _env(tmp_dir: str):
  env = dict(os.environ)
  for name in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP'):
    env.pop(name, None)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  env['TMPDIR'] = tmp_dir  # dm-reverb's Server makes a checkpoint directory.
  return env


def _run(command, tmp_dir: str) -> dict:
  try:
    proc = subprocess.run(command, env=_env(tmp_dir), cwd=tmp_dir,
                          capture_output=True, text=True,
                          timeout=_RUN_TIMEOUT, check=False)
  except subprocess.TimeoutExpired as e:
    return {'failed': f'{command} did not finish in {_RUN_TIMEOUT} s\n'
                      f'{e.stdout}\n{e.stderr}'}
  lines = [line[len(_runner.RESULT_PREFIX):] for line in proc.stdout.splitlines()
           if line.startswith(_runner.RESULT_PREFIX)]
  if proc.returncode != 0 or len(lines) != 1:
    return {'failed': f'{command} exited {proc.returncode}\n{proc.stdout}\n'
                      f'{proc.stderr[-8000:]}'}
  return json.loads(lines[0])


@functools.lru_cache(maxsize=None)
def _outcomes(module: str, tmp_dir: str):
  """(ours, dm-reverb's) outcomes of every scenario of `module`; both
  packages run at the same time."""
  ours = [sys.executable, str(_RUNNER), module]
  theirs = [str(_DMREVERB_PYTHON), '-I', str(_RUNNER), module]
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = list(pool.map(lambda c: _run(c, tmp_dir), [ours, theirs]))
  return tuple(results)


@functools.lru_cache(maxsize=None)
def _dmreverb_unavailable():
  if not _DMREVERB_PYTHON.exists():
    return (f'dm-reverb venv missing ({_DMREVERB_PYTHON}); run '
            '.ci/dmreverb_venv to create it')
  proc = subprocess.run([str(_DMREVERB_PYTHON), '-I', '-c', 'import reverb'],
                        capture_output=True, text=True, check=False,
                        timeout=120, env=_env('/tmp'))
  if proc.returncode != 0:
    return f'{_DMREVERB_PYTHON} cannot import dm-reverb: {proc.stderr[-500:]}'
  return None


@pytest.fixture(scope='session', name='differential_tmp')
def differential_tmp_fixture(tmp_path_factory):
  return str(tmp_path_factory.mktemp('differential'))


@pytest.mark.parametrize('case', list(_cases()))
def test_same_outcome_as_dmreverb(case, differential_tmp):
  reason = _dmreverb_unavailable()
  if reason:
    pytest.skip(reason)
  module, name = case.split('.', 1)
  if module.startswith('tf') and importlib.util.find_spec('tensorflow') is None:
    pytest.skip('TensorFlow is not installed')
  ours, theirs = _outcomes(module, differential_tmp)
  for side, outcomes in (('ours', ours), ('dm-reverb', theirs)):
    if 'failed' in outcomes:
      pytest.fail(f'{side}: {outcomes["failed"]}')
  if case in DELIBERATE:
    phrase = DELIBERATE[case]
    assert phrase in _MIGRATION_DOC.read_text(), (
        f'{case} is listed as a deliberate difference, but docs/migration.md '
        f'does not say {phrase!r}')
    assert ours[name] != theirs[name], (
        f'{case} is listed as deliberate but answers as dm-reverb: remove it '
        'from DELIBERATE')
    return
  assert ours[name] == theirs[name]
