"""Faults that hold, kept held: bad input through the Python API leaves the
server serving; a TrajectoryWriter across a server restart from a
checkpoint loses and duplicates nothing it confirmed; many writers and
samplers at once keep a full table at its max_size with the server's memory
bounded; a new client of a restarted server connects at once. (Crashes and
corrupt files during checkpoints: checkpoint_test.py.)
"""

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import reverb
from reverb import specs

TIMEOUT = 30
TIMEOUT_MS = TIMEOUT * 1000


def step3():
  return np.ones([3], np.float32)


# ---------------------------------------------------------------------------
# Bad input: every case raises its exception, and the server goes on.

@pytest.fixture(name='server', scope='module')
def server_fixture():
  server = reverb.Server(tables=[
      reverb.Table('table', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 1000,
                   reverb.rate_limiters.MinSize(1)),
      reverb.Table('prioritized', reverb.selectors.Prioritized(0.8),
                   reverb.selectors.Fifo(), 1000,
                   reverb.rate_limiters.MinSize(1)),
      reverb.Table.queue('queue', 10),
      reverb.Table.queue(
          'signed', 1000,
          signature={'obs': specs.TensorSpec([3], np.float32)}),
      # Only the serving check below uses it.
      reverb.Table.queue('probe', 1000),
  ])
  yield server
  server.stop()


@pytest.fixture(name='client', scope='module')
def client_fixture(server):
  client = server.localhost_client()
  # Something to sample and to mutate.
  client.insert(step3(), priorities={'table': 1.0, 'prioritized': 1.0})
  return client


def sampled_key(client, table='table'):
  [sample] = client.sample(table, emit_timesteps=False, timeout=TIMEOUT)
  return int(sample.info.key)


def a_writer(client, steps=1, **kwargs):
  writer = client.writer(max_sequence_length=2, **kwargs)
  for _ in range(steps):
    writer.append(step3())
  return writer


def a_closed_writer(client):
  writer = a_writer(client)
  writer.close()
  return writer


def a_trajectory_writer(client, steps=1):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  for _ in range(steps):
    writer.append({'obs': step3()})
  return writer


def a_closed_trajectory_writer(client):
  writer = a_trajectory_writer(client)
  writer.close()
  return writer


def expired_ref(client):
  writer = a_trajectory_writer(client)
  old = writer.history['obs'][-1]
  for _ in range(2):
    writer.append({'obs': step3()})
  return writer, old


def structured_config(table='table', **kwargs):
  from reverb import structured_writer  # pylint: disable=g-import-not-at-top
  ref = structured_writer.create_reference_step({'obs': step3()})
  return structured_writer.create_config(ref['obs'][-1:], table, **kwargs)


# (name, exception type, call(client)).
BAD_INPUT = [
    # reverb.Client
    ('client: address of a wrong type', TypeError,
     lambda c: reverb.Client(1234)),
    ('client: negative keepalive', ValueError,
     lambda c: reverb.Client('localhost:1', keepalive_ms=-1)),
    # Client.insert
    ('insert: no priorities', ValueError,
     lambda c: c.insert(step3(), priorities={})),
    ('insert: unknown table', ValueError,
     lambda c: c.insert(step3(), priorities={'nope': 1.0})),
    ('insert: table name not a str', TypeError,
     lambda c: c.insert(step3(), priorities={7: 1.0})),
    ('insert: negative priority', ValueError,
     lambda c: c.insert(step3(), priorities={'prioritized': -1.0})),
    ('insert: NaN priority', ValueError,
     lambda c: c.insert(step3(), priorities={'table': float('nan')})),
    ('insert: priority not a number', TypeError,
     lambda c: c.insert(step3(), priorities={'table': 'high'})),
    ('insert: dtype against the signature', ValueError,
     lambda c: c.insert(np.ones([3], np.float64), priorities={'signed': 1.0})),
    ('insert: shape against the signature', ValueError,
     lambda c: c.insert(np.ones([4], np.float32), priorities={'signed': 1.0})),
    ('insert: structure against the signature', ValueError,
     lambda c: c.insert([step3(), step3()], priorities={'signed': 1.0})),
    ('insert: object array', (TypeError, ValueError),
     lambda c: c.insert(np.array([object()]), priorities={'table': 1.0})),
    ('insert: no data', ValueError,
     lambda c: c.insert([], priorities={'table': 1.0})),
    # Client.sample
    ('sample: unknown table', RuntimeError,
     lambda c: next(c.sample('nope', timeout=TIMEOUT))),
    ('sample: zero samples', ValueError,
     lambda c: next(c.sample('table', num_samples=0))),
    ('sample: -2 samples', ValueError,
     lambda c: next(c.sample('table', num_samples=-2))),
    ('sample: table name not a str', TypeError,
     lambda c: next(c.sample(7, timeout=TIMEOUT))),
    ('sample: unknown table to unpack as', ValueError,
     lambda c: next(c.sample('nope', unpack_as_table_signature=True,
                             timeout=TIMEOUT))),
    ('sample: empty queue within the timeout', reverb.DeadlineExceededError,
     lambda c: next(c.sample('queue', timeout=0.05))),
    # Client.mutate_priorities
    ('mutate: unknown table', RuntimeError,
     lambda c: c.mutate_priorities('nope', updates={1: 1.0})),
    ('mutate: negative priority', ValueError,
     lambda c: c.mutate_priorities('prioritized',
                                   updates={sampled_key(c, 'prioritized'):
                                            -1.0})),
    ('mutate: NaN priority', ValueError,
     lambda c: c.mutate_priorities('prioritized',
                                   updates={sampled_key(c, 'prioritized'):
                                            float('nan')})),
    ('mutate: key not an int', TypeError,
     lambda c: c.mutate_priorities('table', updates={'key': 1.0})),
    ('mutate: negative key', TypeError,
     lambda c: c.mutate_priorities('table', updates={-1: 1.0})),
    ('mutate: deletes not keys', TypeError,
     lambda c: c.mutate_priorities('table', deletes=['a'])),
    # Client.reset, server_info, checkpoint
    ('reset: unknown table', RuntimeError, lambda c: c.reset('nope')),
    ('reset: table name not a str', TypeError, lambda c: c.reset(7)),
    ('server_info: timeout not a number', TypeError,
     lambda c: c.server_info(timeout='soon')),
    # Client.writer
    ('writer: max_sequence_length 0', ValueError,
     lambda c: c.writer(max_sequence_length=0)),
    ('writer: chunk_length 0', ValueError,
     lambda c: c.writer(max_sequence_length=2, chunk_length=0)),
    ('writer: chunk_length over max_sequence_length', ValueError,
     lambda c: c.writer(max_sequence_length=2, chunk_length=3)),
    ('writer: max_in_flight_items 0', ValueError,
     lambda c: c.writer(max_sequence_length=2, max_in_flight_items=0)),
    # Writer
    ('Writer.append: columns change', ValueError,
     lambda c: a_writer(c).append([step3(), step3()])),
    ('Writer.append: shape within a chunk', ValueError,
     lambda c: a_writer(c, chunk_length=2).append(np.ones([4], np.float32))),
    ('Writer.append: object array', (TypeError, ValueError),
     lambda c: a_writer(c).append(np.array([object()]))),
    ('Writer.append_sequence: lengths differ', ValueError,
     lambda c: a_writer(c, steps=0).append_sequence(
         [np.ones([2, 3]), np.ones([3, 3])])),
    ('Writer.create_item: 0 timesteps', ValueError,
     lambda c: a_writer(c).create_item('table', 0, 1.0)),
    ('Writer.create_item: more timesteps than buffered', ValueError,
     lambda c: a_writer(c).create_item('table', 2, 1.0)),
    ('Writer.create_item: over max_sequence_length', ValueError,
     lambda c: a_writer(c, steps=2).create_item('table', 3, 1.0)),
    ('Writer.create_item: NaN priority', ValueError,
     lambda c: a_writer(c).create_item('table', 1, float('nan'))),
    ('Writer.create_item: unknown table', ValueError,
     lambda c: a_writer(c).create_item('nope', 1, 1.0)),
    ('Writer.create_item: table name not a str', TypeError,
     lambda c: a_writer(c).create_item(7, 1, 1.0)),
    ('Writer.create_item: against the signature', ValueError,
     lambda c: _append_then(a_writer(c, steps=0), np.ones([4], np.float32),
                            lambda w: w.create_item('signed', 1, 1.0))),
    ('Writer.flush: negative priority reaches the server', (ValueError,
                                                           RuntimeError),
     lambda c: _append_then(a_writer(c, steps=0), step3(),
                            lambda w: (w.create_item('prioritized', 1, -1.0),
                                       w.flush(timeout=TIMEOUT)))),
    ('Writer.append: after close', RuntimeError,
     lambda c: a_closed_writer(c).append(step3())),
    ('Writer.close: twice', ValueError, lambda c: a_closed_writer(c).close()),
    ('Writer: reused as a context after close', ValueError,
     lambda c: a_closed_writer(c).__enter__()),
    # Client.trajectory_writer and TrajectoryWriter
    ('trajectory_writer: 0 keep-alive refs', ValueError,
     lambda c: c.trajectory_writer(num_keep_alive_refs=0)),
    ('trajectory_writer: negative keep-alive refs', ValueError,
     lambda c: c.trajectory_writer(num_keep_alive_refs=-1)),
    ('TrajectoryWriter.history: before append', RuntimeError,
     lambda c: c.trajectory_writer(1).history),
    ('TrajectoryWriter.append: dtype changes', ValueError,
     lambda c: a_trajectory_writer(c).append(
         {'obs': np.ones([3], np.float64)})),
    ('TrajectoryWriter.append: shape changes', ValueError,
     lambda c: a_trajectory_writer(c).append(
         {'obs': np.ones([4], np.float32)})),
    ('TrajectoryWriter.append: a structure that cannot grow', ValueError,
     lambda c: a_trajectory_writer(c).append([step3()])),
    ('TrajectoryWriter.history: index past the history', IndexError,
     lambda c: a_trajectory_writer(c).history['obs'][5]),
    ('TrajectoryWriter.create_item: empty trajectory', ValueError,
     lambda c: a_trajectory_writer(c).create_item(
         'table', 1.0, reverb.TrajectoryColumn([]))),
    ('TrajectoryWriter.create_item: unknown table', ValueError,
     lambda c: _with_history(a_trajectory_writer(c),
                             lambda w, h: w.create_item('nope', 1.0, h))),
    ('TrajectoryWriter.create_item: against the signature', ValueError,
     lambda c: _with_history(
         _appended(c.trajectory_writer(2), {'obs': np.ones([2], np.float32)}),
         lambda w, h: w.create_item('signed', 1.0, h))),
    ('TrajectoryWriter.create_item: expired reference', ValueError,
     lambda c: (lambda w, old: w.create_item(
         'table', 1.0, {'obs': old}))(*expired_ref(c))),
    ('TrajectoryWriter.create_item: NaN priority', ValueError,
     lambda c: _with_history(a_trajectory_writer(c),
                             lambda w, h: w.create_item('table',
                                                        float('nan'), h))),
    ('TrajectoryWriter.create_item: not a trajectory', (TypeError,
                                                        ValueError),
     lambda c: a_trajectory_writer(c).create_item('table', 1.0, 'obs')),
    ('TrajectoryWriter.flush: full queue within the timeout',
     reverb.DeadlineExceededError,
     lambda c: _fill_queue_then_flush(c)),
    ('TrajectoryWriter.append: after close', RuntimeError,
     lambda c: a_closed_trajectory_writer(c).append({'obs': step3()})),
    ('TrajectoryWriter.flush: after close', RuntimeError,
     lambda c: a_closed_trajectory_writer(c).flush()),
    # Client.structured_writer
    ('structured_writer: unknown table', RuntimeError,
     lambda c: _structured_write(c, structured_config('nope'))),
    # As dm-reverb: AttributeError naming what the config lacks.
    ('structured_writer: config of a wrong type', AttributeError,
     lambda c: c.structured_writer(['config'])),
    # ReplayIterator
    ('ReplayIterator: unknown table', RuntimeError,
     lambda c: next(reverb.ReplayIterator(c.server_address, 'nope', 1,
                                          unpack_as_table_signature=False))),
    ('ReplayIterator: 0 in flight', ValueError,
     lambda c: reverb.ReplayIterator(c.server_address, 'table', 0)),
    # Server-side objects built by mistake next to a running server
    ('Table: max_size 0', ValueError,
     lambda c: reverb.Table('t', reverb.selectors.Fifo(),
                            reverb.selectors.Fifo(), 0,
                            reverb.rate_limiters.MinSize(1))),
    ('MinSize: 0', ValueError, lambda c: reverb.rate_limiters.MinSize(0)),
    ('SampleToInsertRatio: error_buffer too small', ValueError,
     lambda c: reverb.rate_limiters.SampleToInsertRatio(1.0, 10, 0.1)),
    ('Prioritized: exponent not a number', TypeError,
     lambda c: reverb.selectors.Prioritized('high')),
    ('Server: two tables of one name', ValueError,
     lambda c: reverb.Server([reverb.Table.queue('t', 1),
                              reverb.Table.queue('t', 1)])),
]


def _append_then(writer, data, then):
  writer.append(data)
  return then(writer)


def _appended(writer, data):
  writer.append(data)
  return writer


def _with_history(writer, call):
  """call(writer, {'obs': the last step's reference})."""
  return call(writer, {'obs': writer.history['obs'][-1:]})


def _fill_queue_then_flush(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  try:
    for _ in range(11):  # One more than the queue holds.
      writer.append({'obs': step3()})
      writer.create_item('queue', 1.0, {'obs': writer.history['obs'][-1:]})
    writer.flush(timeout_ms=50)
  finally:
    client.reset('queue', timeout=TIMEOUT)
    writer.close()


def _structured_write(client, config):
  writer = client.structured_writer([config])
  writer.append({'obs': step3()})
  writer.flush(timeout_ms=TIMEOUT_MS)


def check_serving(client, marker):
  """An insert and a sample of it still work."""
  client.insert(np.int64(marker), priorities={'probe': 1.0})
  [sample] = client.sample('probe', emit_timesteps=False, timeout=TIMEOUT)
  assert int(np.asarray(sample.data[0]).reshape(-1)[0]) == marker


@pytest.mark.parametrize('name, kind, call', BAD_INPUT,
                         ids=[case[0] for case in BAD_INPUT])
def test_bad_input_raises_and_the_server_goes_on(name, kind, call, client):
  del name
  size = client.server_info(timeout=TIMEOUT)['table'].current_size
  with pytest.raises(kind) as error:
    call(client)
  assert str(error.value), 'an exception without a message'
  check_serving(client, marker=len(str(error.value)))
  # Nothing stored was lost.
  assert client.server_info(timeout=TIMEOUT)['table'].current_size >= size


def test_bad_input_cases_are_distinct():
  names = [case[0] for case in BAD_INPUT]
  assert len(set(names)) == len(names)
  assert len(names) >= 69


# ---------------------------------------------------------------------------
# A TrajectoryWriter across a restart of its server from a checkpoint.

def obs(t):
  return np.full([2], t, np.float32)


def test_trajectory_writer_across_a_restart_from_a_checkpoint(tmp_path):
  def start(port=None):
    return reverb.Server(
        [reverb.Table.queue('queue', 1000)], port=port,
        checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)))

  server = start()
  port = server.port
  client = reverb.Client(f'localhost:{port}')
  writer = client.trajectory_writer(num_keep_alive_refs=3,
                                    validate_items=False)
  # Items of the steps t-2..t (fewer at first), the id t in front.
  def write(steps):
    for t in steps:
      writer.append({'id': np.int64(t), 'obs': obs(t)})
      writer.create_item('queue', 1.0, {
          'id': writer.history['id'][-1],
          'obs': writer.history['obs'][-min(3, t + 1):]})

  write(range(10))
  writer.flush(timeout_ms=TIMEOUT_MS)  # 0..9 confirmed...
  client.checkpoint()                  # ...and in the checkpoint.
  write(range(10, 15))                 # Sent or not, confirmed or not.
  server.stop()
  del server
  server = start(port)
  try:
    write(range(15, 25))  # Spanning steps streamed to the old server.
    writer.flush(timeout_ms=TIMEOUT_MS)
    size = server.localhost_client().server_info()['queue'].current_size
    items = [s.data for s in server.localhost_client().sample(
        'queue', num_samples=size, emit_timesteps=False, timeout=TIMEOUT)]
  finally:
    writer.close()
    server.stop()
  ids = [int(item[0]) for item in items]
  assert len(ids) == len(set(ids)), f'duplicates: {sorted(ids)}'
  # Everything confirmed before the checkpoint and after the restart; of
  # 10..14, those unconfirmed at the stop were sent again (the old server
  # may have confirmed some after the checkpoint: the checkpoint lacks them).
  assert set(range(10)) | set(range(15, 25)) <= set(ids) <= set(range(25))
  for t, (_, column) in zip(ids, items):
    np.testing.assert_array_equal(
        column, np.stack([obs(s) for s in range(max(0, t - 2), t + 1)]))


def test_a_new_client_does_not_wait_out_an_older_clients_reconnect_backoff():
  # gRPC channels of one process to one address share their connections by
  # default, and with them the reconnect backoff (1 s, then 1.6 times longer
  # after each failed attempt, +-20%). A server started on the port of a
  # stopped one (port 0 hands out ports again) must answer a new client at
  # once, not when an older client's backoff ends: in CI that wait reached
  # the connect timeout of 10 s.
  server = reverb.Server([reverb.Table.queue('queue', 10)], port=0)
  port = server.port
  old = reverb.Client(f'localhost:{port}')
  old.server_info()
  server.stop()
  # Attempts at about 0, 1, 2.6, 5.2 and 9.3 s: at 11 s the next is ~4.8 s
  # away.
  with pytest.raises(reverb.errors.DeadlineExceededError):
    old.server_info(timeout=11)
  server = reverb.Server([reverb.Table.queue('queue', 10)], port=port)
  try:
    new = reverb.Client(f'localhost:{port}')
    assert 'queue' in new.server_info(timeout=1.5)
  finally:
    server.stop()


# ---------------------------------------------------------------------------
# Many writers and samplers at once.

SERVER = """
import sys
import reverb
server = reverb.Server([reverb.Table(
    'table', reverb.selectors.Uniform(), reverb.selectors.Fifo(),
    int(sys.argv[1]), reverb.rate_limiters.MinSize(1))])
print(server.port, flush=True)
sys.stdin.read()
"""

NUM_WRITERS = 16
NUM_SAMPLERS = 8
MAX_SIZE = 500
ITEM_FLOATS = 4096  # 16 KiB an item.
STRESS_SECONDS = 4.0
RSS_GROWTH_BOUND = 64 << 20


def rss_bytes(pid):
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  raise AssertionError('no VmRSS')


def test_many_writers_and_samplers_keep_the_table_at_max_size():
  proc = subprocess.Popen([sys.executable, '-c', SERVER, str(MAX_SIZE)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
  try:
    port = int(proc.stdout.readline())
    address = f'localhost:{port}'
    stop = threading.Event()
    errors = []
    counts = {'insert': 0, 'sample': 0}
    lock = threading.Lock()

    def writer_loop(n):
      client = reverb.Client(address)
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        t = 0
        while not stop.is_set():
          writer.append(np.full([ITEM_FLOATS], n * 1e6 + t, np.float32))
          writer.create_item('table', 1.0, writer.history[-1])
          t += 1
          if t % 16 == 0:
            writer.flush(timeout_ms=TIMEOUT_MS)
            with lock:
              counts['insert'] += 16

    def sampler_loop():
      client = reverb.Client(address)
      while not stop.is_set():
        for sample in client.sample('table', num_samples=32,
                                    emit_timesteps=False, timeout=TIMEOUT):
          data = sample.data[0]
          assert data.shape == (ITEM_FLOATS,) and np.all(data == data[0])
        with lock:
          counts['sample'] += 32

    def guarded(loop, *args):
      def run():
        try:
          loop(*args)
        except Exception as e:  # pylint: disable=broad-except
          errors.append(e)
      return run

    threads = ([threading.Thread(target=guarded(writer_loop, n), daemon=True)
                for n in range(NUM_WRITERS)] +
               [threading.Thread(target=guarded(sampler_loop), daemon=True)
                for _ in range(NUM_SAMPLERS)])
    for thread in threads:
      thread.start()
    client = reverb.Client(address)
    deadline = time.monotonic() + TIMEOUT
    while client.server_info(timeout=TIMEOUT)['table'].current_size < MAX_SIZE:
      assert time.monotonic() < deadline, 'the table did not fill'
      assert not errors, errors
      time.sleep(0.05)
    warm_rss = rss_bytes(proc.pid)
    warm_inserts = counts['insert']
    sizes = []
    end = time.monotonic() + STRESS_SECONDS
    while time.monotonic() < end:
      sizes.append(client.server_info(timeout=TIMEOUT)['table'].current_size)
      time.sleep(0.1)
    end_rss = rss_bytes(proc.pid)
    stop.set()
    for thread in threads:
      thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    inserted = counts['insert'] - warm_inserts
    assert inserted > MAX_SIZE, f'only {inserted} inserts once full'
    assert counts['sample'] > 0
    assert set(sizes) == {MAX_SIZE}
    # Bounded: the table holds 8 MiB of data, whatever was inserted.
    growth = end_rss - warm_rss
    print(f'server RSS {warm_rss / 2**20:.1f} -> {end_rss / 2**20:.1f} MiB '
          f'over {inserted} inserts of {ITEM_FLOATS * 4 / 1024:.0f} KiB')
    assert growth < RSS_GROWTH_BOUND, (
        f'server RSS grew {growth / 2**20:.1f} MiB')
  finally:
    proc.stdin.close()
    try:
      proc.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait(TIMEOUT)
