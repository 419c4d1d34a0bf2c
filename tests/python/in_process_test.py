"""The in-process path: a server and a client in one process.

A client of a server in its own process is handed the server's tables
(InitializeConnection) and samples them directly; TableInfo's
`num_local_samples` (an extension field, read here from the raw ServerInfo)
counts the samples taken that way. Clients elsewhere, and a client with
REVERB_IN_PROCESS=0, use gRPC and must see the same samples.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import reverb
from reverb.cc import schema_pb2


def _tables(*names, max_times_sampled=2):
  return [
      reverb.Table(name, reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   max_size=1000, max_times_sampled=max_times_sampled,
                   rate_limiter=reverb.rate_limiters.MinSize(1))
      for name in names
  ]


def _local_samples(client, table):
  _, serialized = client._client.ServerInfo(30_000)  # pylint: disable=protected-access
  infos = [schema_pb2.TableInfo.FromString(s) for s in serialized]
  return {info.name: info.num_local_samples for info in infos}[table]


@pytest.fixture
def grpc_only(monkeypatch):
  """Clients made while this is in use take the gRPC path."""
  monkeypatch.setenv('REVERB_IN_PROCESS', '0')
  yield
  monkeypatch.delenv('REVERB_IN_PROCESS')


def _fill(client, table, n):
  for i in range(n):
    client.insert([np.full((3,), i, np.int32), np.float64(i)], {table: 1.0 + i})


def test_client_of_localhost_samples_directly():
  server = reverb.Server(_tables('t'))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client, 't', 3)
    samples = list(client.sample('t', num_samples=6, emit_timesteps=False))
    keys = [s.info.key for s in samples]
    assert len(set(keys)) == 3
    for s in samples:
      assert s.data[0].shape == (1, 3)
    assert _local_samples(client, 't') == 6
  finally:
    server.stop()


def test_localhost_client_samples_directly():
  server = reverb.Server(_tables('t'))
  try:
    client = server.localhost_client()
    _fill(client, 't', 2)
    list(client.sample('t', num_samples=4))
    assert _local_samples(client, 't') == 4
  finally:
    server.stop()


def test_samples_are_those_of_the_grpc_path(grpc_only):
  """Two tables with the same items; one sampled over gRPC, one directly."""
  server = reverb.Server(_tables('over_grpc', 'local'))
  try:
    grpc_client = reverb.Client(f'localhost:{server.port}')
    os.environ.pop('REVERB_IN_PROCESS')
    local_client = reverb.Client(f'localhost:{server.port}')
    for table in ('over_grpc', 'local'):
      _fill(grpc_client, table, 10)
    expected = list(grpc_client.sample('over_grpc', num_samples=20,
                                       emit_timesteps=False))
    got = list(local_client.sample('local', num_samples=20,
                                   emit_timesteps=False))
    assert _local_samples(local_client, 'over_grpc') == 0
    assert _local_samples(local_client, 'local') == 20
    for e, g in zip(expected, got):
      assert e.info.probability == g.info.probability
      assert e.info.table_size == g.info.table_size
      assert e.info.priority == g.info.priority
      assert e.info.times_sampled == g.info.times_sampled
      assert len(e.data) == len(g.data)
      for a, b in zip(e.data, g.data):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    os.environ['REVERB_IN_PROCESS'] = '0'  # For the fixture's teardown.
  finally:
    server.stop()


def test_rate_limiter_timeout_on_the_local_path():
  server = reverb.Server(_tables('t'))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    with pytest.raises(reverb.DeadlineExceededError):
      list(client.sample('t', num_samples=1, timeout=0.05))
  finally:
    server.stop()


def test_replay_iterator_takes_the_local_path():
  server = reverb.Server(_tables('t', max_times_sampled=0))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client, 't', 2)
    with reverb.ReplayIterator(f'localhost:{server.port}', 't', batch_size=4,
                               max_samples=8) as iterator:
      batches = list(iterator)
    assert [len(b.info.key) for b in batches] == [4, 4]
    assert _local_samples(client, 't') >= 8
  finally:
    server.stop()


def test_client_in_another_process_uses_grpc():
  server = reverb.Server(_tables('t'))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client, 't', 2)
    script = textwrap.dedent(f'''
        import reverb
        client = reverb.Client('localhost:{server.port}')
        samples = list(client.sample('t', num_samples=3, emit_timesteps=False))
        print(sorted(int(s.data[0][0, 0]) for s in samples))
    ''')
    out = subprocess.run([sys.executable, '-c', script], check=True,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == '[0, 0, 1]'
    assert _local_samples(client, 't') == 0
  finally:
    server.stop()
