"""Sampled data is what was written, on every sampling path, and batches'
memory goes back to the buffer pool when numpy frees it.

Steps mix every numeric dtype, strings, compressible columns (snappy
shrinks them), incompressible ones (random bytes, which chunks store as one
snappy literal instead, compression.h) and, through the legacy writer,
delta-encoded integer columns. Each step's values derive from its number,
so a sample is checked whole, wherever it came from: `Client.sample` (one
sample, whole trajectories and timesteps) and `ReplayIterator` batches
(stacked in C++), over gRPC and in process (the client handed the server's
tables). The TensorFlow datasets are checked in tf/sample_content_test.py.
"""

import gc

import numpy as np
import pytest

import reverb
from reverb import pybind

TIMEOUT = 30
_RANDOM_BYTES = 70_000  # Above the pool's 64 KiB: a large tensor.
_NUMERIC = (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
            np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_,
            np.complex64, np.complex128)


def step(t):
  """Step `t`: its number, then columns that derive from it."""
  numeric = [np.full([3], t % 2 if d is np.bool_ else t, d) for d in _NUMERIC]
  return [np.int64(t),
          np.random.default_rng(t).integers(0, 256, _RANDOM_BYTES, np.uint8),
          np.full([200, 50], t, np.float32),
          np.arange(4000, dtype=np.int32).reshape(4, 1000) * t,
          np.array([b'step %d' % t, b'', b'\x00\xff'], dtype=object),
          *numeric]


def check_steps(columns, first, batched=False):
  """`columns` (flat, each with a leading time dimension, and a batch one
  before it if `batched`) hold the steps from `first` (an array of them if
  batched) on."""
  firsts = np.atleast_1d(first)
  for b, f in enumerate(firsts):
    cols = [c[b] for c in columns] if batched else columns
    length = len(cols[0])
    for i in range(length):
      expected = step(int(f) + i)
      assert len(cols) == len(expected)
      for got, want in zip(cols, expected):
        got = np.asarray(got)[i]
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)


def steps_table(name='steps'):
  return reverb.Table(name, reverb.selectors.Uniform(),
                      reverb.selectors.Fifo(), max_size=1000,
                      rate_limiter=reverb.rate_limiters.MinSize(1))


def fill(client, table, steps, length, delta_encoded=False, chunk_length=None):
  """Items of `length` consecutive steps, one ending at every step; chunks
  of `chunk_length` steps if given (else as the writer tunes them)."""
  if delta_encoded:
    with client.writer(max_sequence_length=length,
                       delta_encoded=True) as writer:
      for t in range(steps):
        writer.append(step(t))
        if t + 1 >= length:
          writer.create_item(table, length, 1.0)
    return
  keep = max(length, chunk_length or 1)
  with client.trajectory_writer(num_keep_alive_refs=keep) as writer:
    if chunk_length is not None:
      for column in range(len(step(0))):
        writer.configure((column,), num_keep_alive_refs=keep,
                         max_chunk_length=chunk_length)
    for t in range(steps):
      writer.append(step(t))
      if t + 1 >= length:
        writer.create_item(table, 1.0, [c[-length:] for c in writer.history])


# Tables of the filled server and the length of their items.
LENGTHS = {'one': 1, 'three': 3, 'delta': 3, 'chunked_one': 1,
           'chunked_two': 2}


def filled_server():
  """A server whose tables (LENGTHS) hold items over 12 steps; 'delta' is
  written by the legacy writer, delta-encoded; 'chunked_*' in chunks of 4
  steps, of which an item reads one or two: our clients are sent the random
  column's chunks trimmed to those rows (chunk_rows.h)."""
  server = reverb.Server([steps_table(name) for name in LENGTHS])
  client = server.localhost_client()
  for name, length in LENGTHS.items():
    fill(client, name, 12, length, delta_encoded=name == 'delta',
         chunk_length=4 if name.startswith('chunked') else None)
  return server


def address_on(server, path, monkeypatch):
  """The server's address; clients made with it afterwards take `path`
  ('grpc', or 'in_process': the server's tables directly)."""
  if path == 'grpc':
    monkeypatch.setenv('REVERB_IN_PROCESS', '0')
  return f'localhost:{server.port}'


@pytest.fixture(name='server', scope='module')
def server_fixture():
  server = filled_server()
  yield server
  server.stop()


@pytest.fixture(name='client', params=['grpc', 'in_process'])
def client_fixture(server, request, monkeypatch):
  return reverb.Client(address_on(server, request.param, monkeypatch))


@pytest.mark.parametrize('table', sorted(LENGTHS))
def test_client_sample_returns_the_steps(client, table):
  for sample in client.sample(table, num_samples=20, emit_timesteps=False,
                              timeout=TIMEOUT):
    check_steps(sample.data, sample.data[0][0])
  for timesteps in client.sample(table, num_samples=5, timeout=TIMEOUT):
    columns = [np.stack([t.data[c] for t in timesteps])
               for c in range(len(timesteps[0].data))]
    check_steps(columns, columns[0][0])


@pytest.mark.parametrize('table', sorted(LENGTHS))
@pytest.mark.parametrize('batch_size', [1, 7])
def test_replay_iterator_batches_hold_the_steps(server, client, table,
                                                batch_size):
  del client  # Sets REVERB_IN_PROCESS for the iterator's own client.
  with reverb.ReplayIterator(f'localhost:{server.port}', table,
                             batch_size=batch_size, max_samples=21,
                             num_workers=2,
                             unpack_as_table_signature=False) as iterator:
    batches = list(iterator)
  assert sum(len(b.info.key) for b in batches) == 21
  for batch in batches:
    check_steps(batch.data, batch.data[0][:, 0], batched=True)


def test_a_batch_goes_back_to_the_pool_when_numpy_frees_it():
  # 1 MiB items, batches of 8 (8 MiB: a huge-page buffer). Each batch's
  # buffer is kept by the pool once the batch is freed, and the next
  # batches reuse it; one that is still referenced keeps its data.
  server = reverb.Server([steps_table('mb')])
  try:
    client = server.localhost_client()
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for t in range(16):
        writer.append([np.int64(t),
                       np.random.default_rng(t).integers(
                           0, 2**31, 1 << 18, np.int32)])
        writer.create_item('mb', 1.0, [c[-1] for c in writer.history])

    def check(batch):
      for key, data in zip(batch.data[0], batch.data[1]):
        np.testing.assert_array_equal(
            data, np.random.default_rng(key).integers(0, 2**31, 1 << 18,
                                                      np.int32))

    with reverb.ReplayIterator(f'localhost:{server.port}', 'mb',
                               batch_size=8,
                               unpack_as_table_signature=False) as iterator:
      kept = next(iterator)
      check(kept)
      gc.collect()
      given_at_del = 0
      reused = pybind.buffer_pool_stats()['reused']
      for _ in range(20):
        batch = next(iterator)
        check(batch)
        given = pybind.buffer_pool_stats()['given_kept']
        del batch  # Its 8 MiB column goes back to the pool.
        given_at_del += pybind.buffer_pool_stats()['given_kept'] - given
      stats = pybind.buffer_pool_stats()
      check(kept)
    # Every freed batch went back (only the batch's column is large enough
    # to keep), and later batches (and samples) were served from kept
    # buffers.
    assert given_at_del >= 20
    assert stats['reused'] - reused >= 19
    assert stats['kept_bytes'] <= 256 << 20
  finally:
    server.stop()
