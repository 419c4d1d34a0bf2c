"""TrajectoryWriter throughput over gRPC: items/s and MB/s of steps written.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14; it uses only
their shared public API (Client.trajectory_writer, append, history,
create_item, end_episode, flush; Client.sample and Client.server_info to
check), so the same command measures both:

  .venv/bin/python bench/writer_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/writer_bench.py [--quick] [--json OUT]

The server runs in a child process and so does every writer (this script
with --serve and --worker N, same interpreter); the parent only coordinates
and checks (--same-process: the server runs in the parent). Payloads, one
step each:
  small  {'action': int64, 'discount': float32, 'obs': float32[4],
         'reward': float32}, 32 bytes;
  frame  {'frame': uint8[84, 84, 4]}, 28 KB;
  1MB    {'data': float32[262144]}, 1 MiB.
Workloads (one item of priority 1.0 per step; every writer uses its own
Client):
  1 writer, 4 writers  `trajectory_writer(num_keep_alive_refs=2)`; per step
      `append(step)` and `create_item(table, 1.0, {k: history[k][-1]})`,
      `end_episode()` every 100 steps, `flush()` at the end, all timed. Four
      writers are four processes told to start at once; their rate is all
      their items over the wall time from the first start to the last
      flush.
  T=1000 ... (small only)  steps come in batches of T=1000, each batch an
      episode: the writer keeps T steps (`num_keep_alive_refs=T`), takes the
      batch, then makes one item per step of it
      (`{k: history[k][t - T]}` for t < T), then `end_episode()`. The
      batch goes in with one `append_batch` call ("append_batch", ours
      only: dm-reverb has no such method; the row is then not run) or with
      T `append` calls ("append loop", both packages). The "1 item" rows
      make only the item of the batch's last step: they measure appending
      (and the episode's end), not items. "append_batch + create_items"
      makes the T items with one `create_items` call (ours only). These
      rows count steps, not items.
  32 per call (small only)  one long-lived writer (`num_keep_alive_refs=32`)
      takes 32 steps and one item per step per call, `end_episode()` every
      1024 steps: with `append_batch` and one `create_items` ("append_batch
      + create_items", ours only) or with 32 `append` and `create_item`
      calls ("append loop", both packages: dm-reverb's best way). As
      TorchRL's `extend` of 32 items.
Each writer first writes 20 untimed steps (or one batch) with the same writer
and ends that episode: connection and stream set-up are not timed. Every
workload has its own table (uniform sampling, Fifo removal, MinSize(1)).
Afterwards the table's completed inserts must equal the steps written, and
32 sampled items are checked (columns, dtypes, shapes, and the contents,
which encode the writer and step), so a build that loses or garbles data
fails instead of scoring. Steps are made beforehand and repeat after a pool
of 1000 (small), 256 (frame) or 32 (1MB) steps.
"""

import contextlib
import json
import os
import sys
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_NUM_WORKERS = 4
_EPISODE_STEPS = 100
_BATCH_STEPS = 1000  # T of the batch workloads.
_CALL_STEPS = 32  # Steps and items per call of the per-call workloads.
_CALL_EPISODE_STEPS = 1024
_WARMUP_STEPS = 20
_NUM_CHECKED = 32
# A step's tag: writer number * _TAG_WRITER + its index in the writer's pool.
# Below 2**24, so a float32 holds it exactly.
_TAG_WRITER = 2**22

_SMALL_OFFSETS = np.arange(4, dtype=np.float32) * np.float32(0.25)
_FRAME_SHAPE = (84, 84, 4)
_FRAME_BASE = (np.arange(np.prod(_FRAME_SHAPE), dtype=np.int64) % 251).astype(
    np.uint8).reshape(_FRAME_SHAPE)
_MB_BASE = (np.arange(2**18) % 4096).astype(np.float32)


def small_step(tag):
  return {'action': np.int64(tag), 'discount': np.float32(tag % 100 / 100),
          'obs': _SMALL_OFFSETS + np.float32(tag),
          'reward': np.float32(tag % 1000 / 2)}


def small_tag(data):
  return int(data[0])  # 'action', the first column in key order.


def frame_step(tag):
  frame = _FRAME_BASE + np.uint8(tag % 256)
  frame.reshape(-1)[:8] = np.frombuffer(np.int64(tag).tobytes(), np.uint8)
  return {'frame': frame}


def frame_tag(data):
  return int(np.frombuffer(data[0].tobytes()[:8], np.int64)[0])


def mb_step(tag):
  data = _MB_BASE + np.float32(tag % 1024)
  data[0] = tag
  return {'data': data}


def mb_tag(data):
  return int(data[0][0])


PAYLOADS = {
    # name: (make step, tag of a sampled item, bytes per step, pool size,
    #        table size). Fifo removal past the table size bounds memory.
    # The pool of small steps is one batch (the batch workloads need it).
    'small': (small_step, small_tag, 8 + 4 + 4 * 4 + 4, _BATCH_STEPS,
              1_000_000),
    'frame': (frame_step, frame_tag, int(np.prod(_FRAME_SHAPE)), 256, 10_000),
    '1MB': (mb_step, mb_tag, _MB_BASE.nbytes, 32, 200),
}

# (payload, mode, writers, row label); every workload writes its own table.
WORKLOADS = [(payload, 'step', writers, label)
             for payload in PAYLOADS
             for writers, label in ((1, '1 writer'), (4, '4 writers'))]
# Batch modes: 'append_batch', 'create_items' or 'loop', then '/1' for one
# item per batch.
WORKLOADS += [('small', mode, 1, f'T={_BATCH_STEPS} {label}')
              for mode, label in (('append_batch', 'append_batch'),
                                  ('create_items',
                                   'append_batch + create_items'),
                                  ('loop', 'append loop'),
                                  ('append_batch/1', 'append_batch, 1 item'),
                                  ('loop/1', 'append loop, 1 item'))]
# Per-call modes: 'call_items' (append_batch + create_items), 'call_loop'.
WORKLOADS += [('small', mode, 1, f'{_CALL_STEPS} per call, {label}')
              for mode, label in (('call_items', 'append_batch + create_items'),
                                  ('call_loop', 'append loop'))]
# Modes that need a method dm-reverb lacks.
_OURS_ONLY = {'append_batch': 'append_batch', 'create_items': 'create_items',
              'call_items': 'create_items'}


def table_name(payload, mode, writers):
  return f'{payload}_{mode.replace("/", "_")}_{writers}'


def make_tables():
  return [harness.fifo_table(table_name(payload, mode, writers),
                             PAYLOADS[payload][4])
          for payload, mode, writers, _ in WORKLOADS]


class StepWriter:
  """One writer's part of a workload, in a --worker process."""

  def __init__(self, client, table, payload, mode, number):
    make_step, _, _, pool_size, _ = PAYLOADS[payload]
    self._pool = [make_step(number * _TAG_WRITER + i) for i in range(pool_size)]
    self._keys = sorted(self._pool[0])
    self._table = table
    self._mode, _, items = mode.partition('/')
    # Items per batch: one per step, or '/1' for the last step's.
    self._batch_items = 1 if items == '1' else _BATCH_STEPS
    batched = mode != 'step'
    keep = (_CALL_STEPS if mode.startswith('call') else
            _BATCH_STEPS if batched else 2)
    self.writer = client.trajectory_writer(num_keep_alive_refs=keep)
    if batched:
      self._batch = {key: np.stack([step[key] for step in self._pool])
                     for key in self._keys}
    # The pool in calls of _CALL_STEPS steps: stacked and one by one.
    self._calls = [
        ({key: self._batch[key][i:i + _CALL_STEPS] for key in self._keys},
         self._pool[i:i + _CALL_STEPS])
        for i in range(0, len(self._pool) - _CALL_STEPS + 1, _CALL_STEPS)
    ] if mode.startswith('call') else []
    self._ones = np.ones(_BATCH_STEPS)
    self.steps = 0  # Steps written, warm-up included.
    self.items = 0  # Items made, warm-up included.

  def _step(self):
    writer = self.writer
    writer.append(self._pool[self.steps % len(self._pool)])
    writer.create_item(self._table, 1.0,
                       {key: writer.history[key][-1] for key in self._keys})
    self.steps += 1
    self.items += 1
    if self.steps % _EPISODE_STEPS == 0:
      writer.end_episode()

  def _batch_episode(self):
    writer = self.writer
    if self._mode in ('append_batch', 'create_items'):
      writer.append_batch(self._batch)
    else:
      for step in self._pool:
        writer.append(step)
    if self._mode == 'create_items':
      writer.create_items(
          self._table, priorities=self._ones[:self._batch_items],
          trajectory={key: writer.history[key][-1] for key in self._keys})
    else:
      for t in range(-self._batch_items, 0):
        writer.create_item(
            self._table, 1.0,
            {key: writer.history[key][t] for key in self._keys})
    self.steps += _BATCH_STEPS
    self.items += self._batch_items
    writer.end_episode()

  def _call(self):
    writer = self.writer
    batch, steps = self._calls[(self.steps // _CALL_STEPS) % len(self._calls)]
    if self._mode == 'call_items':
      writer.append_batch(batch)
      writer.create_items(
          self._table, priorities=self._ones[:_CALL_STEPS],
          trajectory={key: writer.history[key][-1] for key in self._keys})
    else:
      for step in steps:
        writer.append(step)
        writer.create_item(self._table, 1.0,
                           {key: writer.history[key][-1] for key in self._keys})
    self.steps += _CALL_STEPS
    self.items += _CALL_STEPS
    if self.steps % _CALL_EPISODE_STEPS == 0:
      writer.end_episode()

  def _once(self):
    """One step, batch episode or call, as the mode says."""
    if self._mode == 'step':
      self._step()
    elif self._mode.startswith('call'):
      self._call()
    else:
      self._batch_episode()

  def warm_up(self):
    if self._mode == 'step':
      while self.steps < _WARMUP_STEPS:
        self._step()
      self.writer.end_episode()
    elif self._mode.startswith('call'):
      while self.steps < _CALL_EPISODE_STEPS:
        self._call()
    else:
      self._batch_episode()

  def run(self, seconds):
    """Writes for `seconds`, then flushes; returns (steps, start, end) with
    times from time.monotonic(), which all processes share."""
    first = self.steps
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
      self._once()
    self.writer.flush()
    end = time.monotonic()
    self.writer.end_episode()
    self.writer.close()
    return self.steps - first, start, end


def worker(number):
  """--worker N: for each job line on stdin, makes its StepWriter and warms
  it up, says READY (or SKIP if the package lacks a method the mode needs),
  waits for GO, writes and reports DONE {json}."""
  for client, job in harness.worker_jobs():
    step_writer = StepWriter(client, job['table'], job['payload'],
                             job['mode'], number)
    needs = _OURS_ONLY.get(job['mode'].partition('/')[0])
    if needs is not None and not hasattr(step_writer.writer, needs):
      step_writer.writer.close()
      print('SKIP', flush=True)
      continue
    step_writer.warm_up()
    print('READY', flush=True)
    sys.stdin.readline()  # GO
    items, start, end = step_writer.run(job['seconds'])
    print('DONE ' + json.dumps({'items': items, 'steps': step_writer.steps,
                                'inserted': step_writer.items,
                                'start': start, 'end': end}), flush=True)


def check_table(client, table, payload, steps_by_writer, inserted):
  """BrokenSample unless the table took exactly the `inserted` items made
  and sampled items are steps that were written."""
  make_step, tag_of, _, pool_size, _ = PAYLOADS[payload]
  info = client.server_info()[table]
  completed = info.rate_limiter_info.insert_stats.completed
  harness.check(completed == inserted,
                f'{table}: {completed} inserts completed, '
                f'{inserted} items made')
  for sample in client.sample(table, _NUM_CHECKED, emit_timesteps=False):
    data = [np.asarray(column) for column in sample.data]
    tag = tag_of(data)
    number, index = divmod(tag, _TAG_WRITER)
    harness.check(number < len(steps_by_writer) and
                  index < min(pool_size, steps_by_writer[number]),
                  f'{table}: tag {tag} was never written')
    want = make_step(tag)
    harness.check(len(data) == len(want),
                  f'{table}: {len(data)} columns, expected {len(want)}')
    for key, column in zip(sorted(want), data):
      harness.check(column.dtype == want[key].dtype and
                    column.shape == want[key].shape,
                    f'{table}: column {key} is {column.dtype}{column.shape}, '
                    f'expected {want[key].dtype}{want[key].shape}')
      harness.check(np.array_equal(column, want[key]),
                    f'{table}: tag {tag}: column {key} differs')


def run_workload(workers, job, num_writers, seconds):
  """Runs `job` on the first `num_writers` workers, started at once;
  returns (steps, wall seconds, steps written by each writer, items made),
  or None if the package lacks what the job needs."""
  busy = workers[:num_writers]
  for child in busy:
    child.send(json.dumps(job))
  if 'SKIP' in [child.read('') for child in busy]:  # READY or SKIP, alike.
    return None
  for child in busy:
    child.send('GO')
  done = [json.loads(child.read('DONE ', timeout=seconds + 120))
          for child in busy]
  wall = max(d['end'] for d in done) - min(d['start'] for d in done)
  return (sum(d['items'] for d in done), wall, [d['steps'] for d in done],
          sum(d['inserted'] for d in done))


def run(args):
  seconds = 0.5 if args.quick else 2.0
  results = []
  with harness.server(args, make_tables) as server, \
      contextlib.ExitStack() as stack:
    workers = harness.start_workers(stack, _NUM_WORKERS, 'writer')
    client = reverb.Client(f'localhost:{server.port}')
    for payload, mode, num_writers, label in WORKLOADS:
      table = table_name(payload, mode, num_writers)
      job = {'port': server.port, 'table': table, 'payload': payload,
             'mode': mode, 'seconds': seconds}
      outcome = run_workload(workers, job, num_writers, seconds)
      if outcome is None:
        continue
      items, wall, steps_by_writer, inserted = outcome
      check_table(client, table, payload, steps_by_writer, inserted)
      results.append((payload, label, items, wall, PAYLOADS[payload][2]))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s instead of 2 s)', run,
               make_tables, worker)
