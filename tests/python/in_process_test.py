"""The in-process path: a server and a client in one process.

A client of a server in its own process is handed the server's tables
(InitializeConnection): its writers insert into them and its samplers
sample them directly; TableInfo's `num_local_inserts` and
`num_local_samples` (extension fields, read here from the raw ServerInfo)
count the items and samples that took that way. Clients elsewhere, and a
client with REVERB_IN_PROCESS=0, use gRPC and must see the same items and
samples, the same errors and the same ends when the server stops.
"""

import os
import subprocess
import sys
import textwrap
import threading
import time

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


def _table_info(client, table):
  _, serialized = client._client.ServerInfo(30_000)  # pylint: disable=protected-access
  infos = [schema_pb2.TableInfo.FromString(s) for s in serialized]
  return {info.name: info for info in infos}[table]


def _local_samples(client, table):
  return _table_info(client, table).num_local_samples


def _local_inserts(client, table):
  return _table_info(client, table).num_local_inserts


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


def test_writers_of_a_client_in_process_insert_directly():
  server = reverb.Server(_tables('t', max_times_sampled=0))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client, 't', 3)  # Client.insert.
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
      for i in range(4):
        writer.append({'x': np.full((2,), i, np.float32)})
        if i:
          writer.create_item('t', 1.0, {'x': writer.history['x'][-2:]})
    with client.writer(max_sequence_length=2) as writer:
      writer.append([np.int64(7)])
      writer.create_item('t', 1, 1.0)
    assert _local_inserts(client, 't') == 7
    assert client.server_info()['t'].current_size == 7
  finally:
    server.stop()


def _items(client, table, n):
  """`n` samples of a Fifo table, each item once (max_times_sampled=1)."""
  return [(s.info.key, s.info.priority, s.info.times_sampled,
           [np.asarray(d) for d in s.data])
          for s in client.sample(table, num_samples=n, emit_timesteps=False)]


def test_items_are_those_of_the_grpc_path(grpc_only):
  """The same writes, over gRPC into one table and directly into another,
  store the same items (read back over gRPC, in insertion order)."""
  server = reverb.Server(_tables('over_grpc', 'local', max_times_sampled=1))
  try:
    grpc_client = reverb.Client(f'localhost:{server.port}')
    os.environ.pop('REVERB_IN_PROCESS')
    local_client = reverb.Client(f'localhost:{server.port}')
    os.environ['REVERB_IN_PROCESS'] = '0'  # For the fixture's teardown.
    for client, table in ((grpc_client, 'over_grpc'), (local_client, 'local')):
      _fill(client, table, 5)
      with client.trajectory_writer(num_keep_alive_refs=3) as writer:
        for i in range(6):
          writer.append({'a': np.arange(i, i + 4, dtype=np.int32),
                         'b': np.float64(i) / 3})
          if i >= 2:
            writer.create_item(table, 0.5 + i, {
                'a': writer.history['a'][-3:], 'b': writer.history['b'][-1]})
    assert _local_inserts(grpc_client, 'over_grpc') == 0
    assert _local_inserts(grpc_client, 'local') == 9
    expected = _items(grpc_client, 'over_grpc', 9)
    got = _items(grpc_client, 'local', 9)
    assert len(expected) == len(got) == 9
    for (_, ep, et, ed), (_, gp, gt, gd) in zip(expected, got):
      assert (ep, et) == (gp, gt)
      assert len(ed) == len(gd)
      for a, b in zip(ed, gd):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
  finally:
    server.stop()


def test_unknown_table_is_the_same_error_on_both_paths(transport):
  server = reverb.Server(_tables('t'))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    with pytest.raises(ValueError) as error:
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        writer.append({'x': np.float32(1)})
        writer.create_item('nope', 1.0, {'x': writer.history['x'][-1]})
        writer.flush(timeout_ms=30_000)
    assert 'nope' in str(error.value), transport
  finally:
    server.stop()


def _queue_server():
  return reverb.Server([reverb.Table.queue('q', 2)])


def test_writer_blocked_by_the_rate_limiter_times_out(transport):
  server = _queue_server()
  try:
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(3):
        writer.append({'x': np.int32(i)})
        writer.create_item('q', 1.0, {'x': writer.history['x'][-1]})
      with pytest.raises(reverb.DeadlineExceededError):
        writer.flush(timeout_ms=200)
      # A sample makes room: the third item goes in and is confirmed.
      assert len(list(client.sample('q', num_samples=1,
                                   emit_timesteps=False))) == 1
      writer.flush(timeout_ms=30_000)
    assert client.server_info()['q'].current_size == 2
  finally:
    server.stop()


def test_server_stop_ends_a_writer_blocked_by_the_rate_limiter(transport):
  """Server.stop() returns although a writer waits on a full queue, and the
  writer's flush then fails as on the gRPC path."""
  server = _queue_server()
  client = reverb.Client(f'localhost:{server.port}')
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  for i in range(3):
    writer.append({'x': np.int32(i)})
    writer.create_item('q', 1.0, {'x': writer.history['x'][-1]})
  with pytest.raises(reverb.DeadlineExceededError):
    writer.flush(timeout_ms=200)
  stopper = threading.Thread(target=server.stop, daemon=True)
  stopper.start()
  stopper.join(timeout=60)
  assert not stopper.is_alive(), 'Server.stop() hung'
  with pytest.raises((RuntimeError, reverb.DeadlineExceededError)):
    writer.flush(timeout_ms=30_000)
  writer.close()  # Returns: the failure was reported by flush.


def test_server_stop_ends_a_blocked_local_sample():
  server = reverb.Server(_tables('t'))
  client = reverb.Client(f'localhost:{server.port}')
  errors = []

  def sample():
    try:
      list(client.sample('t', num_samples=1))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  sampler = threading.Thread(target=sample, daemon=True)
  sampler.start()
  time.sleep(0.2)
  server.stop()
  sampler.join(timeout=60)
  assert not sampler.is_alive()
  assert len(errors) == 1


_REMOTE_SHARD = '''
import reverb
server = reverb.Server([reverb.Table(
    't', reverb.selectors.Uniform(), reverb.selectors.Fifo(), max_size=1000,
    rate_limiter=reverb.rate_limiters.MinSize(1))])
print(server.port, flush=True)
server.wait()
'''


def test_a_sharded_client_uses_its_in_process_shard_directly():
  """A client over two shards, one in this process and one in another:
  the local one's items and samples go directly (counted there), the other's
  over gRPC; the samples hold both shards' items; when the local server
  stops, writing goes on on the other one."""
  local = reverb.Server([reverb.Table(
      't', reverb.selectors.Uniform(), reverb.selectors.Fifo(), max_size=1000,
      rate_limiter=reverb.rate_limiters.MinSize(1))])
  remote = subprocess.Popen([sys.executable, '-c', _REMOTE_SHARD],
                            stdout=subprocess.PIPE, text=True)
  try:
    remote_address = f'localhost:{int(remote.stdout.readline())}'
    local_address = f'localhost:{local.port}'
    client = reverb.Client([local_address, remote_address])
    # Four writers open at once: two per shard. Writer w writes ids
    # 100 * w + i.
    writers = [client.trajectory_writer(num_keep_alive_refs=1)
               for _ in range(4)]
    for i in range(25):
      for w, writer in enumerate(writers):
        writer.append({'id': np.int64(100 * w + i)})
        writer.create_item('t', 1.0, {'id': writer.history['id'][-1]})
    for writer in writers:
      writer.flush(timeout_ms=30_000)
      writer.close()
    local_info = _table_info(reverb.Client(local_address), 't')
    remote_info = _table_info(reverb.Client(remote_address), 't')
    assert local_info.current_size == 50
    assert remote_info.current_size == 50
    assert local_info.num_local_inserts == 50
    assert remote_info.num_local_inserts == 0

    ids = {int(np.asarray(s.data[0]).reshape(-1)[0]) for s in client.sample(
        't', num_samples=1000, emit_timesteps=False, timeout=30)}
    assert ids <= {100 * w + i for w in range(4) for i in range(25)}
    assert len(ids) > 60  # Of both shards' 50 (each drawn ~10 times).
    local_samples = _table_info(reverb.Client(local_address),
                                't').num_local_samples
    assert 300 < local_samples < 700  # Half of 1000, give or take.
    assert _table_info(reverb.Client(remote_address),
                       't').num_local_samples == 0

    # A key of the local shard: changed there, directly.
    key = next(reverb.Client(local_address).sample(
        't', emit_timesteps=False)).info.key
    client.mutate_priorities('t', updates={int(key): 4.0}, timeout=30)
    priorities = {int(s.info.key): float(s.info.priority) for s in reverb.Client(
        local_address).sample('t', num_samples=500, emit_timesteps=False)}
    assert priorities[int(key)] == 4.0

    local.stop()
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(10):
        writer.append({'id': np.int64(1000 + i)})
        writer.create_item('t', 1.0, {'id': writer.history['id'][-1]})
      writer.flush(timeout_ms=30_000)
    assert reverb.Client(remote_address).server_info(
        timeout=30)['t'].current_size == 60
  finally:
    local.stop()
    remote.kill()
    remote.wait(30)
