"""reverb.Client and reverb.Server in one process, over both paths: the
in-process hand-over and gRPC (the `transport` fixture, conftest.py)."""

import os
import pickle
import threading
import time

import numpy as np
import pytest

import reverb
from reverb import specs

# Every blocking call in these tests is bounded (seconds).
TIMEOUT = 30


def uniform_table(name='my_table', max_size=100, min_size=1, **kwargs):
  return reverb.Table(
      name=name,
      sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(),
      max_size=max_size,
      rate_limiter=reverb.rate_limiters.MinSize(min_size),
      **kwargs)


@pytest.fixture(name='server')
def server_fixture(transport):
  del transport  # Clients of the test take its path.
  server = reverb.Server(tables=[
      uniform_table(),
      uniform_table('two', min_size=2),
      reverb.Table.queue('queue', 10),
      reverb.Table(
          name='prioritized',
          sampler=reverb.selectors.Prioritized(1.0),
          remover=reverb.selectors.Fifo(),
          max_size=100,
          rate_limiter=reverb.rate_limiters.MinSize(1)),
      uniform_table('limited', max_times_sampled=2),
      uniform_table(
          'signed',
          signature={
              'obs': specs.TensorSpec([3], np.float32),
              'id': specs.TensorSpec([], np.int64),
          }),
  ])
  yield server
  server.stop()


@pytest.fixture(name='client')
def client_fixture(server):
  return server.localhost_client()


def test_quickstart(server):
  # The seed quickstart, verbatim (apart from the server fixture).
  client = reverb.Client(f'localhost:{server.port}')
  client.insert([0, 1], priorities={'my_table': 1.0})
  samples = list(client.sample('my_table', num_samples=2))
  assert len(samples) == 2
  for sample in samples:
    assert len(sample) == 1  # One timestep.
    step = sample[0]
    assert isinstance(step, reverb.ReplaySample)
    assert step.info.probability == 1.0
    assert step.info.table_size == 1
    assert step.info.priority == 1.0
    np.testing.assert_array_equal(step.data[0], np.array(0))
    np.testing.assert_array_equal(step.data[1], np.array(1))
  assert [s[0].info.times_sampled for s in samples] == [1, 2]
  assert samples[0][0].info.key == samples[1][0].info.key


def test_sample_info_and_data_types(client):
  client.insert([np.int64(7), np.float32(2.5)], priorities={'my_table': 3.0})
  [step] = next(client.sample('my_table', timeout=TIMEOUT))
  info = step.info
  assert isinstance(info, reverb.SampleInfo)
  assert [type(v) for v in info] == [int, float, int, float, int]
  assert info.priority == 3.0
  assert step.data[0].shape == () and step.data[0].dtype == np.int64
  assert step.data[1].dtype == np.float32 and step.data[1] == 2.5
  whole = next(client.sample('my_table', emit_timesteps=False, timeout=TIMEOUT))
  assert whole.data[0].shape == (1,)
  np.testing.assert_array_equal(whole.data[0], [7])


@pytest.mark.parametrize('dtype', [
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64,
    np.complex128
])
def test_numeric_dtypes_round_trip(client, dtype):
  value = (np.arange(12).reshape(3, 4) % 2 == 1 if dtype == np.bool_ else
           (np.arange(12).reshape(3, 4) * 3).astype(dtype))
  client.insert(value, priorities={'my_table': 1.0})
  [step] = next(client.sample('my_table', timeout=TIMEOUT))
  assert step.data[0].dtype == value.dtype
  np.testing.assert_array_equal(step.data[0], value)


def test_strings_come_back_as_bytes(client):
  client.insert([np.array(['a', 'bé']), np.array([b'\x00\xff', b''])],
                priorities={'my_table': 1.0})
  [step] = next(client.sample('my_table', timeout=TIMEOUT))
  assert step.data[0].dtype == object
  assert list(step.data[0]) == [b'a', 'bé'.encode('utf-8')]
  assert list(step.data[1]) == [b'\x00\xff', b'']


def test_writer_sequences_and_delta_encoding(client):
  frames = np.random.RandomState(0).randint(
      0, 255, size=(6, 4, 4), dtype=np.uint8)
  for delta in (False, True):
    client.reset('queue')
    with client.writer(max_sequence_length=4, delta_encoded=delta,
                       chunk_length=3) as writer:
      writer.append_sequence({'frame': frames[:2], 'step': np.arange(2)})
      for t in range(2, 6):
        writer.append({'frame': frames[t], 'step': np.int64(t)})
      writer.create_item('queue', num_timesteps=4, priority=1.0)
      writer.create_item('queue', num_timesteps=1, priority=1.0)
    samples = list(client.sample('queue', num_samples=2, emit_timesteps=False,
                                 timeout=TIMEOUT))
    # Flattened with dict keys sorted: frame, step.
    np.testing.assert_array_equal(samples[0].data[0], frames[2:6])
    np.testing.assert_array_equal(samples[0].data[1], np.arange(2, 6))
    np.testing.assert_array_equal(samples[1].data[0], frames[5:6])


def test_writer_argument_errors(client):
  with pytest.raises(ValueError):
    client.writer(max_sequence_length=0)
  with pytest.raises(ValueError):
    client.writer(max_sequence_length=2, chunk_length=3)
  with pytest.raises(ValueError):
    client.writer(max_sequence_length=2, max_in_flight_items=0)
  writer = client.writer(max_sequence_length=2)
  writer.append([1])
  with pytest.raises(ValueError):
    writer.create_item('my_table', num_timesteps=0, priority=1.0)
  with pytest.raises(ValueError):
    writer.create_item('my_table', num_timesteps=2, priority=1.0)
  with pytest.raises(ValueError, match='nan'):
    writer.create_item('my_table', num_timesteps=1, priority=float('nan'))
  writer.close()
  with pytest.raises(ValueError):
    writer.close()
  with pytest.raises(ValueError):
    with writer:
      pass


def test_writer_drops_a_step_that_cannot_join_its_chunk(client):
  writer = client.writer(max_sequence_length=4, chunk_length=2)
  writer.append([np.zeros(2)])
  with pytest.raises(ValueError, match='mismatched shapes'):
    writer.append([np.zeros(3)])
  # Only the first step is left, and the writer goes on.
  with pytest.raises(ValueError, match='larger than number of buffered'):
    writer.create_item('my_table', num_timesteps=2, priority=1.0)
  writer.create_item('my_table', num_timesteps=1, priority=1.0)
  writer.close()
  [[sample]] = list(client.sample('my_table', timeout=TIMEOUT))
  np.testing.assert_array_equal(sample.data[0], np.zeros(2))


def test_writer_flush_keeps_steps_no_item_needs(client):
  writer = client.writer(max_sequence_length=4)
  writer.append([np.int32(1)])
  writer.append([np.int32(2)])
  writer.flush()
  assert 'index_within_episode=0,' in repr(writer)  # Nothing chunked yet.
  writer.append([np.int32(3)])
  writer.create_item('my_table', num_timesteps=3, priority=1.0)
  writer.flush()
  assert 'index_within_episode=3,' in repr(writer)
  writer.close()
  [steps] = list(client.sample('my_table', timeout=TIMEOUT))
  assert [int(s.data[0]) for s in steps] == [1, 2, 3]


def test_steps_are_stored_as_they_were_appended(client):
  # The writers read a step's arrays when it is appended (a step that makes
  # a chunk on its own is compressed from them at once, others are copied):
  # what the caller writes into the same array afterwards is not stored.
  step = np.zeros(4096, np.int32)
  for chunk_length in (1, 3):
    client.reset('queue')
    with client.writer(max_sequence_length=chunk_length,
                       chunk_length=chunk_length) as writer:
      for t in range(6):
        step[:] = t
        writer.append(step)
        writer.create_item('queue', num_timesteps=1, priority=1.0)
        step[:] = -1
    for t in range(6, 9):
      step[:] = t
      client.insert(step, priorities={'queue': 1.0})
      step[:] = -1
    samples = list(client.sample('queue', num_samples=9, emit_timesteps=False,
                                 timeout=TIMEOUT))
    for t, sample in enumerate(samples):
      np.testing.assert_array_equal(sample.data[0], np.full((1, 4096), t))


def test_insert_errors(client):
  with pytest.raises(ValueError, match='priorities'):
    client.insert([1], priorities={})
  with pytest.raises(ValueError, match="table 'nope'"):
    client.insert([1], priorities={'nope': 1.0})
  with pytest.raises(RuntimeError, match='nope was not found'):
    next(client.sample('nope', timeout=TIMEOUT))
  with pytest.raises(RuntimeError, match='nope was not found'):
    client.mutate_priorities('nope', updates={1: 1.0})
  with pytest.raises(RuntimeError, match='nope was not found'):
    client.reset('nope')


def test_signature_checks_and_unpacking(client):
  step = {'obs': np.ones(3, np.float32), 'id': np.int64(4)}
  client.insert(step, priorities={'signed': 1.0})
  with pytest.raises(ValueError, match='signature'):
    client.insert({'obs': np.ones(2, np.float32), 'id': np.int64(4)},
                  priorities={'signed': 1.0})
  with pytest.raises(ValueError, match='signature'):
    client.insert([np.ones(3, np.float64), np.int64(4)],
                  priorities={'signed': 1.0})
  [sample] = next(client.sample('signed', unpack_as_table_signature=True,
                                timeout=TIMEOUT))
  assert set(sample.data) == {'obs', 'id'}
  np.testing.assert_array_equal(sample.data['obs'], step['obs'])
  assert sample.data['id'] == 4
  assert client.server_info()['signed'].signature['obs'].shape == (3,)
  with pytest.raises(ValueError):
    next(client.sample('nope', unpack_as_table_signature=True))


def test_sample_timeout_raises_deadline_exceeded(client):
  start = time.monotonic()
  with pytest.raises(reverb.DeadlineExceededError):
    next(client.sample('my_table', timeout=0.2))
  assert time.monotonic() - start < TIMEOUT


def test_sample_blocks_until_rate_limiter_allows(client):
  client.insert([1], priorities={'two': 1.0})
  result = []
  sampler = threading.Thread(
      target=lambda: result.extend(client.sample('two', timeout=TIMEOUT)))
  sampler.start()
  time.sleep(0.3)
  assert not result, 'sampled before the table reached min_size'
  client.insert([2], priorities={'two': 1.0})
  sampler.join(TIMEOUT)
  assert len(result) == 1


def test_max_times_sampled(client):
  client.insert([1], priorities={'limited': 1.0})
  samples = list(client.sample('limited', num_samples=2, timeout=TIMEOUT))
  assert [s[0].info.times_sampled for s in samples] == [1, 2]
  assert [s[0].info.table_size for s in samples] == [1, 1]
  assert client.server_info()['limited'].current_size == 0


def test_priorities_mutations_and_reset(client):
  for i in range(3):
    client.insert([i], priorities={'prioritized': 1.0})
  keys = {
      int(s[0].data[0]): s[0].info.key
      for s in client.sample('prioritized', num_samples=60, timeout=TIMEOUT)
  }
  assert set(keys) == {0, 1, 2}
  # Deletes apply before updates; unknown keys are ignored.
  client.mutate_priorities(
      'prioritized', updates={keys[0]: 0.0, keys[1]: 5.0, 12345: 1.0},
      deletes=[keys[2], 999])
  samples = list(client.sample('prioritized', num_samples=20, timeout=TIMEOUT))
  assert {s[0].info.key for s in samples} == {keys[1]}
  assert all(s[0].info.priority == 5.0 and s[0].info.probability == 1.0
             for s in samples)
  assert client.server_info()['prioritized'].current_size == 2
  client.reset('prioritized')
  info = client.server_info()['prioritized']
  assert info.current_size == 0
  assert info.rate_limiter_info.insert_stats.completed == 0


def test_negative_priority_fails_only_its_insert(client):
  with pytest.raises(Exception):
    client.insert([1], priorities={'prioritized': -1.0})
  client.insert([2], priorities={'prioritized': 1.0})
  [step] = next(client.sample('prioritized', timeout=TIMEOUT))
  assert step.data[0] == 2


def test_server_info(client):
  info = client.server_info(timeout=TIMEOUT)
  assert set(info) == {'my_table', 'two', 'queue', 'prioritized', 'limited',
                       'signed'}
  assert isinstance(info['my_table'], reverb.reverb_types.TableInfo)
  assert info['my_table'].max_size == 100
  assert info['queue'].sampler_options.fifo


def test_server_info_times_out_without_server():
  client = reverb.Client('localhost:1')
  with pytest.raises(reverb.DeadlineExceededError):
    client.server_info(timeout=1)


def test_checkpoint_into_the_default_temporary_directory(client):
  path = client.checkpoint(timeout=TIMEOUT)
  assert sorted(os.listdir(path)) == [
      'DONE', 'chunks.tfrecord', 'items.tfrecord', 'tables.tfrecord']


def test_client_pickles(client):
  copy = pickle.loads(pickle.dumps(client))
  assert copy.server_address == client.server_address
  assert repr(copy) == f'Client, server_address={client.server_address}'
  assert 'my_table' in copy.server_info()


def test_queue_order_and_many_threads(client):
  values = list(range(10))
  for v in values:
    client.insert([v], priorities={'queue': 1.0})
  out = [int(s[0].data[0]) for s in client.sample('queue', num_samples=10,
                                                   timeout=TIMEOUT)]
  assert out == values

  def write(offset):
    for i in range(50):
      client.insert([offset + i], priorities={'my_table': 1.0})

  writers = [threading.Thread(target=write, args=(k * 100,)) for k in range(4)]
  for w in writers:
    w.start()
  sampled = []
  for _ in range(2):
    sampled.extend(client.sample('my_table', num_samples=50, timeout=TIMEOUT))
  for w in writers:
    w.join(TIMEOUT)
  assert len(sampled) == 100
  assert client.server_info()['my_table'].current_size == 100


def test_stopping_server_ends_blocked_sample(server, client):
  errors = []

  def sample():
    try:
      next(client.sample('my_table'))  # No timeout: blocked on min_size.
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  thread = threading.Thread(target=sample)
  thread.start()
  time.sleep(0.3)
  server.stop()
  thread.join(TIMEOUT)
  assert not thread.is_alive(), 'sample still blocked after the server stopped'
  assert len(errors) == 1


def test_server_arguments():
  with pytest.raises(ValueError):
    reverb.Server(tables=[])
  with pytest.raises(ValueError):
    reverb.Server(tables=[uniform_table('a'), uniform_table('a')])
  with reverb.Server([uniform_table()]) as server:
    assert server.port > 0
    assert 'localhost' in repr(server)
    done = threading.Thread(target=server.wait)
    done.start()
    server.stop()
    done.join(TIMEOUT)
    assert not done.is_alive()
    server.stop()  # Idempotent.


def test_bind_address_from_argument_and_environment(monkeypatch):
  with reverb.Server([uniform_table()], bind_address='0.0.0.0') as server:
    reverb.Client(f'127.0.0.1:{server.port}').server_info(timeout=TIMEOUT)
    assert '0.0.0.0' in repr(server)
  monkeypatch.setenv('REVERB_BIND_ADDRESS', '127.0.0.1')
  with reverb.Server([uniform_table()]) as server:
    assert '127.0.0.1' in repr(server)
    reverb.Client(f'127.0.0.1:{server.port}').server_info(timeout=TIMEOUT)


def test_writer_waits_for_room_when_max_in_flight_items_are_unconfirmed(
    client):
  # Queue of 10: items beyond 10 wait in the server's rate limiter, so they
  # stay unconfirmed.
  writer = client.writer(max_sequence_length=1, max_in_flight_items=1)
  for i in range(11):
    writer.append([np.int64(i)])
    writer.create_item('queue', num_timesteps=1, priority=1.0)
  done = threading.Event()

  def one_more():
    writer.append([np.int64(11)])
    writer.create_item('queue', num_timesteps=1, priority=1.0)
    done.set()

  thread = threading.Thread(target=one_more)
  thread.start()
  assert not done.wait(0.5), 'created an item past max_in_flight_items'
  # One sample makes room for item 10; once it is confirmed, item 11 is sent
  # (and waits in the full queue).
  list(client.sample('queue', num_samples=1, timeout=TIMEOUT))
  assert done.wait(TIMEOUT)
  thread.join(TIMEOUT)
  with pytest.raises(reverb.DeadlineExceededError):
    writer.flush(timeout=0.3)  # Item 11 waits for room in the queue.
  list(client.sample('queue', num_samples=10, timeout=TIMEOUT))
  writer.flush(timeout=TIMEOUT)
  writer.close()


def test_writer_many_overlapping_items_arrive_intact_and_in_order():
  # Requests queue up behind the sender thread and go out merged; every
  # item must still find its chunks (sent once, kept while referenced).
  server = reverb.Server([reverb.Table.queue('fifo', 2000)])
  try:
    client = server.localhost_client()
    with client.writer(max_sequence_length=3, chunk_length=2,
                       max_in_flight_items=500) as writer:
      for t in range(1000):
        writer.append({'obs': np.full([2], t, np.float32), 'step': np.int64(t)})
        if t >= 2:
          writer.create_item('fifo', num_timesteps=3, priority=1.0)
    assert client.server_info()['fifo'].current_size == 998
    samples = list(client.sample('fifo', num_samples=998,
                                 emit_timesteps=False, timeout=TIMEOUT))
    for t, sample in zip(range(2, 1000), samples):
      np.testing.assert_array_equal(sample.data[1], [t - 2, t - 1, t])
      np.testing.assert_array_equal(sample.data[0][:, 0], [t - 2, t - 1, t])
  finally:
    server.stop()
