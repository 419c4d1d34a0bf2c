"""The workloads of peers_bench.py, on any buffer with the small `Buffer`
interface below: ours and dm-reverb's (peers_bench.py), TorchRL 0.14's
ReplayBuffer(LazyTensorStorage) and cpprb 11's ReplayBuffer (here). Needs
numpy only; a peer runs in its own venv (.ci/peers_venv) as

  .venv-peers/bin/python -I bench/peers_workloads.py --system torchrl [--quick]

and prints `ROWS <json>`: [payload, workload, items, seconds, bytes/item].

Batches are of 32 items of random (incompressible) data: small (float32[8],
32 B), frames (uint8[84, 84, 4], 28 KB) and 1 MiB (uint8[2**20]). Each item
is drawn from a pool of random items and carries its pool index (small: in
element 0; the others: in their first 4 bytes), so sampled batches (the
first 50 of a row, within 64 MiB; the others are dropped as a learner drops
them) are checked against the pool, outside the timed calls: a buffer that
returns wrong data fails the run. The prioritized rows use priority exponent
(alpha) 0.6; the priority update row then checks that items given a
priority of 1e12 are the ones sampled.
"""

import argparse
import json
import sys
import time

import numpy as np

BATCH = 32
_MAX_KEPT_BYTES = 64 << 20  # Of sampled batches, for checking.
UPDATES_PER_CALL = 1000
# The "at most N unstored" insert rows: every N items the writer waits until
# at most N are not yet stored, as Acme's adders bound theirs (flush(N)).
UNSTORED = 16
ALPHA = 0.6
# Kind: (shape, dtype, pool size, capacity of its buffer).
KINDS = {
    'small': ((8,), np.float32, 4096, 20000),
    'frames': ((84, 84, 4), np.uint8, 512, 2000),
    '1 MiB': ((1 << 20,), np.uint8, 48, 64),
}


def make_pool(kind, seed=0):
  shape, dtype, size, _ = KINDS[kind]
  rng = np.random.default_rng(seed)
  if dtype == np.float32:
    pool = rng.standard_normal((size,) + shape).astype(np.float32)
    pool[:, 0] = np.arange(size)
  else:
    pool = rng.integers(0, 256, (size,) + shape, dtype=np.uint8)
    flat = pool.reshape(size, -1)
    flat[:, :4] = np.arange(size, dtype=np.uint32).view(np.uint8).reshape(
        size, 4)
  return pool


def pool_index(kind, item):
  if KINDS[kind][1] == np.float32:
    return int(item[0])
  return int(np.ascontiguousarray(item).reshape(-1)[:4].view(np.uint32)[0])


class BrokenBatch(Exception):
  """A sampled batch is not what was inserted."""


class Unavailable(Exception):
  """The system cannot run a workload here (its row is skipped)."""


def check_batch(kind, pool, batch):
  shape, dtype, _, _ = KINDS[kind]
  batch = np.asarray(batch)
  if batch.shape != (BATCH,) + shape or batch.dtype != dtype:
    raise BrokenBatch(f'{kind}: batch {batch.dtype}{batch.shape}')
  for item in batch:
    index = pool_index(kind, item)
    if not 0 <= index < len(pool) or not np.array_equal(item, pool[index]):
      raise BrokenBatch(f'{kind}: a sampled item differs from item {index}')


class Buffer:
  """What a system provides, one buffer per kind (and 'prioritized', of
  small items):
    open(kind, prioritized): a fresh buffer of KINDS[kind]'s capacity;
    add(item) / extend(items): insert one item / a batch (32, ...);
    finish_inserts(): waits until the inserts are stored;
    settle(n): waits until at most n inserts are not yet stored (a
      buffer that stores each insert at once has nothing to wait for);
    sample(): a batch (32, ...) as numpy; sample_with_ids(): and the ids
      that update() takes;
    update(ids, priorities): priorities (float64) of those ids.
  """


def _timed(seconds, step):
  """Calls step() (returning an item count) to warm up for a quarter of
  `seconds` (at least once: a stream's first batches pay for its start and
  for memory faulted in the first time), then until `seconds` pass (at
  least twice); returns (items, seconds spent in the timed steps)."""
  warm_up = time.perf_counter() + seconds / 4
  step()
  while time.perf_counter() < warm_up:
    step()
  items, spent, calls = 0, 0.0, 0
  deadline = time.perf_counter() + seconds
  while calls < 2 or time.perf_counter() < deadline:
    start = time.perf_counter()
    items += step()
    spent += time.perf_counter() - start
    calls += 1
  return items, spent


def _fill(buffer, kind, pool):
  capacity = KINDS[kind][3]
  for start in range(0, capacity, BATCH):
    buffer.extend(pool[np.arange(start, start + BATCH) % len(pool)])
  buffer.finish_inserts()


def run_workloads(system, seconds):
  """The eleven rows: (payload, workload, items, seconds, bytes per item)."""
  pools = {kind: make_pool(kind) for kind in KINDS}
  rows = []

  def item_bytes(kind):
    return pools[kind][0].nbytes

  def sample_row(kind, prioritized=False):
    pool = pools[kind]
    buffer = system.open(kind, prioritized)
    _fill(buffer, kind, pool)
    batches = []
    # Kept for the checks below: the first 50, within 64 MiB. A learner
    # drops each batch once used; keeping every one would charge each
    # system for memory it would otherwise reuse.
    num_kept = min(50, _MAX_KEPT_BYTES // (BATCH * item_bytes(kind)))

    def step():
      batch = buffer.sample()
      if len(batches) < num_kept:
        batches.append(batch)
      return BATCH

    items, spent = _timed(seconds, step)
    for batch in batches:
      check_batch(kind, pool, batch)
    name = 'prioritized sample' if prioritized else 'sample'
    rows.append((kind, f'{name}, batches of {BATCH}', items, spent,
                 item_bytes(kind)))
    buffer.close()

  def insert_row(kind, per_call, unstored=None):
    pool = pools[kind]
    buffer = system.open(kind, False)
    count = [0]

    def step():
      start = count[0]
      count[0] += per_call
      picks = np.arange(start, start + per_call) % len(pool)
      if per_call == 1:
        buffer.add(pool[picks[0]])
      else:
        buffer.extend(pool[picks])
      if unstored and count[0] % unstored == 0:
        buffer.settle(unstored)
      return per_call

    items, spent = _timed(seconds, step)
    start = time.perf_counter()
    buffer.finish_inserts()
    spent += time.perf_counter() - start
    check_batch(kind, pool, buffer.sample())
    name = ('insert one at a time' if per_call == 1 else
            f'insert {per_call} per call')
    if unstored:
      name += f', at most {unstored} unstored'
    rows.append((kind, name, items, spent, item_bytes(kind)))
    buffer.close()

  def update_row():
    pool = pools['small']
    buffer = system.open('small', True)
    _fill(buffer, 'small', pool)
    ids = {}  # Id: pool index of its item.
    while len(ids) < UPDATES_PER_CALL:
      batch, batch_ids = buffer.sample_with_ids()
      batch_ids = np.asarray(batch_ids)
      ids.update(zip(batch_ids.tolist(),
                     [pool_index('small', item) for item in batch]))
    chosen = list(ids)[:UPDATES_PER_CALL]
    id_array = np.array(chosen, dtype=batch_ids.dtype)
    rng = np.random.default_rng(1)
    priorities = [rng.uniform(0.5, 2.0, UPDATES_PER_CALL) for _ in range(8)]
    calls = [0]

    def step():
      buffer.update(id_array, priorities[calls[0] % len(priorities)])
      calls[0] += 1
      return UPDATES_PER_CALL

    items, spent = _timed(seconds, step)
    # Validation: the chosen items, given 1e12, are the ones sampled.
    buffer.update(id_array[:50], np.full(50, 1e12))
    wanted = {ids[i] for i in chosen[:50]}
    for _ in range(5):
      batch = buffer.sample()
      check_batch('small', pool, batch)
      got = {pool_index('small', item) for item in batch}
      if not got <= wanted:
        raise BrokenBatch(f'priority updates: sampled {got - wanted}')
    rows.append(('small', f'priority updates, {UPDATES_PER_CALL:,} per call',
                 items, spent, 0))
    buffer.close()

  workloads = [
      lambda: sample_row('small'), lambda: sample_row('frames'),
      lambda: sample_row('1 MiB'),
      lambda: sample_row('small', prioritized=True),
      lambda: insert_row('small', 1), lambda: insert_row('1 MiB', 1),
      lambda: insert_row('small', 1, UNSTORED),
      lambda: insert_row('1 MiB', 1, UNSTORED),
      lambda: insert_row('small', BATCH), lambda: insert_row('frames', BATCH),
      update_row]
  for workload in workloads:
    try:
      workload()
    except Unavailable as e:
      print(f'note: a workload is skipped: {e}', file=sys.stderr, flush=True)
  return rows


class TorchRL:
  """ReplayBuffer(LazyTensorStorage), PrioritizedReplayBuffer for the
  prioritized rows; items go in as torch tensors made from numpy without a
  copy."""

  def __init__(self):
    import torch  # pylint: disable=g-import-not-at-top
    import torchrl.data  # pylint: disable=g-import-not-at-top
    self._torch = torch
    self._data = torchrl.data

  def open(self, kind, prioritized):
    capacity = KINDS[kind][3]
    storage = self._data.LazyTensorStorage(capacity)
    if prioritized:
      try:
        buffer = self._data.PrioritizedReplayBuffer(
            alpha=ALPHA, beta=0.4, storage=storage, batch_size=BATCH)
      except RuntimeError as e:  # Its C++ extension is missing.
        raise Unavailable(f'TorchRL PrioritizedReplayBuffer: {e}') from None
    else:
      buffer = self._data.ReplayBuffer(storage=storage, batch_size=BATCH)
    return _TorchRLBuffer(self._torch, buffer)


class _TorchRLBuffer:

  def __init__(self, torch, buffer):
    self._torch = torch
    self._buffer = buffer

  def add(self, item):
    self._buffer.add(self._torch.from_numpy(item))

  def extend(self, items):
    self._buffer.extend(self._torch.from_numpy(items))

  def finish_inserts(self):
    pass

  def settle(self, n):
    pass

  def sample(self):
    return self._buffer.sample().numpy()

  def sample_with_ids(self):
    batch, info = self._buffer.sample(return_info=True)
    return batch.numpy(), np.asarray(info['index'])

  def update(self, ids, priorities):
    self._buffer.update_priority(self._torch.from_numpy(ids),
                                 self._torch.from_numpy(priorities))

  def close(self):
    self._buffer = None


class Cpprb:
  """cpprb.ReplayBuffer, PrioritizedReplayBuffer for the prioritized rows."""

  def __init__(self):
    import cpprb  # pylint: disable=g-import-not-at-top
    self._cpprb = cpprb

  def open(self, kind, prioritized):
    shape, dtype, _, capacity = KINDS[kind]
    env = {'x': {'shape': shape, 'dtype': dtype}}
    if prioritized:
      buffer = self._cpprb.PrioritizedReplayBuffer(capacity, env, alpha=ALPHA)
    else:
      buffer = self._cpprb.ReplayBuffer(capacity, env)
    return _CpprbBuffer(buffer)


class _CpprbBuffer:

  def __init__(self, buffer):
    self._buffer = buffer

  def add(self, item):
    self._buffer.add(x=item)

  def extend(self, items):
    self._buffer.add(x=items)

  def finish_inserts(self):
    pass

  def settle(self, n):
    pass

  def sample(self):
    return self._buffer.sample(BATCH)['x']

  def sample_with_ids(self):
    batch = self._buffer.sample(BATCH)
    return batch['x'], batch['indexes']

  def update(self, ids, priorities):
    self._buffer.update_priorities(ids, priorities)

  def close(self):
    self._buffer = None


SYSTEMS = {'torchrl': TorchRL, 'cpprb': Cpprb}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--system', choices=sorted(SYSTEMS), required=True)
  parser.add_argument('--quick', action='store_true')
  args = parser.parse_args()
  rows = run_workloads(SYSTEMS[args.system](), 0.3 if args.quick else 2.0)
  print('ROWS ' + json.dumps(rows), flush=True)


if __name__ == '__main__':
  main()
