"""Interoperability with upstream dm-reverb 0.14, over gRPC, both ways.

dm-reverb runs in its own venv (`.ci/dmreverb_venv` makes it; these tests skip
without it) as a subprocess playing a role of dmreverb_peer.py:

- dm-reverb's Client drives OUR Server through the peer's client scenario,
  over TCP and over our server's unix domain socket (`unix:PATH`); then our
  Client checks the state it left (data dm-reverb encoded).
- OUR Client drives a dm-reverb Server through the same scenario; then
  dm-reverb's Client checks the state ours left (data our client encoded: a
  dm-reverb server stores chunks without parsing them).
- A checkpoint dm-reverb saved is restored by OUR Server, and one ours saved
  by dm-reverb's, each read back item by item (keys, priorities,
  times_sampled, data) and counter by counter.

The scenario, tables and payloads live in dmreverb_peer.py, which this file
imports, so both sides check the same things. The payloads include
incompressible bytes, which our writers store as one snappy literal
(compression.h): dm-reverb reads them from our server, from its own server
our client filled, and from our checkpoints.
"""

import collections
import contextlib
import functools
import importlib.util
import io
import json
import os
import pathlib
import subprocess
import time
from typing import Optional

import numpy as np
import pytest

import reverb
from reverb import cli

_HERE = pathlib.Path(__file__).resolve().parent
_PEER_SCRIPT = _HERE / 'dmreverb_peer.py'
_DMREVERB_PYTHON = _HERE.parent.parent / '.venv-dmreverb' / 'bin' / 'python'

# Every wait on the peer is bounded (seconds). The peer's own watchdog
# (--timeout) fires first, so a hang is reported with the peer's stacks.
_PEER_ROLE_TIMEOUT = 90
_PEER_PROCESS_TIMEOUT = 150
_SERVER_START_TIMEOUT = 120
# Our client's calls.
_SAMPLE_KW = {'timeout': 10}
_SERVER_INFO_KW = {'timeout': 10}
_CHECKPOINT_TIMEOUT = 30


def _load_peer():
  spec = importlib.util.spec_from_file_location('dmreverb_peer', _PEER_SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


peer = _load_peer()


def _peer_env(tmp_dir: Optional[pathlib.Path] = None):
  env = dict(os.environ)
  # `python -I` already ignores PYTHON* variables; drop them anyway so no
  # path to our package can leak into the dm-reverb interpreter.
  for name in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP'):
    env.pop(name, None)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'  # TensorFlow's start-up chatter.
  if tmp_dir is not None:
    # dm-reverb's Server makes a temporary checkpoint directory.
    env['TMPDIR'] = str(tmp_dir)
  return env


@functools.lru_cache(maxsize=None)
def _dmreverb_unavailable() -> Optional[str]:
  """Why dm-reverb cannot be used here, or None if it can."""
  hint = 'run .ci/dmreverb_venv to create it'
  if not _DMREVERB_PYTHON.exists():
    return f'dm-reverb venv missing ({_DMREVERB_PYTHON}); {hint}'
  try:
    proc = subprocess.run(
        [str(_DMREVERB_PYTHON), '-I', '-c', 'import reverb'],
        env=_peer_env(), capture_output=True, text=True, timeout=120,
        check=False)
  except (OSError, subprocess.TimeoutExpired) as e:
    return f'cannot run {_DMREVERB_PYTHON}: {e}; {hint}'
  if proc.returncode != 0:
    last = (proc.stderr.strip().splitlines() or ['?'])[-1]
    return f'{_DMREVERB_PYTHON} cannot import dm-reverb ({last}); {hint}'
  return None


@pytest.fixture(scope='module', name='dmreverb_python')
def dmreverb_python_fixture():
  reason = _dmreverb_unavailable()
  if reason:
    pytest.skip(reason)
  return str(_DMREVERB_PYTHON)


def _peer_command(python, *args):
  return [python, '-I', str(_PEER_SCRIPT), *args]


def _run_peer_role(python, tmp_path, role, *args):
  """Runs a client-side peer role to completion; returns its RESULT dict."""
  command = _peer_command(python, role, *args,
                          '--timeout', str(_PEER_ROLE_TIMEOUT))
  try:
    proc = subprocess.run(command, env=_peer_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True,
                          timeout=_PEER_PROCESS_TIMEOUT, check=False)
  except subprocess.TimeoutExpired as e:
    pytest.fail(f'dm-reverb peer {role!r} did not finish in '
                f'{_PEER_PROCESS_TIMEOUT} s (killed).\n'
                f'stdout:\n{e.stdout}\nstderr:\n{e.stderr}')
  results = [line[len(peer.RESULT_PREFIX):]
             for line in proc.stdout.splitlines()
             if line.startswith(peer.RESULT_PREFIX)]
  if proc.returncode != 0 or len(results) != 1:
    pytest.fail(f'dm-reverb peer {role!r} failed (exit {proc.returncode}).\n'
                f'stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-5000:]}')
  return json.loads(results[0])


@contextlib.contextmanager
def _peer_server(python, tmp_path):
  """A dm-reverb Server holding peer.TABLES in a subprocess; yields its port."""
  port_file = tmp_path / 'port'
  log_path = tmp_path / 'dmreverb_server.log'
  with open(log_path, 'w') as log:
    proc = subprocess.Popen(
        _peer_command(python, 'server', '--port-file', str(port_file)),
        env=_peer_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL,
        stdout=log, stderr=subprocess.STDOUT)
    try:
      deadline = time.monotonic() + _SERVER_START_TIMEOUT
      while not port_file.exists():
        if proc.poll() is not None:
          pytest.fail(f'dm-reverb server exited ({proc.returncode}) before '
                      f'writing its port:\n{log_path.read_text()}')
        if time.monotonic() > deadline:
          pytest.fail(f'dm-reverb server wrote no port in '
                      f'{_SERVER_START_TIMEOUT} s:\n{log_path.read_text()}')
        time.sleep(0.1)
      yield int(port_file.read_text())
    finally:
      proc.terminate()
      try:
        proc.wait(timeout=10)
      except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.parametrize('transport', ['tcp', 'unix'])
def test_dmreverb_client_drives_our_server(dmreverb_python, tmp_path,
                                           transport):
  if transport == 'unix':  # Our server's unix domain socket only.
    path = str(tmp_path / 'reverb.sock')
    server = reverb.Server(tables=peer.make_tables(reverb), port=None,
                           unix_socket_path=path)
    address = f'unix:{path}'
  else:
    server = reverb.Server(tables=peer.make_tables(reverb), port=None)
    address = f'localhost:{server.port}'
  try:
    state = _run_peer_role(dmreverb_python, tmp_path, 'client',
                           '--address', address)
    assert state['ok']
    assert state['prio_priority'] == 10.0
    # What dm-reverb's client wrote, and the priority it set, read by ours.
    peer.check_final_state(server.localhost_client(), state,
                           sample_kw=_SAMPLE_KW,
                           server_info_kw=_SERVER_INFO_KW)
  finally:
    server.stop()


def test_our_client_drives_dmreverb_server(dmreverb_python, tmp_path):
  with _peer_server(dmreverb_python, tmp_path) as port:
    address = f'localhost:{port}'
    state = peer.run_client_scenario(reverb, address, sample_kw=_SAMPLE_KW,
                                     server_info_kw=_SERVER_INFO_KW)
    assert state['sizes'] == {'uniform': len(peer.payloads()), 'prio': 1,
                              'queue': 0}
    # What our client wrote, decoded by dm-reverb's client.
    result = _run_peer_role(dmreverb_python, tmp_path, 'verify',
                            '--address', address,
                            '--state', json.dumps(state))
    assert result == {'ok': True}


def test_cli_checkpoint_of_a_dmreverb_server_works_without_a_bar(
    dmreverb_python, tmp_path, capsys):
  with _peer_server(dmreverb_python, tmp_path) as port:
    out = io.StringIO()
    assert cli.main(['checkpoint', f'localhost:{port}'], out=out) == 0
  assert out.getvalue().count('\n') == 1 and out.getvalue().strip()
  assert 'saving' not in capsys.readouterr().err


def _checkpoint(client):
  return client.checkpoint(timeout=_CHECKPOINT_TIMEOUT)


def test_our_server_restores_a_dmreverb_checkpoint(dmreverb_python, tmp_path):
  root = tmp_path / 'checkpoints'
  saved = _run_peer_role(dmreverb_python, tmp_path, 'checkpoint-save',
                         '--dir', str(root))
  assert pathlib.Path(saved['path']).parent == root
  server = reverb.Server(
      tables=peer.make_tables(reverb),
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(root)))
  try:
    contents = peer.read_checkpoint_contents(
        server.localhost_client(), sample_kw=_SAMPLE_KW,
        server_info_kw=_SERVER_INFO_KW)
  finally:
    server.stop()
  peer.check_checkpoint_contents(saved['state'], contents)


# Our extension: any zlib level (0 writes stored blocks) is still a ZLIB
# TFRecord file to dm-reverb.
@pytest.mark.parametrize('zlib_level', [1, 0, 9])
def test_dmreverb_restores_our_checkpoint(dmreverb_python, tmp_path,
                                          zlib_level):
  root = tmp_path / 'checkpoints'
  server = reverb.Server(
      tables=peer.make_tables(reverb),
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          str(root), zlib_level=zlib_level))
  try:
    client = server.localhost_client()
    state = peer.fill_for_checkpoint(client, sample_kw=_SAMPLE_KW,
                                     server_info_kw=_SERVER_INFO_KW)
    path = _checkpoint(client)
  finally:
    server.stop()
  assert pathlib.Path(path).parent == root
  contents = _run_peer_role(dmreverb_python, tmp_path, 'checkpoint-load',
                            '--dir', str(root))
  peer.check_checkpoint_contents(state, contents)


def test_dmreverb_server_is_a_shard_our_client_samples(dmreverb_python,
                                                       tmp_path):
  # dm-reverb reports neither priority mass nor samples_blocked: its Uniform
  # table weighs by its size, and both shards are sampled.
  server = reverb.Server(tables=peer.make_tables(reverb), port=None)
  try:
    with _peer_server(dmreverb_python, tmp_path) as port:
      ours, theirs = f'localhost:{server.port}', f'localhost:{port}'
      for shard, value in ((ours, 1), (theirs, 2)):
        for _ in range(3):
          reverb.Client(shard).insert(np.int64(value),
                                      priorities={'uniform': 1.0})
      client = reverb.Client([ours, theirs])
      assert client.server_info(timeout=10)['uniform'].current_size == 6
      seen = collections.Counter()
      for sample in client.sample('uniform', num_samples=400, timeout=30):
        seen[int(sample[0].data[0])] += 1
        assert sample[0].info.table_size == 6
      # Each shard holds half the items: 200 expected of each, and fewer
      # than 120 has a probability below 1e-14.
      assert seen[1] > 120 and seen[2] > 120, seen
  finally:
    server.stop()


def test_reverb_command_shows_a_dmreverb_server(dmreverb_python, tmp_path):
  # pylint: disable-next=g-import-not-at-top
  from reverb import cli
  with _peer_server(dmreverb_python, tmp_path) as port:
    out = io.StringIO()
    assert cli.main(['info', '--json', f'localhost:{port}'], out=out) == 0
  tables = {t['table']: t for t in json.loads(out.getvalue())}
  assert set(tables) == {name for name, _, _ in peer.TABLES}
  assert tables['prio']['sampler'] == f'Prioritized({peer.PRIORITY_EXPONENT})'
  assert tables['queue']['max_size'] == peer.MAX_SIZE
  assert tables['uniform']['blocks'] == ['samples']  # Empty, MinSize(1).
