"""The other side of interop_test.py: a scenario any reverb package can run.

This file serves two interpreters:

- Run as a script with the dm-reverb 0.14 venv's Python, it plays a role
  against our package:
    dmreverb_peer.py client --address localhost:PORT
      runs `run_client_scenario` with dm-reverb's `reverb.Client` and prints
      one line `RESULT {json}`; exits 1 with a message on any mismatch.
    dmreverb_peer.py verify --address localhost:PORT --state JSON
      runs `check_final_state` with dm-reverb's `reverb.Client`, i.e. decodes
      what our client left on a server; prints `RESULT {json}` or exits 1.
    dmreverb_peer.py server --port-file PATH
      starts a dm-reverb `reverb.Server` holding `make_tables(reverb)`, writes
      its port to PATH (atomically) and waits until it is killed.
    dmreverb_peer.py checkpoint-save --dir D
      starts a dm-reverb server holding `make_tables(reverb)` with
      `DefaultCheckpointer(D)`, fills it with `fill_for_checkpoint`, saves a
      checkpoint and prints `RESULT {"path": ..., "state": ...}`.
    dmreverb_peer.py checkpoint-load --dir D
      starts a dm-reverb server holding `make_tables(reverb)` restored from
      D and prints `RESULT {contents}` (`read_checkpoint_contents`).
- Imported by interop_test.py (with our package), it supplies the same table
  definitions, payloads and scenario, so both sides agree on what is expected.

So the module itself imports only the standard library and numpy; the reverb
module to use is always passed in.
"""

import argparse
import faulthandler
import hashlib
import json
import os
import sys

import numpy as np

# Tables both servers hold: (name, sampler, max_times_sampled). All use a Fifo
# remover, max_size MAX_SIZE and rate limiter MinSize(1).
MAX_SIZE = 1000
PRIORITY_EXPONENT = 0.8
TABLES = (
    ('uniform', 'uniform', 0),
    ('prio', 'prioritized', 0),
    ('queue', 'fifo', 1),
)
RESULT_PREFIX = 'RESULT '


class Mismatch(AssertionError):
  """What a reverb package returned differs from what dm-reverb returns."""


def make_tables(reverb):
  """`TABLES` built with the given reverb module."""
  samplers = {
      'uniform': reverb.selectors.Uniform,
      'prioritized': lambda: reverb.selectors.Prioritized(PRIORITY_EXPONENT),
      'fifo': reverb.selectors.Fifo,
  }
  return [
      reverb.Table(name=name, sampler=samplers[kind](),
                   remover=reverb.selectors.Fifo(), max_size=MAX_SIZE,
                   rate_limiter=reverb.rate_limiters.MinSize(1),
                   max_times_sampled=max_times_sampled)
      for name, kind, max_times_sampled in TABLES
  ]


def frame_pattern():
  """An 84x84x4 uint8 frame whose bytes are all distinguishable by position."""
  return (np.arange(84 * 84 * 4, dtype=np.int64) % 251).astype(
      np.uint8).reshape(84, 84, 4)


def noise_bytes(size):
  """`size` incompressible bytes, the same in every numpy (a SHA-256 stream):
  ours stores such a chunk as one snappy literal, not compressed."""
  blocks = (hashlib.sha256(i.to_bytes(4, 'little')).digest()
            for i in range((size + 31) // 32))
  return np.frombuffer(b''.join(blocks)[:size], np.uint8)


def payloads():
  """[(name, data to insert, the flat columns one step of it comes back as)].

  The expected columns are what dm-reverb 0.14 returns (checked with it):
  nests are flattened in `tree.flatten` order (dict keys sorted), Python
  floats become float64 and ints int64, and strings of either kind come back
  as object arrays of bytes.
  """
  vec = np.array([0.5, 1.5, 2.5, -3.25], np.float32)
  scalar = np.int64(-(2**40) + 7)
  frame = frame_pattern()
  raw = np.array([b'reverb', b'', b'\x00\xff\x10'], dtype=object)
  obs = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
  text = np.array(['h\u00e9llo', 'x'])
  noise = noise_bytes(70_000)  # Larger than ours probes before compressing.
  return [
      ('vec', vec, [vec]),
      ('scalar', scalar, [np.array(scalar)]),
      ('frame', frame, [frame]),
      ('bytes', raw, [raw]),
      ('nested', {'step': 2, 'reward': -1.25, 'obs': obs,
                  'done': np.array(True)},
       [np.array(True), obs, np.array(-1.25), np.array(2, np.int64)]),
      ('text', text,
       [np.array([s.encode('utf-8') for s in text], dtype=object)]),
      ('noise', noise, [noise]),
  ]


def _check(condition, message):
  if not condition:
    raise Mismatch(message)


def check_columns(what, expected, got, batched):
  """`got` (sampled data) holds exactly `expected`'s columns.

  With `batched`, each column carries a leading dimension of 1 (a one-step
  trajectory, as `sample(emit_timesteps=False)` returns it).
  """
  _check(isinstance(got, list),
         f'{what}: data should be a list, got {type(got).__name__}')
  _check(len(got) == len(expected),
         f'{what}: {len(got)} columns, expected {len(expected)}')
  for i, (want, col) in enumerate(zip(expected, got)):
    want = np.asarray(want)
    if batched:
      want = want[np.newaxis]
    _check(isinstance(col, np.ndarray),
           f'{what}[{i}]: a {type(col).__name__}, expected a numpy array')
    _check(col.dtype == want.dtype,
           f'{what}[{i}]: dtype {col.dtype}, expected {want.dtype}')
    _check(col.shape == want.shape,
           f'{what}[{i}]: shape {col.shape}, expected {want.shape}')
    _check(np.array_equal(col, want),
           f'{what}[{i}]: values differ: {col!r} vs {want!r}'[:400])


def check_info(what, info, **expected):
  """`info` is a SampleInfo of Python scalars with the given field values."""
  _check(type(info).__name__ == 'SampleInfo',
         f'{what}: info is a {type(info).__name__}')
  _check(info._fields == ('key', 'probability', 'table_size', 'priority',
                          'times_sampled'),
         f'{what}: SampleInfo fields {info._fields}')
  for field, kind in (('key', int), ('probability', float),
                      ('table_size', int), ('priority', float),
                      ('times_sampled', int)):
    value = getattr(info, field)
    _check(type(value) is kind,  # pylint: disable=unidiomatic-typecheck
           f'{what}: info.{field} is a {type(value).__name__}, '
           f'expected {kind.__name__}')
  for field, want in expected.items():
    value = getattr(info, field)
    ok = (abs(value - want) <= 1e-9 * max(1.0, abs(want))
          if isinstance(want, float) else value == want)
    _check(ok, f'{what}: info.{field} = {value!r}, expected {want!r}')


def check_sample(what, sample):
  _check(type(sample).__name__ == 'ReplaySample' and
         sample._fields == ('info', 'data'),
         f'{what}: a {type(sample).__name__}, expected ReplaySample(info, data)')


def check_server_info(reverb_info, sizes):
  """`reverb_info` (Client.server_info()) describes `TABLES` with `sizes`."""
  _check(sorted(reverb_info) == sorted(name for name, _, _ in TABLES),
         f'server_info tables: {sorted(reverb_info)}')
  for name, kind, max_times_sampled in TABLES:
    info = reverb_info[name]
    _check(info.name == name, f'server_info[{name!r}].name = {info.name!r}')
    _check(info.max_size == MAX_SIZE,
           f'{name}: max_size {info.max_size}')
    _check(info.max_times_sampled == max_times_sampled,
           f'{name}: max_times_sampled {info.max_times_sampled}')
    sampler = info.sampler_options.WhichOneof('distribution')
    _check(sampler == kind, f'{name}: sampler {sampler}, expected {kind}')
    if kind == 'prioritized':
      exponent = info.sampler_options.prioritized.priority_exponent
      _check(abs(exponent - PRIORITY_EXPONENT) < 1e-12,
             f'{name}: priority_exponent {exponent}')
    remover = info.remover_options.WhichOneof('distribution')
    _check(remover == 'fifo', f'{name}: remover {remover}')
    _check(info.rate_limiter_info.min_size_to_sample == 1,
           f'{name}: min_size_to_sample '
           f'{info.rate_limiter_info.min_size_to_sample}')
    _check(info.signature is None, f'{name}: signature {info.signature}')
    _check(info.current_size == sizes[name],
           f'{name}: current_size {info.current_size}, expected {sizes[name]}')


def insert_uniform_payloads(client):
  """Inserts payload i into 'uniform' with priority i + 1 (its identity)."""
  for i, (_, data, _) in enumerate(payloads()):
    client.insert(data, priorities={'uniform': float(i + 1)})


def check_uniform_samples(client, num_samples, emit_timesteps, **sample_kw):
  """Samples 'uniform' (filled by `insert_uniform_payloads`) and checks every
  sample's info and data, identifying the payload by its priority.
  Returns the item keys seen."""
  expected = payloads()
  n = len(expected)
  keys = {}  # priority -> key
  samples = client.sample('uniform', num_samples=num_samples,
                          emit_timesteps=emit_timesteps, **sample_kw)
  count = 0
  for sample in samples:
    what = f'uniform sample {count} (emit_timesteps={emit_timesteps})'
    if emit_timesteps:
      _check(isinstance(sample, list) and len(sample) == 1,
             f'{what}: expected a list of one ReplaySample, got {sample!r}'
             [:400])
      sample = sample[0]
    check_sample(what, sample)
    index = int(sample.info.priority) - 1
    _check(0 <= index < n and sample.info.priority == index + 1,
           f'{what}: unexpected priority {sample.info.priority}')
    name, _, columns = expected[index]
    check_info(f'{what} ({name})', sample.info, probability=1.0 / n,
               table_size=n)
    _check(sample.info.times_sampled >= 1,
           f'{what}: times_sampled {sample.info.times_sampled}')
    check_columns(f'{what} ({name})', columns, sample.data,
                  batched=not emit_timesteps)
    key = keys.setdefault(sample.info.priority, sample.info.key)
    _check(key == sample.info.key,
           f'{what}: keys {key} and {sample.info.key} for one item')
    count += 1
  _check(count == num_samples,
         f'sample() yielded {count} samples, expected {num_samples}')
  _check(len(set(keys.values())) == len(keys), f'items share keys: {keys}')
  return set(keys.values())


def check_unknown_table_errors(client, **sample_kw):
  """Calls naming a table the server lacks raise RuntimeError naming it (the
  server's NOT_FOUND 'Priority table X was not found')."""
  calls = {
      'reset': lambda: client.reset('missing_table'),
      'mutate_priorities': lambda: client.mutate_priorities(
          'missing_table', updates={1: 1.0}),
      'sample': lambda: next(iter(client.sample(
          'missing_table', num_samples=1, emit_timesteps=False,
          **sample_kw))),
  }
  for name, call in calls.items():
    try:
      call()
    except RuntimeError as e:
      _check('missing_table' in str(e),
             f'{name} on an unknown table: message {str(e)!r}')
    else:
      raise Mismatch(f'{name} on an unknown table did not raise RuntimeError')


def run_client_scenario(reverb, address, sample_kw=None, server_info_kw=None):
  """Drives a server holding empty `TABLES` through every Client call.

  Leaves the server with 'uniform' holding the payloads (priority i + 1),
  'prio' holding one item (key in the result) of priority 10.0, and 'queue'
  empty. Returns a JSON-able dict describing that state.
  """
  sample_kw = dict(sample_kw or {})
  server_info_kw = dict(server_info_kw or {})
  client = reverb.Client(address)
  expected = payloads()
  n = len(expected)
  sizes = {name: 0 for name, _, _ in TABLES}
  check_server_info(client.server_info(**server_info_kw), sizes)

  # One insert into two tables: 'queue' hands the payloads back in order.
  for i, (_, data, _) in enumerate(expected):
    client.insert(data, priorities={'queue': 1.0, 'uniform': float(i + 1)})
  sizes.update(queue=n, uniform=n)
  check_server_info(client.server_info(**server_info_kw), sizes)

  samples = client.sample('queue', num_samples=n, emit_timesteps=False,
                          **sample_kw)
  got = 0
  for i, sample in enumerate(samples):
    name, _, columns = expected[i]
    what = f'queue sample {i} ({name})'
    check_sample(what, sample)
    # table_size counts the item itself: it is removed after being sampled.
    check_info(what, sample.info, probability=1.0, table_size=n - i,
               priority=1.0, times_sampled=1)
    check_columns(what, columns, sample.data, batched=True)
    got += 1
  _check(got == n, f'queue: sample() yielded {got} samples, expected {n}')
  sizes['queue'] = 0
  check_server_info(client.server_info(**server_info_kw), sizes)

  # Steps whose compressed tensors are large (ours sends such tensors from
  # the chunk, in slices of their own), through both writers.
  big = np.random.default_rng(0).integers(0, 256, 100_000, np.uint8)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    writer.append({'big': big, 'small': np.int64(5)})
    writer.create_item('queue', 1.0, {'big': writer.history['big'][-1],
                                      'small': writer.history['small'][-1]})
  client.insert([big, np.int64(6)], priorities={'queue': 1.0})
  samples = list(client.sample('queue', num_samples=2, emit_timesteps=False,
                               **sample_kw))
  _check(len(samples) == 2, f'large steps: {len(samples)} samples')
  check_columns('large writer step', [big, np.int64(5)], samples[0].data,
                batched=False)
  check_columns('large insert', [big, np.int64(6)], samples[1].data,
                batched=True)
  check_server_info(client.server_info(**server_info_kw), sizes)

  keys = check_uniform_samples(client, 3 * n, False, **sample_kw)
  keys |= check_uniform_samples(client, 2 * n, True, **sample_kw)

  # Prioritized: two items of priority 1 and 3; find their keys by sampling.
  client.insert(np.float32(1), priorities={'prio': 1.0})
  client.insert(np.float32(3), priorities={'prio': 3.0})
  sizes['prio'] = 2
  prio_keys = {}
  total = 1.0 + 3.0**PRIORITY_EXPONENT
  for _ in range(5):
    for sample in client.sample('prio', num_samples=20, emit_timesteps=False,
                                **sample_kw):
      check_sample('prio sample', sample)
      priority = sample.info.priority
      _check(priority in (1.0, 3.0), f'prio: priority {priority}')
      check_info('prio sample', sample.info, table_size=2,
                 probability=priority**PRIORITY_EXPONENT / total)
      check_columns('prio sample', [np.float32(priority)], sample.data,
                    batched=True)
      prio_keys[priority] = sample.info.key
    if len(prio_keys) == 2:
      break
  _check(len(prio_keys) == 2, f'prio: sampled only {prio_keys} in 100 tries')
  _check(not prio_keys.keys() & keys, 'prio: item keys repeat other keys')

  # Unknown keys are ignored; deletes are applied, updates are visible.
  client.mutate_priorities('prio', updates={prio_keys[1.0]: 10.0,
                                            12345: 2.0})
  client.mutate_priorities('prio', deletes=[prio_keys[3.0], 54321])
  sizes['prio'] = 1
  check_server_info(client.server_info(**server_info_kw), sizes)
  for sample in client.sample('prio', num_samples=3, emit_timesteps=False,
                              **sample_kw):
    check_sample('prio after mutate', sample)
    check_info('prio after mutate', sample.info, key=prio_keys[1.0],
               priority=10.0, probability=1.0, table_size=1)
    check_columns('prio after mutate', [np.float32(1)], sample.data,
                  batched=True)

  check_unknown_table_errors(client, **sample_kw)
  client.reset('uniform')
  sizes['uniform'] = 0
  check_server_info(client.server_info(**server_info_kw), sizes)
  insert_uniform_payloads(client)
  sizes['uniform'] = n
  check_server_info(client.server_info(**server_info_kw), sizes)
  return {'ok': True, 'prio_key': prio_keys[1.0], 'prio_priority': 10.0,
          'sizes': sizes}


def check_final_state(client, state, sample_kw=None, server_info_kw=None):
  """The server behind `client` is as `run_client_scenario` left it.

  `state` is the scenario's result (possibly through JSON).
  """
  sample_kw = dict(sample_kw or {})
  check_server_info(client.server_info(**dict(server_info_kw or {})),
                    state['sizes'])
  n = len(payloads())
  check_uniform_samples(client, 2 * n, False, **sample_kw)
  check_uniform_samples(client, n, True, **sample_kw)
  for sample in client.sample('prio', num_samples=2, emit_timesteps=False,
                              **sample_kw):
    check_sample('final prio sample', sample)
    check_info('final prio sample', sample.info, key=state['prio_key'],
               priority=state['prio_priority'], probability=1.0,
               table_size=1)
    check_columns('final prio sample', [np.float32(1)], sample.data,
                  batched=True)


# Checkpoints: `fill_for_checkpoint` leaves a known state on a server holding
# empty `TABLES`; after a checkpoint of it is restored (by either package),
# `read_checkpoint_contents` reads every item back by sampling, and
# `check_checkpoint_contents` compares the two.
CHECKPOINT_PRIO_VALUES = (1, 2, 3, 4, 5)
CHECKPOINT_QUEUE_STEPS = 6  # 2-step queue items over them: 5 items.
CHECKPOINT_QUEUE_SAMPLED = 2  # Queue items sampled (so gone) before saving.
# Enough samples to see every item of 'uniform' / 'prio' (a miss is < 1e-8).
_UNIFORM_SAMPLES = 150
_PRIO_SAMPLES = 300
_READ_SAMPLES = 400


def queue_step(t):
  return {'a': np.int64(10 + t), 'b': np.full(2, t, np.float32)}


def checkpoint_item_columns(table, ident):
  """The flat columns (leading time axis) of item `ident` of `table` as
  `fill_for_checkpoint` wrote it."""
  if table == 'uniform':
    return [np.asarray(c)[np.newaxis] for c in payloads()[ident][2]]
  if table == 'prio':
    return [np.array([ident], np.float32)]
  steps = [queue_step(ident - 1), queue_step(ident)]
  return [np.stack([s['a'] for s in steps]), np.stack([s['b'] for s in steps])]


def describe_columns(columns):
  """JSON-able, exact description of sampled columns (dtype, shape, bytes)."""
  described = []
  for column in columns:
    column = np.asarray(column)
    if column.dtype == object:
      values = [bytes(v).hex() for v in column.flat]
    else:
      values = column.tobytes().hex()
    described.append([str(column.dtype), list(column.shape), values])
  return described


def _table_summary(info):
  """What a restored table reports as the saved one did (dm-reverb 0.14
  restores all of it)."""
  limiter = info.rate_limiter_info
  return {
      'current_size': info.current_size,
      'num_episodes': info.num_episodes,
      'num_deleted_episodes': info.num_deleted_episodes,
      'num_unique_samples': info.num_unique_samples,
      'inserts': limiter.insert_stats.completed,
      'samples': limiter.sample_stats.completed,
  }


def _sample_all(client, table, num_samples, sample_kw):
  return list(client.sample(table, num_samples=num_samples,
                            emit_timesteps=False, **sample_kw))


def fill_for_checkpoint(client, sample_kw=None, server_info_kw=None):
  """Fills a server holding empty `TABLES` for a checkpoint; returns its
  state as a JSON-able dict: per table, the items (key, current priority,
  times_sampled, `ident` for `checkpoint_item_columns`), and per table a
  summary of its info (size, episode and sample counts, rate limiter
  counters).

  'uniform' holds the payloads, sampled ~25 times each, one with a mutated
  priority; 'prio' values 1..5 (priority = value), sampled, then value 2
  reprioritized to 7.5 and value 4 deleted, then sampled again; 'queue'
  2-step items (a trajectory writer) of which the first two were sampled
  (and so removed).
  """
  sample_kw = dict(sample_kw or {})
  state = {name: {} for name, _, _ in TABLES}

  insert_uniform_payloads(client)
  n = len(payloads())
  for sample in _sample_all(client, 'uniform', _UNIFORM_SAMPLES, sample_kw):
    ident = int(sample.info.priority) - 1
    item = state['uniform'].setdefault(sample.info.key, {
        'key': sample.info.key, 'priority': sample.info.priority,
        'times_sampled': 0, 'ident': ident})
    _check(item['ident'] == ident, f'uniform: key {item["key"]} changed')
    item['times_sampled'] += 1
  _check(len(state['uniform']) == n,
         f'uniform: saw {len(state["uniform"])} of {n} items in '
         f'{_UNIFORM_SAMPLES} samples')
  frame = next(i for i in state['uniform'].values() if i['ident'] == 2)
  client.mutate_priorities('uniform', updates={frame['key']: 0.25})
  frame['priority'] = 0.25

  for value in CHECKPOINT_PRIO_VALUES:
    client.insert(np.float32(value), priorities={'prio': float(value)})

  def sample_prio(num_samples):
    for sample in _sample_all(client, 'prio', num_samples, sample_kw):
      value = int(sample.data[0][0])
      item = state['prio'].setdefault(sample.info.key, {
          'key': sample.info.key, 'priority': float(value),
          'times_sampled': 0, 'ident': value})
      _check(item['ident'] == value, f'prio: key {item["key"]} changed')
      _check(sample.info.priority == item['priority'],
             f'prio: priority {sample.info.priority} of {item}')
      item['times_sampled'] += 1

  sample_prio(_PRIO_SAMPLES)
  _check(len(state['prio']) == len(CHECKPOINT_PRIO_VALUES),
         f'prio: saw {len(state["prio"])} items in {_PRIO_SAMPLES} samples')
  by_value = {item['ident']: item for item in state['prio'].values()}
  client.mutate_priorities('prio', updates={by_value[2]['key']: 7.5},
                           deletes=[by_value[4]['key']])
  by_value[2]['priority'] = 7.5
  del state['prio'][by_value[4]['key']]
  sample_prio(50)

  writer = client.trajectory_writer(num_keep_alive_refs=2)
  for t in range(CHECKPOINT_QUEUE_STEPS):
    writer.append(queue_step(t))
    if t >= 1:
      writer.create_item('queue', priority=0.5 + t, trajectory={
          'a': writer.history['a'][-2:], 'b': writer.history['b'][-2:]})
  writer.end_episode(timeout_ms=30_000)
  writer.close()
  queue = []
  for t in range(1, CHECKPOINT_QUEUE_STEPS):
    queue.append({'key': None, 'priority': 0.5 + t, 'times_sampled': 0,
                  'ident': t})
  for sample in _sample_all(client, 'queue', CHECKPOINT_QUEUE_SAMPLED,
                            sample_kw):
    expected = queue.pop(0)
    check_columns(f'queue item {expected["ident"]}',
                  checkpoint_item_columns('queue', expected['ident']),
                  sample.data, batched=False)

  infos = client.server_info(**dict(server_info_kw or {}))
  return {
      'tables': {
          'uniform': sorted(state['uniform'].values(), key=lambda i: i['key']),
          'prio': sorted(state['prio'].values(), key=lambda i: i['key']),
          'queue': queue,
      },
      'info': {name: _table_summary(infos[name]) for name, _, _ in TABLES},
  }


def read_checkpoint_contents(client, sample_kw=None, server_info_kw=None):
  """Reads back what a server restored from a `fill_for_checkpoint`
  checkpoint holds (consuming it: times_sampled grow, the queue empties).

  Returns a JSON-able dict: 'info' as in `fill_for_checkpoint`, and per
  table the items (key, priority, times_sampled before this read, `data` as
  `describe_columns`), 'queue' in sampling order, the others by key. Checks
  on the way that every sample's probability and table_size follow from
  the restored priorities.
  """
  sample_kw = dict(sample_kw or {})
  infos = client.server_info(**dict(server_info_kw or {}))
  contents = {
      'info': {name: _table_summary(infos[name]) for name, _, _ in TABLES},
      'tables': {},
  }
  for name in ('uniform', 'prio'):
    size = infos[name].current_size
    items = {}
    samples = _sample_all(client, name, _READ_SAMPLES, sample_kw)
    for sample in samples:
      key = sample.info.key
      if key not in items:
        items[key] = {'key': key, 'priority': sample.info.priority,
                      'times_sampled': sample.info.times_sampled - 1,
                      'data': describe_columns(sample.data),
                      'seen': sample.info.times_sampled - 1}
      item = items[key]
      item['seen'] += 1
      _check(sample.info.times_sampled == item['seen'],
             f'{name}: times_sampled {sample.info.times_sampled} of {key}, '
             f'expected {item["seen"]}')
      _check(sample.info.priority == item['priority'],
             f'{name}: priority of {key} changed')
      _check(sample.info.table_size == size,
             f'{name}: table_size {sample.info.table_size}, expected {size}')
    _check(len(items) == size,
           f'{name}: saw {len(items)} of {size} items in {_READ_SAMPLES} '
           f'samples')
    if name == 'uniform':
      weights = {key: 1.0 for key in items}
    else:
      weights = {key: item['priority']**PRIORITY_EXPONENT
                 for key, item in items.items()}
    total = sum(weights.values())
    for sample in samples:
      check_info(f'{name} sample', sample.info,
                 probability=weights[sample.info.key] / total)
    for item in items.values():
      del item['seen']
    contents['tables'][name] = sorted(items.values(), key=lambda i: i['key'])
  queue = []
  size = infos['queue'].current_size
  if size:
    for sample in _sample_all(client, 'queue', size, sample_kw):
      queue.append({'key': sample.info.key, 'priority': sample.info.priority,
                    'times_sampled': sample.info.times_sampled - 1,
                    'data': describe_columns(sample.data)})
  contents['tables']['queue'] = queue
  return contents


def check_checkpoint_contents(state, contents):
  """`contents` (`read_checkpoint_contents`) holds what `state`
  (`fill_for_checkpoint`) describes: the same info, and item for item the
  same keys (where known), priorities, times_sampled and data."""
  for name, _, _ in TABLES:
    _check(contents['info'][name] == state['info'][name],
           f'{name}: restored info {contents["info"][name]}, saved '
           f'{state["info"][name]}')
    saved = state['tables'][name]
    restored = contents['tables'][name]
    _check(len(restored) == len(saved),
           f'{name}: {len(restored)} items restored, {len(saved)} saved')
    for want, got in zip(saved, restored):
      what = f'{name} item {want["ident"]}'
      if want['key'] is not None:
        _check(got['key'] == want['key'],
               f'{what}: key {got["key"]}, expected {want["key"]}')
      for field in ('priority', 'times_sampled'):
        _check(got[field] == want[field],
               f'{what}: {field} {got[field]}, expected {want[field]}')
      expected = describe_columns(checkpoint_item_columns(name, want['ident']))
      _check(got['data'] == expected,
             f'{what}: data {got["data"]}, expected {expected}'[:600])


# dm-reverb's Client has no timeouts on insert/sample: server_info waits at
# most this long, and the whole role is bounded by --timeout (see main).
_DMREVERB_SERVER_INFO_KW = {'timeout': 30}


def _client_role(args):
  import reverb  # pylint: disable=g-import-not-at-top
  result = run_client_scenario(reverb, args.address,
                               server_info_kw=_DMREVERB_SERVER_INFO_KW)
  print(RESULT_PREFIX + json.dumps(result), flush=True)


def _verify_role(args):
  import reverb  # pylint: disable=g-import-not-at-top
  check_final_state(reverb.Client(args.address), json.loads(args.state),
                    server_info_kw=_DMREVERB_SERVER_INFO_KW)
  print(RESULT_PREFIX + json.dumps({'ok': True}), flush=True)


def _server_role(args):
  import reverb  # pylint: disable=g-import-not-at-top
  server = reverb.Server(tables=make_tables(reverb))
  tmp = args.port_file + '.tmp'
  with open(tmp, 'w') as f:
    f.write(str(server.port))
  os.replace(tmp, args.port_file)
  server.wait()


def _checkpoint_save_role(args):
  import reverb  # pylint: disable=g-import-not-at-top
  server = reverb.Server(
      tables=make_tables(reverb),
      checkpointer=reverb.checkpointers.DefaultCheckpointer(path=args.dir))
  try:
    client = reverb.Client(f'localhost:{server.port}')
    state = fill_for_checkpoint(client, server_info_kw=_DMREVERB_SERVER_INFO_KW)
    path = client.checkpoint()
  finally:
    server.stop()
  print(RESULT_PREFIX + json.dumps({'path': path, 'state': state}),
        flush=True)


def _checkpoint_load_role(args):
  import reverb  # pylint: disable=g-import-not-at-top
  server = reverb.Server(
      tables=make_tables(reverb),
      checkpointer=reverb.checkpointers.DefaultCheckpointer(path=args.dir))
  try:
    contents = read_checkpoint_contents(
        reverb.Client(f'localhost:{server.port}'),
        server_info_kw=_DMREVERB_SERVER_INFO_KW)
  finally:
    server.stop()
  print(RESULT_PREFIX + json.dumps(contents), flush=True)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  roles = parser.add_subparsers(dest='role', required=True)
  client = roles.add_parser('client', help='run the client scenario')
  client.add_argument('--address', required=True)
  verify = roles.add_parser('verify', help='check the scenario\'s end state')
  verify.add_argument('--address', required=True)
  verify.add_argument('--state', required=True,
                      help='JSON result of the client scenario')
  checkpoint_save = roles.add_parser(
      'checkpoint-save', help='fill a server and save a checkpoint in --dir')
  checkpoint_load = roles.add_parser(
      'checkpoint-load', help='restore a server from --dir and read it back')
  for role in (checkpoint_save, checkpoint_load):
    role.add_argument('--dir', required=True,
                      help='root directory of the checkpoints')
  for role in (client, verify, checkpoint_save, checkpoint_load):
    role.add_argument('--timeout', type=float, default=90,
                      help='seconds before the role gives up, dumping the '
                      'stacks of all threads')
  server = roles.add_parser('server', help='serve TABLES until killed')
  server.add_argument('--port-file', required=True)
  args = parser.parse_args(argv)
  if args.role == 'server':
    _server_role(args)
    return 0
  # A server that never answers must not hang the role: report where it
  # was stuck and exit.
  faulthandler.dump_traceback_later(args.timeout, exit=True)
  try:
    {
        'client': _client_role,
        'verify': _verify_role,
        'checkpoint-save': _checkpoint_save_role,
        'checkpoint-load': _checkpoint_load_role,
    }[args.role](args)
  except Mismatch as e:
    print(f'MISMATCH: {e}', file=sys.stderr, flush=True)
    return 1
  finally:
    faulthandler.cancel_dump_traceback_later()
  return 0


if __name__ == '__main__':
  # TensorFlow's C++ start-up chatter (oneDNN, CPU features) is noise here.
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())
