"""reverb.checkpointers with reverb.Server: what Client.checkpoint() saves is
what a new server on the same directory restores, through crashes and
corrupt files.

Each test writes its checkpoints under pytest's tmp_path. The crash test runs
this file as a script (see `_saver_main`) in a subprocess that it kills
mid-save.
"""

import datetime
import logging
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

import reverb
from reverb import checkpointers

# Every blocking call in these tests is bounded (seconds).
TIMEOUT = 30
PRIORITY_EXPONENT = 0.8
CHECKPOINT_FILES = ('DONE', 'chunks.tfrecord', 'items.tfrecord',
                    'tables.tfrecord')


def bounded(fn, timeout=TIMEOUT):
  """fn(), failing the test if it does not return within `timeout` s.

  For calls without a timeout of their own (Client.checkpoint, Server
  start and stop); a call that hangs is left behind in a daemon thread.
  """
  result = {}

  def run():
    try:
      result['value'] = fn()
    except BaseException as e:  # pylint: disable=broad-except
      result['error'] = e

  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  thread.join(timeout)
  if thread.is_alive():
    pytest.fail(f'{fn} did not return within {timeout} s')
  if 'error' in result:
    raise result['error']
  return result['value']


def start_server(tables, path, *, checkpoint_every_seconds=None,
                 **checkpointer_kw):
  """A Server holding `tables` whose checkpointer is a DefaultCheckpointer
  of `path` (restoring what it holds)."""
  checkpointer = checkpointers.DefaultCheckpointer(str(path),
                                                   **checkpointer_kw)
  return bounded(lambda: reverb.Server(
      tables, checkpointer=checkpointer,
      checkpoint_every_seconds=checkpoint_every_seconds))


def stop(server):
  bounded(server.stop)


def checkpoint(client):
  return bounded(client.checkpoint)


def info(client, table='table'):
  return client.server_info(timeout=TIMEOUT)[table]


def entries(root, hidden=False):
  """Names in `root` (none if it does not exist yet) that are hidden (the
  .tmp dirs of saves in progress or killed) or not."""
  root = pathlib.Path(root)
  if not root.exists():
    return []
  return sorted(p.name for p in root.iterdir()
                if p.name.startswith('.') == hidden)


def visible_entries(root):
  return entries(root)


def hidden_entries(root):
  return entries(root, hidden=True)


def assert_complete(path):
  assert sorted(os.listdir(path)) == sorted(CHECKPOINT_FILES)


def simple_table(name='table', max_size=100, **kwargs):
  kwargs.setdefault('rate_limiter', reverb.rate_limiters.MinSize(1))
  return reverb.Table(name=name, sampler=reverb.selectors.Uniform(),
                      remover=reverb.selectors.Fifo(), max_size=max_size,
                      **kwargs)


def insert_ids(client, ids, table='table'):
  for i in ids:
    client.insert(np.int64(i), priorities={table: float(i) + 1})


def drain_ids(client, count, table='table'):
  """Ids of the next `count` samples of `table` (one-step int64 items)."""
  return [int(s.data[0][0]) for s in client.sample(
      table, num_samples=count, emit_timesteps=False, timeout=TIMEOUT)]


# ---------------------------------------------------------------------------
# Round trip of every selector.

SELECTORS = {
    'fifo': reverb.selectors.Fifo,
    'lifo': reverb.selectors.Lifo,
    'min_heap': reverb.selectors.MinHeap,
    'max_heap': reverb.selectors.MaxHeap,
    'uniform': reverb.selectors.Uniform,
    'prioritized': lambda: reverb.selectors.Prioritized(PRIORITY_EXPONENT),
}
ORDERED = ('fifo', 'lifo', 'min_heap', 'max_heap')
# Items 0..7 (2-step trajectories over steps i, i+1), priorities distinct so
# that heaps have one order.
PRIORITIES = (3.0, 7.0, 1.0, 8.0, 5.0, 2.0, 6.0, 4.0)
# Ordered samplers delete an item after this many samples; the others never.
ORDERED_MAX_TIMES_SAMPLED = 3


def selector_table(kind):
  return reverb.Table(
      name='table', sampler=SELECTORS[kind](),
      remover=reverb.selectors.Fifo(), max_size=100,
      rate_limiter=reverb.rate_limiters.MinSize(1),
      max_times_sampled=(ORDERED_MAX_TIMES_SAMPLED if kind in ORDERED else 0))


def step(t):
  """Step t of the trajectory: an id and 16 floats unique to it."""
  return {'id': np.int64(t),
          'obs': np.random.default_rng(t).standard_normal(16).astype(
              np.float32)}


def step_columns(steps):
  """Flat columns (sorted keys: id, obs) of the item covering `steps`."""
  return [np.stack([step(t)['id'] for t in steps]),
          np.stack([step(t)['obs'] for t in steps])]


class TableModel:
  """What a table with sampler `kind` must hold, and so return: items by
  id, with priority, times_sampled, key (once seen) and insertion order."""

  def __init__(self, kind):
    self.kind = kind
    self.max_times_sampled = (ORDERED_MAX_TIMES_SAMPLED if kind in ORDERED
                              else 0)
    self.items = {}
    self._order = 0

  def insert(self, ident, priority, steps):
    self.items[ident] = dict(priority=priority, times_sampled=0, key=None,
                             order=self._order, columns=step_columns(steps))
    self._order += 1

  def key(self, ident):
    return self.items[ident]['key']

  def set_priority(self, ident, priority):
    self.items[ident]['priority'] = priority

  def delete(self, ident):
    del self.items[ident]

  def budget(self):
    """Samples left before every item is deleted (ordered kinds)."""
    return sum(self.max_times_sampled - item['times_sampled']
               for item in self.items.values())

  def _next(self):
    """The id an ordered sampler must return next."""
    rank = {
        'fifo': lambda i: self.items[i]['order'],
        'lifo': lambda i: -self.items[i]['order'],
        'min_heap': lambda i: self.items[i]['priority'],
        'max_heap': lambda i: -self.items[i]['priority'],
    }[self.kind]
    return min(self.items, key=rank)

  def check(self, sample, what):
    """`sample` is what the table may return now; records it."""
    info = sample.info
    ident = int(sample.data[0][0])
    if self.kind in ORDERED:
      assert ident == self._next(), what
    assert ident in self.items, f'{what}: item {ident} should not exist'
    item = self.items[ident]
    if item['key'] is None:
      item['key'] = info.key
    assert info.key == item['key'], what
    assert info.priority == item['priority'], what
    item['times_sampled'] += 1
    assert info.times_sampled == item['times_sampled'], what
    assert info.table_size == len(self.items), what
    if self.kind == 'prioritized':
      total = sum(i['priority']**PRIORITY_EXPONENT
                  for i in self.items.values())
      probability = item['priority']**PRIORITY_EXPONENT / total
    elif self.kind == 'uniform':
      probability = 1 / len(self.items)
    else:
      probability = 1.0
    assert info.probability == pytest.approx(probability, rel=1e-9), what
    assert len(sample.data) == len(item['columns']), what
    for got, want in zip(sample.data, item['columns']):
      assert got.dtype == want.dtype, what
      np.testing.assert_array_equal(got, want, err_msg=what)
    if self.max_times_sampled and (
        item['times_sampled'] >= self.max_times_sampled):
      del self.items[ident]

  def sample_and_check(self, client, count, what):
    for i, sample in enumerate(client.sample('table', num_samples=count,
                                             emit_timesteps=False,
                                             timeout=TIMEOUT)):
      self.check(sample, f'{what} sample {i}')


def table_state(table_info):
  """What a restored table reports as the saved one did."""
  limiter = table_info.rate_limiter_info
  return dict(
      current_size=table_info.current_size,
      max_size=table_info.max_size,
      max_times_sampled=table_info.max_times_sampled,
      sampler=table_info.sampler_options,
      remover=table_info.remover_options,
      num_episodes=table_info.num_episodes,
      num_deleted_episodes=table_info.num_deleted_episodes,
      num_unique_samples=table_info.num_unique_samples,
      inserts=limiter.insert_stats.completed,
      samples=limiter.sample_stats.completed)


@pytest.mark.parametrize('kind', sorted(SELECTORS))
def test_round_trip_restores_what_each_selector_samples_next(kind, tmp_path):
  root = tmp_path / 'checkpoints'
  model = TableModel(kind)
  server = start_server([selector_table(kind)], root)
  try:
    client = server.localhost_client()
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
      for t in range(len(PRIORITIES) + 1):
        writer.append(step(t))
        if t:
          item = {name: column[-2:] for name, column in writer.history.items()}
          writer.create_item('table', PRIORITIES[t - 1], item)
          model.insert(t - 1, PRIORITIES[t - 1], [t - 1, t])
      writer.end_episode(timeout_ms=TIMEOUT * 1000)

    # Sample, so that times_sampled differ (and ordered kinds delete), then
    # move a sampled item within the order and (random kinds) delete one.
    model.sample_and_check(client, 4 if kind in ORDERED else 80, 'before')
    seen = [i for i in model.items if model.key(i) is not None]
    assert seen
    updates = {model.key(seen[0]): 9.5}
    model.set_priority(seen[0], 9.5)
    if kind == 'max_heap':  # To the bottom of a max heap.
      updates = {model.key(seen[0]): 0.5}
      model.set_priority(seen[0], 0.5)
    deletes = []
    if kind not in ORDERED:
      deletes = [model.key(seen[1])]
      model.delete(seen[1])
    client.mutate_priorities('table', updates=updates, deletes=deletes,
                             timeout=TIMEOUT)
    saved = table_state(info(client))
    assert saved['current_size'] == len(model.items)

    path = checkpoint(client)
    assert pathlib.Path(path).parent == root
    assert_complete(path)
    # Not in the checkpoint, so not restored.
    client.insert(step(50), priorities={'table': 50.0})
  finally:
    stop(server)

  server = start_server([selector_table(kind)], root)
  try:
    client = server.localhost_client()
    assert table_state(info(client)) == saved
    # A new item takes its place after the restored ones.
    client.insert(step(100), priorities={'table': 4.5})
    model.insert(100, 4.5, [100])
    if kind in ORDERED:
      model.sample_and_check(client, model.budget(), 'after')
      assert not model.items
      assert info(client).current_size == 0
    else:
      model.sample_and_check(client, 100, 'after')
  finally:
    stop(server)


# ---------------------------------------------------------------------------
# Rate limiters.


def rate_limited_tables():
  return [
      # min_diff -1, max_diff 3 (samples_per_insert 1): 3 inserts reach the
      # insert limit; then 4 samples reach the sample limit.
      simple_table('ratio_inserts', rate_limiter=(
          reverb.rate_limiters.SampleToInsertRatio(1.0, 1, 2.0))),
      simple_table('ratio_samples', rate_limiter=(
          reverb.rate_limiters.SampleToInsertRatio(1.0, 1, 2.0))),
      reverb.Table.queue('queue', 3),
      simple_table('min_size', rate_limiter=reverb.rate_limiters.MinSize(3)),
  ]


def test_rate_limiters_continue_from_their_restored_counters(tmp_path):
  root = tmp_path / 'checkpoints'
  tables = rate_limited_tables()
  by_name = {table.name: table for table in tables}
  server = start_server(tables, root)
  try:
    client = server.localhost_client()
    insert_ids(client, range(3), 'ratio_inserts')
    insert_ids(client, range(3), 'ratio_samples')
    drain_ids(client, 4, 'ratio_samples')
    insert_ids(client, range(3), 'queue')
    assert drain_ids(client, 1, 'queue') == [0]
    insert_ids(client, range(2), 'min_size')
    assert not by_name['ratio_inserts'].can_insert(1)
    assert by_name['ratio_samples'].can_insert(1)
    assert not by_name['ratio_samples'].can_sample(1)
    assert by_name['queue'].can_insert(1)
    assert not by_name['queue'].can_insert(2)
    assert not by_name['min_size'].can_sample(1)
    checkpoint(client)
  finally:
    stop(server)

  tables = rate_limited_tables()
  by_name = {table.name: table for table in tables}
  server = start_server(tables, root)
  try:
    client = server.localhost_client()
    infos = client.server_info(timeout=TIMEOUT)
    counts = {name: (table_info.rate_limiter_info.insert_stats.completed,
                     table_info.rate_limiter_info.sample_stats.completed)
              for name, table_info in infos.items()}
    assert counts == {'ratio_inserts': (3, 0), 'ratio_samples': (3, 4),
                      'queue': (3, 1), 'min_size': (2, 0)}

    # Still at its insert limit: until it is sampled.
    assert not by_name['ratio_inserts'].can_insert(1)
    assert by_name['ratio_inserts'].can_sample(1)
    drain_ids(client, 1, 'ratio_inserts')
    assert by_name['ratio_inserts'].can_insert(1)

    # Still at its sample limit: one insert allows one more sample.
    assert not by_name['ratio_samples'].can_sample(1)
    with pytest.raises(reverb.DeadlineExceededError):
      next(client.sample('ratio_samples', emit_timesteps=False, timeout=0.2))
    insert_ids(client, [3], 'ratio_samples')
    assert by_name['ratio_samples'].can_sample(1)
    drain_ids(client, 1, 'ratio_samples')
    assert not by_name['ratio_samples'].can_sample(1)

    # The queue holds 2 of 3: room for one, then its items in order.
    assert by_name['queue'].can_insert(1)
    assert not by_name['queue'].can_insert(2)
    insert_ids(client, [3], 'queue')
    assert not by_name['queue'].can_insert(1)
    assert drain_ids(client, 3, 'queue') == [1, 2, 3]

    # Two of the three items MinSize needs.
    assert not by_name['min_size'].can_sample(1)
    insert_ids(client, [2], 'min_size')
    assert by_name['min_size'].can_sample(1)
  finally:
    stop(server)


# ---------------------------------------------------------------------------
# Checkpointer options.


def test_default_server_checkpoints_to_a_temporary_directory(
    tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
  server = bounded(lambda: reverb.Server([simple_table()]))
  try:
    client = server.localhost_client()
    insert_ids(client, range(2))
    path = checkpoint(client)
  finally:
    stop(server)
  assert os.path.isdir(path)
  assert pathlib.Path(path).parent.parent == tmp_path
  assert_complete(path)
  # A default server starts empty: its temporary directory is new.
  server = bounded(lambda: reverb.Server([simple_table()]))
  try:
    assert info(server.localhost_client()).current_size == 0
  finally:
    stop(server)


@pytest.mark.parametrize('keep_latest', [1, 2, 3])
def test_keep_latest_keeps_the_newest_checkpoints(keep_latest, tmp_path):
  root = tmp_path / 'checkpoints'
  paths = []
  server = start_server([simple_table()], root, keep_latest=keep_latest)
  try:
    client = server.localhost_client()
    for i in range(4):
      insert_ids(client, [i])
      paths.append(checkpoint(client))
  finally:
    stop(server)
  kept = [os.path.basename(p) for p in paths[-keep_latest:]]
  assert visible_entries(root) == kept
  assert not hidden_entries(root)
  for path in paths[-keep_latest:]:
    assert_complete(path)
  server = start_server([simple_table()], root)
  try:
    assert info(server.localhost_client()).current_size == 4
  finally:
    stop(server)


@pytest.mark.parametrize('kwargs', [dict(keep_latest=0),
                                    dict(zlib_level=10)])
def test_checkpointer_rejects_bad_options(kwargs, tmp_path):
  with pytest.raises(ValueError):
    checkpointers.DefaultCheckpointer(str(tmp_path), **kwargs)


def test_checkpoint_every_seconds_must_be_positive(tmp_path):
  with pytest.raises(ValueError, match='checkpoint_every_seconds'):
    start_server([simple_table()], tmp_path, checkpoint_every_seconds=0)


@pytest.mark.parametrize('zlib_level', [0, 9])
def test_any_zlib_level_round_trips(zlib_level, tmp_path):
  server = start_server([simple_table()], tmp_path, zlib_level=zlib_level)
  try:
    insert_ids(server.localhost_client(), range(5))
    checkpoint(server.localhost_client())
  finally:
    stop(server)
  server = start_server([simple_table()], tmp_path)
  try:
    client = server.localhost_client()
    assert info(client).current_size == 5
    assert set(drain_ids(client, 50)) <= set(range(5))
  finally:
    stop(server)


def test_fallback_checkpoint_starts_a_new_experiment(tmp_path):
  old_root, new_root = tmp_path / 'old', tmp_path / 'new'
  server = start_server([simple_table()], old_root)
  try:
    insert_ids(server.localhost_client(), range(3))
    fallback = checkpoint(server.localhost_client())
  finally:
    stop(server)

  # No checkpoint of its own yet: the fallback's items.
  server = start_server([simple_table()], new_root,
                        fallback_checkpoint_path=fallback)
  try:
    client = server.localhost_client()
    assert info(client).current_size == 3
    insert_ids(client, range(3, 5))
    new_path = checkpoint(client)
  finally:
    stop(server)
  assert pathlib.Path(new_path).parent == new_root

  # Its own checkpoint now wins over the fallback, which is untouched.
  server = start_server([simple_table()], new_root,
                        fallback_checkpoint_path=fallback)
  try:
    assert info(server.localhost_client()).current_size == 5
  finally:
    stop(server)
  assert visible_entries(old_root) == [os.path.basename(fallback)]
  server = start_server([simple_table()], old_root)
  try:
    assert info(server.localhost_client()).current_size == 3
  finally:
    stop(server)


# Ids 0..9 inserted in order with these priorities into a table of 10.
SHRINK_PRIORITIES = (3.0, 7.0, 1.0, 8.0, 5.0, 2.0, 6.0, 4.0, 10.0, 9.0)


def shrink_table(max_size, remover):
  # Samples each item once, oldest first: draining lists what it holds.
  return reverb.Table(name='table', sampler=reverb.selectors.Fifo(),
                      remover=remover(), max_size=max_size,
                      rate_limiter=reverb.rate_limiters.MinSize(1),
                      max_times_sampled=1)


@pytest.mark.parametrize('remover, remaining', [
    # The remover evicts as the items are restored in insertion order.
    (reverb.selectors.Fifo, [6, 7, 8, 9]),
    # A min-heap remover keeps the highest priorities.
    (reverb.selectors.MinHeap, [1, 3, 8, 9]),
])
def test_server_table_options_can_override_the_checkpoints(
    remover, remaining, tmp_path):
  server = start_server([shrink_table(10, remover)], tmp_path)
  try:
    client = server.localhost_client()
    for i, priority in enumerate(SHRINK_PRIORITIES):
      client.insert(np.int64(i), priorities={'table': priority})
    checkpoint(client)
  finally:
    stop(server)

  server = start_server([shrink_table(4, remover)], tmp_path,
                        use_checkpoint_table_options=False)
  try:
    client = server.localhost_client()
    table_info = info(client)
    assert table_info.max_size == 4
    assert table_info.current_size == 4
    assert table_info.rate_limiter_info.insert_stats.completed == 10
    assert drain_ids(client, 4) == remaining
  finally:
    stop(server)

  # By default (as dm-reverb) the checkpoint's options win.
  server = start_server([shrink_table(4, remover)], tmp_path)
  try:
    client = server.localhost_client()
    assert info(client).max_size == 10
    assert drain_ids(client, 10) == list(range(10))
  finally:
    stop(server)


@pytest.mark.parametrize('use_checkpoint_table_options', [True, False])
def test_signature_is_restored_with_the_table_options(
    use_checkpoint_table_options, tmp_path):
  signature = {'id': reverb.specs.TensorSpec([], np.int64, 'id'),
               'obs': reverb.specs.TensorSpec([3], np.float32, 'obs')}
  server = start_server([simple_table(signature=signature)], tmp_path)
  try:
    client = server.localhost_client()
    client.insert({'id': np.int64(7), 'obs': np.arange(3, dtype=np.float32)},
                  priorities={'table': 1.0})
    checkpoint(client)
  finally:
    stop(server)

  server = start_server(
      [simple_table()], tmp_path,
      use_checkpoint_table_options=use_checkpoint_table_options)
  try:
    client = server.localhost_client()
    if use_checkpoint_table_options:
      # As TensorSpecs of either kind: tf.TensorSpec once TensorFlow is
      # imported in this process (as a test run with the tf tests does).
      def describe(spec):
        dtype = getattr(spec.dtype, 'as_numpy_dtype', spec.dtype)
        return spec.name, list(spec.shape), np.dtype(dtype).name
      restored = info(client).signature
      assert sorted(restored) == sorted(signature)
      assert ({k: describe(v) for k, v in restored.items()} ==
              {k: describe(v) for k, v in signature.items()})
      sample = next(client.sample('table', emit_timesteps=False,
                                  unpack_as_table_signature=True,
                                  timeout=TIMEOUT))
      assert sorted(sample.data) == ['id', 'obs']
      np.testing.assert_array_equal(sample.data['id'], [7])
      np.testing.assert_array_equal(sample.data['obs'], [[0, 1, 2]])
    else:
      # The server's table has none.
      assert info(client).signature is None
      assert info(client).current_size == 1
  finally:
    stop(server)


def test_checkpoint_groups_are_not_supported(tmp_path):
  server = start_server([simple_table()], tmp_path, group='group')
  try:
    with pytest.raises(ValueError, match='group'):
      checkpoint(server.localhost_client())
  finally:
    stop(server)


def test_failed_save_raises_and_the_server_keeps_serving(tmp_path):
  not_a_dir = tmp_path / 'file'
  not_a_dir.write_text('')
  server = start_server([simple_table()], not_a_dir / 'checkpoints')
  try:
    client = server.localhost_client()
    insert_ids(client, range(2))
    with pytest.raises(RuntimeError, match='checkpoints'):
      checkpoint(client)
    insert_ids(client, [2])
    assert info(client).current_size == 3
    assert set(drain_ids(client, 30)) == {0, 1, 2}
  finally:
    stop(server)


def utc_checkpoint_name():
  """A checkpoint directory name for now (they are UTC RFC 3339 times)."""
  return datetime.datetime.now(datetime.timezone.utc).strftime(
      '%Y-%m-%dT%H:%M:%S.%f+00:00')


def test_checkpoint_every_seconds_saves_without_being_asked(tmp_path):
  root = tmp_path / 'checkpoints'
  server = start_server([simple_table()], root, checkpoint_every_seconds=0.2)
  try:
    insert_ids(server.localhost_client(), range(3))
    inserted = utc_checkpoint_name()
    # A save started after the inserts.
    deadline = time.monotonic() + TIMEOUT
    while not any(name > inserted for name in visible_entries(root)
                  if os.path.exists(root / name / 'DONE')):
      assert time.monotonic() < deadline, 'no periodic checkpoint appeared'
      time.sleep(0.05)
  finally:
    stop(server)
  server = start_server([simple_table()], root)
  try:
    assert info(server.localhost_client()).current_size == 3
  finally:
    stop(server)


# ---------------------------------------------------------------------------
# Faults.

_MB = 1 << 20


def random_megabyte(seed):
  return np.random.default_rng(seed).integers(0, 256, _MB, dtype=np.uint8)


def fill_big_table(client, count, table='table'):
  """`count` items of 1 MB of incompressible data."""
  for i in range(count):
    client.insert(random_megabyte(i), priorities={table: 1.0})


# The crash test's saver: this many small items in a first, complete
# checkpoint, then this many MB more in the save that is killed.
SAVER_GOOD_ITEMS = 3
SAVER_BIG_ITEMS = 8
# Where Save stops its process when REVERB_CHECKPOINT_STOP_AT names the point
# (checkpointer.h): after making its hidden directory, after writing each of
# tables.tfrecord and items.tfrecord, after the first chunk of
# chunks.tfrecord, with DONE written but before the rename, and after the
# rename but before older checkpoints are removed.
KILL_POINTS = ('started', 'tables', 'items', 'chunk', 'done', 'renamed')


def _saver_main(root, point):
  """Saves a small checkpoint (printing `SAVED <path>`), then a big one that
  stops the process at `point` (printing `SAVING` first)."""
  server = reverb.Server([simple_table(max_size=1000)],
                         checkpointer=checkpointers.DefaultCheckpointer(root))
  client = server.localhost_client()
  insert_ids(client, range(SAVER_GOOD_ITEMS))
  print('SAVED', client.checkpoint(), flush=True)
  fill_big_table(client, SAVER_BIG_ITEMS)
  os.environ['REVERB_CHECKPOINT_STOP_AT'] = point
  print('SAVING', flush=True)
  client.checkpoint()
  print('SAVED AGAIN (the stop point was not reached)', flush=True)


def _stopped(pid):
  """Whether every thread of process `pid` is stopped (state T)."""
  tasks = f'/proc/{pid}/task'
  def state(task):
    with open(f'{tasks}/{task}/stat') as f:
      # "pid (comm) state ...", and comm may hold spaces or parentheses.
      return f.read().rsplit(')', 1)[1].split()[0]
  return all(state(task) == 'T' for task in os.listdir(tasks))


def _wait_for(condition, what, proc, log):
  deadline = time.monotonic() + TIMEOUT
  while not condition():
    if proc.poll() is not None:
      pytest.fail(f'saver exited ({proc.returncode}) before {what}:\n'
                  f'{log.read_text()}')
    if time.monotonic() > deadline:
      pytest.fail(f'saver: no {what} in {TIMEOUT} s:\n{log.read_text()}')
    time.sleep(0.005)


def kill_mid_save(root, point, log):
  """Runs the saver until its second save stops at `point`, SIGKILLs it
  there; the path of its first (complete) checkpoint."""
  env = dict(os.environ, PYTHONUNBUFFERED='1')
  env.pop('REVERB_CHECKPOINT_STOP_AT', None)
  with open(log, 'w') as out:
    proc = subprocess.Popen(
        [sys.executable, __file__, '--saver', str(root), point], env=env,
        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
  try:
    _wait_for(lambda: 'SAVING' in log.read_text(), 'SAVING', proc, log)
    _wait_for(lambda: _stopped(proc.pid), f'stop at {point!r}', proc, log)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait(timeout=TIMEOUT)
  return log.read_text().split('SAVED ', 1)[1].split()[0]


@pytest.mark.parametrize('point', KILL_POINTS)
def test_process_killed_mid_save_keeps_the_previous_checkpoint(point,
                                                               tmp_path):
  root = tmp_path / 'checkpoints'
  good = kill_mid_save(root, point, tmp_path / 'saver.log')
  good_name = os.path.basename(good)
  intact = snapshot_files(good)
  restored_items = SAVER_GOOD_ITEMS
  if point == 'renamed':
    # The new checkpoint was complete and in place: it is the newest, and the
    # previous one is still there (not removed yet).
    assert not hidden_entries(root)
    assert len(visible_entries(root)) == 2
    assert visible_entries(root)[0] == good_name
    assert_complete(root / visible_entries(root)[1])
    restored_items += SAVER_BIG_ITEMS
  else:
    # The killed save is left hidden (it never completed): the first one is
    # the only checkpoint.
    assert len(hidden_entries(root)) == 1, 'the killed save left nothing'
    assert visible_entries(root) == [good_name]
  assert_complete(good)
  assert snapshot_files(good) == intact

  server = start_server([simple_table(max_size=1000)], root)
  try:
    client = server.localhost_client()
    assert info(client).current_size == restored_items
    # The next save clears what the killed one left.
    path = checkpoint(client)
  finally:
    stop(server)
  assert not hidden_entries(root)
  assert visible_entries(root) == [os.path.basename(path)]

  # The first checkpoint, as it was, still loads (copied before the save
  # above removed it).
  if point != 'renamed':
    return
  copy = tmp_path / 'copy'
  copy.mkdir()
  for name, data in intact.items():
    (copy / name).write_bytes(data)
  server = start_server([simple_table(max_size=1000)], tmp_path / 'empty',
                        fallback_checkpoint_path=str(copy))
  try:
    assert info(server.localhost_client()).current_size == SAVER_GOOD_ITEMS
  finally:
    stop(server)


def two_checkpoints(root):
  """An older checkpoint of 3 items and a newer one of 5; their paths."""
  server = start_server([simple_table()], root, keep_latest=2)
  try:
    client = server.localhost_client()
    insert_ids(client, range(3))
    older = checkpoint(client)
    insert_ids(client, range(3, 5))
    newer = checkpoint(client)
  finally:
    stop(server)
  assert visible_entries(root) == sorted(
      os.path.basename(p) for p in (older, newer))
  return older, newer


def snapshot_files(path):
  return {name: (pathlib.Path(path) / name).read_bytes()
          for name in CHECKPOINT_FILES}


def truncate(path):
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])


def empty(path):
  path.write_bytes(b'')


def flip_a_byte(path):
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xff
  path.write_bytes(bytes(data))


def flip_the_first_byte(path):
  """The zlib stream's header: not a checkpoint file (wrong magic)."""
  data = bytearray(path.read_bytes())
  data[0] ^= 0xff
  path.write_bytes(bytes(data))


def flip_the_last_byte(path):
  """The stream's final checksum."""
  data = bytearray(path.read_bytes())
  data[-1] ^= 0xff
  path.write_bytes(bytes(data))


def garbage(path):
  """As many random bytes."""
  size = len(path.read_bytes())
  path.write_bytes(np.random.default_rng(0).integers(
      0, 256, size, dtype=np.uint8).tobytes())


def wrong_kind(path):
  """Intact records of another kind: another file of the checkpoint."""
  other = 'tables.tfrecord' if path.name == 'items.tfrecord' else (
      'items.tfrecord')
  path.write_bytes((path.parent / other).read_bytes())


def remove(path):
  path.unlink()


CHECKPOINT_DATA_FILES = ('chunks.tfrecord', 'items.tfrecord',
                         'tables.tfrecord')
DAMAGES = (truncate, empty, flip_a_byte, flip_the_first_byte,
           flip_the_last_byte, garbage, wrong_kind, remove)
DAMAGE_CASES = [(damage, name) for damage in DAMAGES
                for name in CHECKPOINT_DATA_FILES]


def damaged_root(root, damage, file_name):
  """`root` with two checkpoints (3 items, then 5), the newer damaged; the
  older's path and files."""
  older, newer = two_checkpoints(root)
  intact = snapshot_files(older)
  damage(pathlib.Path(newer) / file_name)
  return older, newer, intact


@pytest.mark.parametrize('damage, file_name', DAMAGE_CASES,
                         ids=[f'{d.__name__}-{f}' for d, f in DAMAGE_CASES])
def test_corrupt_newest_checkpoint_falls_back_to_the_older_one(
    damage, file_name, tmp_path, caplog):
  root = tmp_path / 'checkpoints'
  older, newer, intact = damaged_root(root, damage, file_name)
  caplog.clear()

  server = start_server([simple_table()], root)
  try:
    client = server.localhost_client()
    assert info(client).current_size == 3
    assert set(drain_ids(client, 30)) == {0, 1, 2}
  finally:
    stop(server)
  # Warned why, naming the file; changed neither checkpoint.
  assert [r for r in caplog.records
          if r.name == 'reverb' and r.levelno == logging.WARNING and
          f'Skipping checkpoint {newer}' in r.getMessage() and
          file_name in r.getMessage()]
  assert snapshot_files(older) == intact
  assert visible_entries(root) == sorted(
      os.path.basename(p) for p in (older, newer))


_DMREVERB_PYTHON = (pathlib.Path(__file__).resolve().parents[2] /
                    '.venv-dmreverb' / 'bin' / 'python')

# What dm-reverb 0.14 restores from the same damaged roots (it never falls
# back to an older checkpoint): it refuses to start (RuntimeError "corrupted
# record ..."), except here, where it starts with what it could read:
# nothing (an empty table) for a missing file, or an empty chunks or items
# file. Ours falls back to the older checkpoint in every case (above).
DM_REVERB_RESTORES = {
    ('empty', 'chunks.tfrecord'): 0,
    ('empty', 'items.tfrecord'): 0,
    ('remove', 'chunks.tfrecord'): 0,
    ('remove', 'items.tfrecord'): 0,
    ('remove', 'tables.tfrecord'): 0,
}

_DM_LOADER = """
import sys
import reverb
from reverb import checkpointers
for root in sys.argv[1:]:
  table = reverb.Table('table', reverb.selectors.Uniform(),
                       reverb.selectors.Fifo(), 100,
                       reverb.rate_limiters.MinSize(1))
  try:
    server = reverb.Server(
        [table], checkpointer=checkpointers.DefaultCheckpointer(root))
  except RuntimeError:
    print('RESULT raises', flush=True)
    continue
  size = server.localhost_client().server_info()['table'].current_size
  print('RESULT', size, flush=True)
  server.stop()
"""


def test_dm_reverb_restores_the_damaged_checkpoints_differently(tmp_path):
  if not _DMREVERB_PYTHON.exists():
    pytest.skip(f'dm-reverb venv missing ({_DMREVERB_PYTHON}); run '
                '.ci/dmreverb_venv')
  roots = []
  for damage, file_name in DAMAGE_CASES:
    root = tmp_path / f'{damage.__name__}-{file_name}'
    damaged_root(root, damage, file_name)
    roots.append(str(root))
  done = subprocess.run(
      [str(_DMREVERB_PYTHON), '-I', '-c', _DM_LOADER, *roots],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'), check=False)
  results = [line.split()[1] for line in done.stdout.splitlines()
             if line.startswith('RESULT ')]
  assert len(results) == len(roots), done.stderr[-3000:]
  cases = [(d.__name__, f) for d, f in DAMAGE_CASES]
  assert dict(zip(cases, results)) == {
      case: str(DM_REVERB_RESTORES.get(case, 'raises')) for case in cases}


def test_checkpoint_without_done_is_ignored(tmp_path):
  root = tmp_path / 'checkpoints'
  older, newer = two_checkpoints(root)
  os.remove(pathlib.Path(newer) / 'DONE')
  server = start_server([simple_table()], root)
  try:
    assert info(server.localhost_client()).current_size == 3
  finally:
    stop(server)
  assert_complete(older)


def test_only_checkpoint_corrupt_refuses_to_start(tmp_path):
  # Not silently empty: the server does not start, and says which file.
  root = tmp_path / 'checkpoints'
  server = start_server([simple_table()], root)
  try:
    insert_ids(server.localhost_client(), range(3))
    path = checkpoint(server.localhost_client())
  finally:
    stop(server)
  flip_a_byte(pathlib.Path(path) / 'chunks.tfrecord')
  with pytest.raises(RuntimeError, match='chunks.tfrecord'):
    start_server([simple_table()], root)


def test_checkpoint_of_an_unknown_table_is_an_error(tmp_path):
  root = tmp_path / 'checkpoints'
  server = start_server([simple_table('old_name')], root)
  try:
    insert_ids(server.localhost_client(), range(3), 'old_name')
    path = checkpoint(server.localhost_client())
  finally:
    stop(server)
  with pytest.raises(ValueError, match='old_name'):
    start_server([simple_table('new_name')], root)
  # The checkpoint is still there for the right tables.
  assert_complete(path)
  server = start_server([simple_table('old_name'), simple_table('new_name')],
                        root)
  try:
    infos = server.localhost_client().server_info(timeout=TIMEOUT)
    assert infos['old_name'].current_size == 3
    assert infos['new_name'].current_size == 0
  finally:
    stop(server)


# ---------------------------------------------------------------------------
# Serving during a save.

BIG_TABLE_ITEMS = 32


def test_inserts_and_samples_continue_during_a_save(tmp_path):
  # zlib level 9 on incompressible data: a save of a second or so.
  server = start_server([simple_table(max_size=10_000)], tmp_path,
                        zlib_level=9)
  try:
    fill_big_table(server.localhost_client(), BIG_TABLE_ITEMS)
    done = threading.Event()
    completed = {'insert': [], 'sample': []}
    errors = []

    def insert_loop(client):
      i = 0
      while not done.is_set():
        client.insert(np.int64(i), priorities={'table': 1.0})
        completed['insert'].append(time.monotonic())
        i += 1

    def sample_loop(client):
      while not done.is_set():
        next(client.sample('table', emit_timesteps=False, timeout=TIMEOUT))
        completed['sample'].append(time.monotonic())

    def guarded(loop):
      def run():
        try:
          loop(server.localhost_client())
        except Exception as e:  # pylint: disable=broad-except
          errors.append(e)
      return run

    threads = [threading.Thread(target=guarded(loop), daemon=True)
               for loop in (insert_loop, sample_loop)]
    for thread in threads:
      thread.start()
    try:
      started = time.monotonic()
      checkpoint(server.localhost_client())
      finished = time.monotonic()
    finally:
      done.set()
      for thread in threads:
        thread.join(TIMEOUT)
    assert not errors
    assert not any(thread.is_alive() for thread in threads)
    for call, times in completed.items():
      during = [t for t in times if started < t < finished]
      assert during, (f'no {call} completed during the save '
                      f'({finished - started:.3f} s, {len(times)} in all)')
    final_size = info(server.localhost_client()).current_size
  finally:
    stop(server)

  # The checkpoint holds the items as of some moment of the save.
  server = start_server([simple_table(max_size=10_000)], tmp_path)
  try:
    restored = info(server.localhost_client()).current_size
    assert BIG_TABLE_ITEMS <= restored <= final_size
  finally:
    stop(server)


if __name__ == '__main__':
  if sys.argv[1:2] == ['--saver']:
    _saver_main(sys.argv[2], sys.argv[3])
