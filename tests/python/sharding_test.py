"""reverb.Client over several servers (shards, docs/sharding.md): writers
spread over them, samples drawn from their union with the table's own
distribution, calls that reach every shard, and a shard killed mid-run."""

import collections
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import reverb

TIMEOUT = 60  # Seconds; against hangs only.

# Items per shard: the shards differ in size, and (below) in priority mass.
SIZES = (4, 12, 30)
EXPONENT = 0.8
NUM_SAMPLES = 100_000
# Largest total variation distance allowed between sampled frequencies and
# the exact distribution. For 10^5 samples of the 46 items of SIZES it is
# about 0.007 on average (sum over items of sqrt(2p / (pi N)) / 2), and
# below 0.03 but for a one-in-millions draw; drawing the shard uniformly
# instead of by weight would give 0.13 (prioritized) and 0.32 (uniform).
TOLERANCE = 0.03


def _table(name, sampler, **kwargs):
  return reverb.Table(name, sampler=sampler, remover=reverb.selectors.Fifo(),
                      max_size=100_000,
                      rate_limiter=reverb.rate_limiters.MinSize(1), **kwargs)


def _tables():
  return [
      _table('uniform', reverb.selectors.Uniform()),
      _table('prioritized', reverb.selectors.Prioritized(EXPONENT)),
      # Each item once: draining it lists a shard's items.
      _table('ids', reverb.selectors.Fifo(), max_times_sampled=1),
  ]


@pytest.fixture(name='servers')
def servers_fixture(tmp_path, transport):
  """Three shards in this process, which clients use directly or (the
  `transport` fixture) over gRPC, as shards elsewhere."""
  del transport  # Clients of the test take its path.
  servers = [
      reverb.Server(_tables(), checkpointer=reverb.checkpointers
                    .DefaultCheckpointer(str(tmp_path / f'shard{s}')))
      for s in range(3)
  ]
  yield servers
  for server in servers:
    server.stop()


def addresses_of(servers):
  return [f'localhost:{server.port}' for server in servers]


def priority(shard, i):
  """Of item `i` of `shard`: shard 0 holds few heavy items, shard 2 many
  light ones."""
  return (8.0, 1.0, 0.25)[shard] * (1 + i % 3)


def fill(servers, table):
  """SIZES[s] items on shard s, each holding its id, 1000 * s + i."""
  for s, server in enumerate(servers):
    client = server.localhost_client()
    for i in range(SIZES[s]):
      client.insert(np.int64(1000 * s + i), {table: priority(s, i)})


def ids_of(column):
  return np.asarray(column).reshape(-1).tolist()


def sample_counts(addresses, table, num_samples):
  """How often each id was sampled in `num_samples` samples over all
  shards."""
  counts = collections.Counter()
  with reverb.ReplayIterator(addresses, table, batch_size=1000,
                             max_samples=num_samples,
                             unpack_as_table_signature=False) as iterator:
    for batch in iterator:
      counts.update(ids_of(batch.data[0]))
  assert sum(counts.values()) == num_samples
  return counts


def total_variation(counts, weights):
  """Between the frequencies of `counts` and the distribution proportional
  to `weights` (id -> weight)."""
  n = sum(counts.values())
  total = sum(weights.values())
  assert set(counts) <= set(weights)
  return 0.5 * sum(abs(counts[i] / n - w / total) for i, w in weights.items())


def drain(address):
  """The ids of every item of the `ids` table of one server (emptying
  it)."""
  client = reverb.Client(address)
  size = client.server_info(timeout=TIMEOUT)['ids'].current_size
  if not size:
    return []
  return [ids_of(sample.data[0])[0] for sample in client.sample(
      'ids', num_samples=size, emit_timesteps=False, timeout=TIMEOUT)]


def test_client_keeps_the_addresses_it_was_given(servers):
  given = tuple(addresses_of(servers))
  client = reverb.Client(given)
  assert client.server_address is given
  again = pickle.loads(pickle.dumps(client))
  assert again.server_address == given
  assert set(again.server_info(timeout=TIMEOUT)) == {
      'uniform', 'prioritized', 'ids'}


@pytest.mark.parametrize('addresses', [
    [], ['localhost:1', ''], ['localhost:1', 'localhost:2', 'localhost:1']
])
def test_client_rejects_addresses_it_cannot_use(addresses):
  with pytest.raises(ValueError):
    reverb.Client(addresses)


def test_server_info_sums_shards_and_shard_info_keeps_them_apart(servers):
  fill(servers, 'uniform')
  addresses = addresses_of(servers)
  client = reverb.Client(addresses)
  info = client.server_info(timeout=TIMEOUT)
  assert info['uniform'].current_size == sum(SIZES)
  assert info['uniform'].num_episodes == sum(SIZES)  # One per insert.
  assert info['uniform'].rate_limiter_info.insert_stats.completed == sum(
      SIZES)
  assert info['prioritized'].current_size == 0
  shards = client.shard_info(timeout=TIMEOUT)
  assert list(shards) == addresses
  assert [shards[a]['uniform'].current_size for a in addresses] == list(SIZES)


def test_one_address_has_one_shard_and_a_list_gets_lists(servers):
  address = addresses_of(servers)[0]
  assert list(reverb.Client(address).shard_info(timeout=TIMEOUT)) == [address]
  assert isinstance(reverb.Client(address).checkpoint(timeout=TIMEOUT), str)
  paths = reverb.Client([address]).checkpoint(timeout=TIMEOUT)
  assert isinstance(paths, list) and len(paths) == 1


def test_a_stopped_shard_holds_up_no_call_and_hides_no_other(servers):
  fill(servers, 'uniform')
  addresses = addresses_of(servers)
  client = reverb.Client(addresses)
  assert client.server_info(timeout=TIMEOUT)['uniform'].current_size == sum(
      SIZES)
  servers[1].stop()
  # Without a timeout: the call to the stopped shard is cancelled once the
  # client finds it down (or it is not asked at all).
  result = {}
  thread = threading.Thread(
      target=lambda: result.update(info=client.server_info()))
  thread.start()
  thread.join(TIMEOUT)
  assert not thread.is_alive()
  assert result['info']['uniform'].current_size == SIZES[0] + SIZES[2]
  # Known to be down now: reported at once, as its error.
  shards = client.shard_info()
  assert isinstance(shards[addresses[1]], RuntimeError)
  assert shards[addresses[0]]['uniform'].current_size == SIZES[0]
  assert shards[addresses[2]]['uniform'].current_size == SIZES[2]
  # Nor do the calls that go to every shard: its items cannot change while
  # it is down, a reset it misses is an error (once the others are reset).
  client.mutate_priorities('uniform', deletes=[])
  with pytest.raises(RuntimeError, match='is down'):
    client.reset('uniform')
  shards = client.shard_info()
  assert shards[addresses[0]]['uniform'].current_size == 0
  assert shards[addresses[2]]['uniform'].current_size == 0


def test_checkpoint_and_reset_act_on_every_shard(servers, tmp_path):
  fill(servers, 'uniform')
  client = reverb.Client(addresses_of(servers))
  paths = client.checkpoint(timeout=TIMEOUT)
  assert len(paths) == 3
  for s, path in enumerate(paths):
    assert path.startswith(str(tmp_path / f'shard{s}'))
  client.reset('uniform', timeout=TIMEOUT)
  shards = client.shard_info(timeout=TIMEOUT)
  assert [info['uniform'].current_size for info in shards.values()] == [0] * 3
  # Each checkpoint holds its own shard's items.
  restored = reverb.Server(_tables(), checkpointer=reverb.checkpointers
                           .DefaultCheckpointer(str(tmp_path / 'shard2')))
  try:
    assert restored.localhost_client().server_info(
        timeout=TIMEOUT)['uniform'].current_size == SIZES[2]
  finally:
    restored.stop()


def test_writers_spread_items_over_every_shard_none_lost_or_doubled(servers):
  addresses = addresses_of(servers)
  client = reverb.Client(addresses)
  # Six writers open at once: placed two per shard.
  writers = [client.trajectory_writer(num_keep_alive_refs=1) for _ in range(6)]
  for i in range(50):
    for w, writer in enumerate(writers):
      writer.append({'id': np.int64(1000 * w + i)})
      writer.create_item('ids', 1.0, {'id': writer.history['id'][-1]})
  for writer in writers:
    writer.flush(timeout_ms=TIMEOUT * 1000)
    writer.close()
  shards = client.shard_info(timeout=TIMEOUT)
  sizes = [shards[a]['ids'].current_size for a in addresses]
  assert all(size > 0 for size in sizes), sizes
  assert sum(sizes) == 300
  assert client.server_info(timeout=TIMEOUT)['ids'].current_size == 300
  ids = [i for address in addresses for i in drain(address)]
  assert sorted(ids) == sorted(1000 * w + i for w in range(6)
                               for i in range(50))


def test_writers_are_placed_as_they_are_made_not_as_they_begin_to_write(
    servers):
  """Writers made together spread one per shard even when they begin to
  write one after another, the last made first: each is placed as it is
  made, not when it first streams (a writer that began late would join
  whichever shard the earlier ones had left)."""
  addresses = addresses_of(servers)
  client = reverb.Client(addresses)
  writers = [client.trajectory_writer(num_keep_alive_refs=1) for _ in range(3)]
  for w in reversed(range(3)):
    for i in range(5):
      writers[w].append({'id': np.int64(1000 * w + i)})
      writers[w].create_item('ids', 1.0, {'id': writers[w].history['id'][-1]})
    writers[w].flush(timeout_ms=TIMEOUT * 1000)
  for writer in writers:
    writer.close()
  assert [sorted(drain(address)) for address in addresses] == [
      [1000 * w + i for i in range(5)] for w in range(3)]


def test_insert_legacy_and_structured_writers_write_over_shards(servers):
  addresses = addresses_of(servers)
  client = reverb.Client(addresses)
  for i in range(10):
    client.insert(np.int64(i), {'ids': 1.0})
  # Three legacy writers open at once: one per shard.
  writers = [client.writer(max_sequence_length=1) for _ in range(3)]
  for i in range(20):
    for w, writer in enumerate(writers):
      writer.append(np.int64(100 * (w + 1) + i))
      writer.create_item('ids', num_timesteps=1, priority=1.0)
  for writer in writers:
    writer.close()
  structured = client.structured_writer([reverb.structured_writer.create_config(
      reverb.structured_writer.create_reference_step(np.int64(0))[-1], 'ids')])
  for i in range(10):
    structured.append(np.int64(1000 + i))
  structured.flush(timeout_ms=TIMEOUT * 1000)
  shards = client.shard_info(timeout=TIMEOUT)
  assert all(info['ids'].current_size for info in shards.values())
  ids = [i for address in addresses for i in drain(address)]
  assert sorted(ids) == sorted(
      list(range(10)) + [100 * (w + 1) + i for w in range(3)
                         for i in range(20)] + list(range(1000, 1010)))


def test_prioritized_samples_follow_priorities_over_all_shards(servers):
  fill(servers, 'prioritized')
  counts = sample_counts(addresses_of(servers), 'prioritized', NUM_SAMPLES)
  weights = {1000 * s + i: priority(s, i)**EXPONENT
             for s in range(3) for i in range(SIZES[s])}
  assert total_variation(counts, weights) < TOLERANCE


def test_uniform_samples_are_uniform_over_all_shards(servers):
  fill(servers, 'uniform')
  counts = sample_counts(addresses_of(servers), 'uniform', NUM_SAMPLES)
  weights = {1000 * s + i: 1.0 for s in range(3) for i in range(SIZES[s])}
  assert total_variation(counts, weights) < TOLERANCE


def test_client_sample_draws_from_every_shard(servers):
  fill(servers, 'uniform')
  client = reverb.Client(addresses_of(servers))
  shards = {ids_of(sample.data[0])[0] // 1000 for sample in client.sample(
      'uniform', num_samples=2000, emit_timesteps=False, timeout=TIMEOUT)}
  assert shards == {0, 1, 2}


def test_mutate_priorities_changes_the_shard_that_holds_the_key(servers):
  for s, server in enumerate(servers):
    server.localhost_client().insert(np.int64(1000 * s), {'prioritized': 1.0})

  def sampled_info(server):
    return next(server.localhost_client().sample(
        'prioritized', emit_timesteps=False, timeout=TIMEOUT)).info

  keys = [int(sampled_info(server).key) for server in servers]
  client = reverb.Client(addresses_of(servers))
  client.mutate_priorities('prioritized', updates={keys[1]: 9.0},
                           timeout=TIMEOUT)
  assert [float(sampled_info(server).priority) for server in servers] == [
      1.0, 9.0, 1.0]
  counts = sample_counts(addresses_of(servers), 'prioritized', 20_000)
  assert total_variation(counts, {0: 1.0, 1000: 9.0**EXPONENT, 2000: 1.0}) < (
      TOLERANCE)

  client.mutate_priorities('prioritized', deletes=[keys[0]], timeout=TIMEOUT)
  shards = client.shard_info(timeout=TIMEOUT)
  assert [info['prioritized'].current_size for info in shards.values()] == [
      0, 1, 1]


# A shard in a process of its own (so that it can be killed), restored from
# the newest checkpoint in its directory. Its `ids` table lets `max_ids`
# items in: once it holds them, further inserts wait for the rate limiter,
# unconfirmed.
SHARD = """
  import sys
  import reverb
  port, directory, max_ids = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
  def table(name, sampler, rate_limiter, **kwargs):
    return reverb.Table(name, sampler=sampler, remover=reverb.selectors.Fifo(),
                        max_size=1_000_000, rate_limiter=rate_limiter,
                        **kwargs)
  server = reverb.Server([
      table('uniform', reverb.selectors.Uniform(),
            reverb.rate_limiters.MinSize(1)),
      table('ids', reverb.selectors.Fifo(),
            reverb.rate_limiters.RateLimiter(
                samples_per_insert=1.0, min_size_to_sample=1,
                min_diff=-sys.float_info.max, max_diff=max_ids),
            max_times_sampled=1),
  ], port=port or None,
     checkpointer=reverb.checkpointers.DefaultCheckpointer(directory))
  print('listening on port', server.port, flush=True)
  server.wait()
"""


class ShardProcesses:
  """Shard processes, killed at the end."""

  def __init__(self):
    self.processes = []

  def start(self, directory, max_ids=sys.float_info.max, port=0):
    """(process, port) of a new shard."""
    process = subprocess.Popen(
        [sys.executable, '-c', textwrap.dedent(SHARD), str(port),
         str(directory), repr(max_ids)], stdout=subprocess.PIPE, text=True)
    self.processes.append(process)
    line = process.stdout.readline()  # Printed once listening.
    assert 'listening on port' in line, line
    return process, int(line.split()[-1])

  def kill_all(self):
    for process in self.processes:
      if process.poll() is None:
        process.kill()
      process.wait(TIMEOUT)


@pytest.fixture(name='shard_processes')
def shard_processes_fixture():
  processes = ShardProcesses()
  yield processes
  processes.kill_all()


def wait_until(condition, what):
  deadline = time.monotonic() + TIMEOUT
  while not condition():
    assert time.monotonic() < deadline, f'Still not {what} after {TIMEOUT} s'
    time.sleep(0.05)


def test_killed_shard_loses_no_confirmed_item_and_rejoins(shard_processes,
                                                          tmp_path):
  max_ids, steps = 40, 300
  # Shard 0 is the one killed: it confirms only its first `max_ids` ids, so
  # that all it ever confirmed is in the checkpoint taken before the kill,
  # while its writers have items in flight when it dies.
  victim, victim_port = shard_processes.start(tmp_path / 'shard0', max_ids)
  ports = [victim_port] + [
      shard_processes.start(tmp_path / f'shard{s}')[1] for s in (1, 2)]
  addresses = [f'localhost:{port}' for port in ports]
  client = reverb.Client(addresses)

  def ids_held():
    shards = client.shard_info(timeout=TIMEOUT)
    return [None if isinstance(info, Exception) else info['ids'].current_size
            for info in shards.values()]

  # A sampler over all shards through it all: (phase, id) of every sample.
  sampled, phase, stop = [], ['before'], threading.Event()
  failures = []

  def sample():
    try:
      with reverb.ReplayIterator(addresses, 'uniform', batch_size=8,
                                 unpack_as_table_signature=False) as iterator:
        while not stop.is_set():
          sampled.extend((phase[0], i) for i in ids_of(next(iterator).data[0]))
    except Exception as e:  # pylint: disable=broad-except
      failures.append(e)

  # Six writers open at once (two per shard), each writing `steps` ids of
  # its own, every one an item of both tables.
  writers = [client.trajectory_writer(num_keep_alive_refs=1) for _ in range(6)]

  def write(w, writer):
    try:
      for i in range(steps):
        writer.append({'id': np.int64(100_000 * w + i)})
        for table in ('uniform', 'ids'):
          writer.create_item(table, 1.0, {'id': writer.history['id'][-1]})
      writer.flush(timeout_ms=TIMEOUT * 1000)
      writer.close()
    except Exception as e:  # pylint: disable=broad-except
      failures.append(e)

  threads = [threading.Thread(target=sample)] + [
      threading.Thread(target=write, args=(w, writer))
      for w, writer in enumerate(writers)]
  for thread in threads:
    thread.start()

  wait_until(lambda: ids_held()[0] == max_ids, f'{max_ids} ids on shard 0')
  assert reverb.Client(addresses[0]).checkpoint(timeout=TIMEOUT)
  # Its writers cannot have finished: they wait for it to confirm the rest.
  assert any(thread.is_alive() for thread in threads[1:])
  victim.send_signal(signal.SIGKILL)
  victim.wait(TIMEOUT)
  phase[0] = 'killed'
  for thread in threads[1:]:
    thread.join(TIMEOUT)
    assert not thread.is_alive()
  assert not failures, failures
  wait_until(lambda: sum(1 for p, _ in sampled if p == 'killed') >= 100,
             'sampling after the kill')

  # Restarted on its port from its checkpoint, shard 0 rejoins.
  shard_processes.start(tmp_path / 'shard0', max_ids, victim_port)
  wait_until(lambda: ids_held()[0] is not None, 'rejoined')
  phase[0] = 'rejoined'
  created = [100_000 * w + i for w in range(6) for i in range(steps)]
  wait_until(lambda: sum(n or 0 for n in ids_held()) == len(created),
             'every id once')
  held = [drain(address) for address in addresses]
  assert held[0], 'shard 0 restored none of its items'
  assert sorted(i for ids in held for i in ids) == created

  # Shard 0's items are sampled again (its `uniform` table holds at least
  # the items of its ids).
  wait_until(lambda: any(p == 'rejoined' and i in held[0] for p, i in sampled),
             'sampling shard 0 again')
  stop.set()
  threads[0].join(TIMEOUT)
  assert not failures, failures
  assert {i for _, i in sampled} <= set(created)
