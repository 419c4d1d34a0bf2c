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
DELIBERATE = {
    'structured_writer.infer_signature_of_strided_slices':
        'rounds the length down (2)',
    'structured_writer.a_field_given_twice_with_other_fields':
        'the failed append writes nothing',
    'structured_writer.reference_step_numpy_int_keys':
        'as by Python ints: `ref',
    'structured_writer.infer_signature_of_configs_without_structure':
        'Objects of type RepeatedCompositeContainer',
    'client.insert_into_known_and_unknown_table':
        'raises before inserting anything',
    'client.insert_with_negative_priority_into_prioritized':
        "kills the table's worker",
    'client.insert_without_columns': 'An item with no columns',
    'client.insert_after_the_server_stopped':
        'samplers and writers reconnect for 10 s',
    'client.sample_after_the_server_stopped':
        'samplers and writers reconnect for 10 s',
    'client.server_info_with_a_float_timeout':
        'takes fractions of a second too',
    'client.writer_create_item_of_negative_steps': 'shows `%d` unfilled',
    'client.writer_create_item_of_zero_steps': 'shows `%d` unfilled',
    'server.queue_of_negative_size': 'whose min_diff > max_diff',
    'server.rate_limiter_with_reversed_range': 'whose min_diff > max_diff',
    'server.rate_limiter_with_zero_min_size': 'aborts the process',
    'server.rate_limiter_with_zero_ratio': 'aborts the process',
    'server.server_with_negative_port': 'outside [0, 65535]',
    'server.server_with_port_above_65535': 'outside [0, 65535]',
    'server.server_with_port_zero': '`Server(port=0)`',
    'server.server_with_port_of_other_server':
        'while another server listens on P',
    'server.table_queue_of_negative_size': 'whose min_diff > max_diff',
    'tf_client.sample_info_shapes_in_graph':
        'the info fields are scalars',
    'tf_client.update_priorities_lengths_differ_in_graph':
        'ValueError when the graph is built',
    'trajectory_writer.dict_then_leaf': 'cannot grow into the history',
    'trajectory_writer.dict_then_list': 'cannot grow into the history',
    'trajectory_writer.leaf_then_dict': 'cannot grow into the history',
    'trajectory_writer.namedtuple_of_more_fields':
        'cannot grow into the history',
    'trajectory_writer.new_dict_in_a_list': 'grow a list by a nest',
    'trajectory_writer.int_dict_keys_grow': 'grow a list by a nest',
    'trajectory_writer.history_index_past_the_end': 'at or past the end',
    'trajectory_writer.history_slices_that_end_at_or_past_the_end':
        'at or past the end',
    'trajectory_writer.history_slices_up_to_an_expired_step':
        'slices without a start that reach an expired step',
    'trajectory_writer.history_numpy_integer_index': 'indexed by numpy integers',
    'trajectory_writer.configure_a_column_before_its_first_step':
        "before the column's first step",
    'trajectory_writer.end_episode_with_an_open_partial_step':
        'while a partial step is open',
}


def _load(path: pathlib.Path):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# Loading the runner puts its folder on sys.path, where the scenario modules
# find scenario_util.
_runner = _load(_RUNNER)


def _modules():
  return sorted(p.stem[len('scenarios_'):]
                for p in _SCENARIOS.glob('scenarios_*.py'))


def _cases():
  for module in _modules():
    scenarios = _load(_SCENARIOS / f'scenarios_{module}.py')
    for name in _runner.scenario_names(scenarios):
      yield f'{module}.{name}'


def _env(tmp_dir: str, ports: str = ''):
  env = dict(os.environ)
  if ports:
    env[_runner.PORTS_ENV] = ports
  for name in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP'):
    env.pop(name, None)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  env['TMPDIR'] = tmp_dir  # dm-reverb's Server makes a checkpoint directory.
  return env


def _run(command, ports: str, tmp_dir: str) -> dict:
  try:
    proc = subprocess.run(command, env=_env(tmp_dir, ports), cwd=tmp_dir,
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
  packages run at the same time, their servers on ports of two ranges."""
  ours = [sys.executable, str(_RUNNER), module]
  theirs = [str(_DMREVERB_PYTHON), '-I', str(_RUNNER), module]
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    results = list(pool.map(lambda args: _run(*args, tmp_dir),
                            [(ours, _runner.PORTS_OURS),
                             (theirs, _runner.PORTS_DMREVERB)]))
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
