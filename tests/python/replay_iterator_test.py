"""ReplayIterator: numpy batches with prefetching in C++, no TensorFlow."""

import threading
import time

import numpy as np
import pytest

import reverb
from reverb import specs

TIMEOUT = 30
SIGNATURE = {'obs': specs.TensorSpec([3], np.float32),
             'step': specs.TensorSpec([], np.int64)}


@pytest.fixture(name='server')
def server_fixture():
  server = reverb.Server([
      reverb.Table('replay', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 1000,
                   reverb.rate_limiters.MinSize(1), signature=SIGNATURE),
      reverb.Table.queue('queue', 1000),
  ])
  client = server.localhost_client()
  with client.trajectory_writer(num_keep_alive_refs=3) as writer:
    for t in range(20):
      writer.append({'obs': np.full([3], t, np.float32), 'step': np.int64(t)})
      writer.create_item('replay', 1.0, {'obs': writer.history['obs'][-1],
                                         'step': writer.history['step'][-1]})
      if t >= 2:  # Sequences of 3 and, every 5 steps, of 2.
        length = 2 if t % 5 == 0 else 3
        writer.create_item('queue', 1.0, writer.history['step'][-length:])
  yield server
  server.stop()


def address(server):
  return f'localhost:{server.port}'


def test_batches_are_stacked_and_shaped_as_the_signature(server):
  with reverb.ReplayIterator(address(server), 'replay', batch_size=8,
                             max_samples=20, num_workers=2) as iterator:
    batches = list(iterator)
  assert [len(b.info.key) for b in batches] == [8, 8, 4]
  for batch in batches:
    assert set(batch.data) == {'obs', 'step'}
    assert batch.data['obs'].shape == (len(batch.info.key), 3)
    assert batch.data['obs'].dtype == np.float32
    np.testing.assert_array_equal(batch.data['obs'][:, 0], batch.data['step'])
    assert batch.info.key.dtype == np.uint64
    assert batch.info.probability.dtype == np.float64
    assert batch.info.times_sampled.dtype == np.int32
    np.testing.assert_allclose(batch.info.probability, 1 / 20)
    assert (batch.info.table_size == 20).all()


def test_flat_columns_without_unpacking(server):
  iterator = reverb.ReplayIterator(address(server), 'replay', batch_size=2,
                                   max_samples=2,
                                   unpack_as_table_signature=False)
  [batch] = list(iterator)
  assert isinstance(batch.data, list) and len(batch.data) == 2
  assert batch.data[0].shape == (2, 3)  # Sorted keys: obs, step.


def test_rate_limiter_timeout_ends_iteration(server):
  # 18 items in the queue; a 200 ms timeout ends the iteration after them.
  iterator = reverb.ReplayIterator(address(server), 'queue', batch_size=1,
                                   rate_limiter_timeout_ms=200)
  start = time.monotonic()
  lengths = [len(b.data[0][0]) for b in iterator]
  assert time.monotonic() - start < TIMEOUT
  assert len(lengths) == 18
  assert lengths.count(2) == 3
  assert list(iterator) == []


def test_trajectories_of_different_lengths_need_batch_size_one(server):
  iterator = reverb.ReplayIterator(address(server), 'queue', batch_size=18,
                                   rate_limiter_timeout_ms=200)
  with pytest.raises(ValueError, match='batch_size=1'):
    next(iterator)


def test_errors(server):
  with pytest.raises(ValueError):
    reverb.ReplayIterator(address(server), 'replay', batch_size=0)
  with pytest.raises(ValueError, match='max_in_flight_bytes_per_worker'):
    reverb.ReplayIterator(address(server), 'replay', batch_size=1,
                          max_in_flight_bytes_per_worker=-1)
  with pytest.raises(ValueError, match='nope'):
    reverb.ReplayIterator(address(server), 'nope', batch_size=1)
  iterator = reverb.ReplayIterator(address(server), 'nope', batch_size=1,
                                   unpack_as_table_signature=False)
  with pytest.raises(RuntimeError, match='not found'):
    next(iterator)


def _samples_drawn(server):
  info = server.localhost_client().server_info()['replay']
  return info.rate_limiter_info.sample_stats.completed


def _drawn_ahead(server, **kwargs):
  """Samples the table served for one batch of 4 (and those drawn ahead)."""
  before = _samples_drawn(server)
  with reverb.ReplayIterator(address(server), 'replay', batch_size=4,
                             max_in_flight_samples_per_worker=10,
                             **kwargs) as iterator:
    next(iterator)
    # The stream asks for more once half its window has arrived; wait until
    # it has stopped (its window and the queue are full).
    drawn, deadline = -1, time.monotonic() + TIMEOUT
    while drawn != _samples_drawn(server) and time.monotonic() < deadline:
      drawn = _samples_drawn(server)
      time.sleep(0.3)
  return drawn - before


def test_small_samples_are_drawn_further_ahead_within_the_byte_budget(server):
  # Samples of 20 bytes: 4 MiB would hold many, so the window grows to 10
  # times max_in_flight_samples_per_worker; without a budget it stays.
  assert _drawn_ahead(server, max_in_flight_bytes_per_worker=0) == 10 + 4
  assert _drawn_ahead(server) == 100 + 4


def test_iterators_at_once_and_the_gil_is_free(server):
  counts = []

  def consume():
    iterator = reverb.ReplayIterator(address(server), 'replay', batch_size=4,
                                     max_samples=400)
    counts.append(sum(len(b.info.key) for b in iterator))

  threads = [threading.Thread(target=consume) for _ in range(3)]
  for thread in threads:
    thread.start()
  ticks = 0
  while any(thread.is_alive() for thread in threads) and ticks < 10_000:
    ticks += 1  # The main thread keeps running meanwhile.
    time.sleep(0.001)
  for thread in threads:
    thread.join(TIMEOUT)
  assert counts == [400, 400, 400]
  assert ticks > 0


def test_large_and_small_samples_keep_their_order():
  # Samples of 1 KB or more are unpacked by a thread pool; the queue order
  # must still be the server's (FIFO here), mixed with small ones.
  server = reverb.Server([reverb.Table.queue('fifo', 1000)])
  try:
    rng = np.random.default_rng(0)
    client = server.localhost_client()
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(300):
        writer.append({'data': rng.integers(0, 255, 8192, np.uint8),
                       'i': np.int64(i)})
        # Two in three items hold 8 KB of random (incompressible) bytes.
        columns = ['data', 'i'] if i % 3 else ['i']
        writer.create_item('fifo', 1.0,
                           [writer.history[c][-1] for c in columns])
    with reverb.ReplayIterator(address(server), 'fifo', batch_size=1,
                               max_in_flight_samples_per_worker=64,
                               max_samples=300,
                               unpack_as_table_signature=False) as iterator:
      order = [int(batch.data[-1][0]) for batch in iterator]
    assert order == list(range(300))
  finally:
    server.stop()
