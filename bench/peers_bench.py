"""Ours against the in-process buffers: TorchRL and cpprb (issue 23's table).

  .venv/bin/python bench/peers_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/peers_bench.py [--quick] [--json OUT]

The eleven workloads of peers_workloads.py (batches of 32, random
incompressible data: sampling small items, 28 KB frames and 1 MiB items,
prioritized sampling, inserts one at a time (also with at most 16
unstored) and 32 per call, priority updates 1,000 per call), each checked for the data it moved, run on:
  server in another process  this script with --serve, as harness.py
                             starts it (the row the targets are about);
  server in this process     a `reverb.Server` here, so the client takes
                             the in-process path;
  TorchRL, cpprb             ReplayBuffer(LazyTensorStorage) of TorchRL
                             0.14 and cpprb 11's ReplayBuffer
                             (PrioritizedReplayBuffer for the prioritized
                             rows), run by the interpreter of .venv-peers
                             (.ci/peers_venv) in a child process; skipped,
                             with a note, where that venv is missing, and
                             run only with our package (not once more for
                             dm-reverb).
Our buffers are tables of Uniform sampling and Fifo removal (Prioritized
with exponent 0.6 for the prioritized rows, as the peers' alpha) of the same
capacity as the peers'. An item is written with a TrajectoryWriter (append
and create_item; `append_batch` and `create_items` for 32 per call where
the package has them), flushed within the timed inserts (in the "at most
16 unstored" rows, every 16 items too, until at most 16 are unconfirmed, as
Acme's adders bound theirs: a writer never flushed queues without bound); a batch comes from a `ReplayIterator`
(batch_size 32) where the package has one, else it is 32 samples of one
`Client.sample` stream, stacked; priorities go through `mutate_priorities`
(with arrays where the package takes them, else a dict). Workloads are
labelled `name [column]`; the report ends with the ratios ours / TorchRL and
ours / cpprb (--quick: 0.3 s a workload, else 2 s; each after a quarter of
that as warm-up).
"""

import itertools
import os
import pathlib
import subprocess
import sys

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import peers_workloads  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

PEERS_PYTHON = (pathlib.Path(__file__).resolve().parent.parent /
                '.venv-peers' / 'bin' / 'python')
PEERS = {'torchrl': 'TorchRL', 'cpprb': 'cpprb'}
REMOTE = 'server in another process'
LOCAL = 'server in this process'
OURS = 'dm-reverb' not in harness.reverb_description()
_SAMPLES_PER_STREAM = 1 << 30
# Ours: batches stacked in C++ (dm-reverb has no ReplayIterator).
_HAS_ITERATOR = hasattr(reverb, 'ReplayIterator')


def _table_name(kind, prioritized):
  return 'prioritized' if prioritized else kind.replace(' ', '_')


def make_tables():
  tables = []
  for kind, (_, _, _, capacity) in peers_workloads.KINDS.items():
    tables.append(harness.fifo_table(_table_name(kind, False), capacity))
  capacity = peers_workloads.KINDS['small'][3]
  tables.append(reverb.Table(
      name=_table_name('small', True),
      sampler=reverb.selectors.Prioritized(peers_workloads.ALPHA),
      remover=reverb.selectors.Fifo(), max_size=capacity,
      rate_limiter=reverb.rate_limiters.MinSize(1)))
  return tables


class Ours:
  """peers_workloads' systems interface over a reverb.Client of the server
  at `address`."""

  def __init__(self, address):
    self._address = address
    self._client = reverb.Client(address)

  def open(self, kind, prioritized):
    table = _table_name(kind, prioritized)
    self._client.reset(table)
    return _OursBuffer(self._client, self._address, table)


class _OursBuffer:

  def __init__(self, client, address, table):
    self._client = client
    self._address = address
    self._table = table
    self._writer = client.trajectory_writer(num_keep_alive_refs=BATCH)
    self._samples = None

  def add(self, item):
    self._writer.append({'x': item})
    self._writer.create_item(self._table, 1.0,
                             {'x': self._writer.history['x'][-1]})

  def extend(self, items):
    if hasattr(self._writer, 'append_batch'):
      self._writer.append_batch({'x': items})
    else:
      for item in items:
        self._writer.append({'x': item})
    column = self._writer.history['x']
    if hasattr(self._writer, 'create_items'):  # One item per step, one call.
      self._writer.create_items(self._table, priorities=[1.0] * len(items),
                                trajectory={'x': column[-1]})
      return
    for i in range(-len(items), 0):
      self._writer.create_item(self._table, 1.0, {'x': column[i]})

  def finish_inserts(self):
    self._writer.flush()

  def settle(self, n):
    self._writer.flush(n)

  def sample_with_ids(self):
    if self._samples is None:
      if _HAS_ITERATOR:
        self._samples = reverb.ReplayIterator(self._address, self._table,
                                              batch_size=BATCH)
      else:
        self._samples = self._client.sample(
            self._table, num_samples=_SAMPLES_PER_STREAM,
            emit_timesteps=False)
    if _HAS_ITERATOR:
      batch = next(self._samples)
      return batch.data[0], np.asarray(batch.info.key)
    samples = list(itertools.islice(self._samples, BATCH))
    return (np.stack([s.data[0] for s in samples]),
            np.array([s.info.key for s in samples], dtype=np.uint64))

  def sample(self):
    return self.sample_with_ids()[0]

  def _stop_sampling(self):
    if self._samples is not None:
      self._samples.close()
    self._samples = None

  def update(self, ids, priorities):
    self._stop_sampling()  # Its samples drawn ahead predate the update.
    if OURS:
      self._client.mutate_priorities(self._table, (ids, priorities))
    else:
      self._client.mutate_priorities(
          self._table, dict(zip(ids.tolist(), priorities.tolist())))

  def close(self):
    self._stop_sampling()
    self._writer.close()


BATCH = peers_workloads.BATCH


def _label(rows, column):
  return [(payload, f'{workload} [{column}]', items, seconds, item_bytes)
          for payload, workload, items, seconds, item_bytes in rows]


def _peer_rows(system, quick):
  """The rows of `system` run by .venv-peers' Python; None (with a note) if
  it cannot run."""
  if not PEERS_PYTHON.exists():
    print(f'note: {PEERS_PYTHON} is missing (.ci/peers_venv); '
          f'{PEERS[system]} skipped', flush=True)
    return None
  script = pathlib.Path(__file__).resolve().parent / 'peers_workloads.py'
  command = [str(PEERS_PYTHON), '-I', str(script), '--system', system]
  if quick:
    command.append('--quick')
  done = subprocess.run(command, capture_output=True, text=True,
                        timeout=3600, check=False)
  for line in done.stdout.splitlines():
    if line.startswith('ROWS '):
      return [tuple(row) for row in __import__('json').loads(line[5:])]
  print(f'note: {PEERS[system]} failed (exit {done.returncode}):\n'
        f'{done.stderr[-2000:]}', flush=True)
  if 'BrokenBatch' in done.stderr:
    raise harness.BrokenSample(f'{PEERS[system]}: wrong data sampled')
  return None


def _ratios(results):
  """Lines: ours (server in another process) / each peer, per workload."""
  rates = {(payload, workload): items / seconds
           for payload, workload, items, seconds, _ in results}
  lines = []
  for payload, workload, items, seconds, _ in results:
    if not workload.endswith(f'[{REMOTE}]'):
      continue
    name = workload[:-len(f' [{REMOTE}]')]
    cells = []
    for peer in PEERS.values():
      theirs = rates.get((payload, f'{name} [{peer}]'))
      cells.append(f'{items / seconds / theirs:.2f}x' if theirs else '-')
    lines.append(f'  {payload:<7} {name:<40} ' + '  '.join(
        f'{peer} {cell}' for peer, cell in zip(PEERS.values(), cells)))
  return lines


def run(args):
  seconds = 0.3 if args.quick else 2.0
  results = []
  with harness.ServerProcess() as server:
    rows = peers_workloads.run_workloads(Ours(f'localhost:{server.port}'),
                                         seconds)
  results += _label(rows, REMOTE)
  with harness.InProcessServer(make_tables()) as server:
    rows = peers_workloads.run_workloads(Ours(f'localhost:{server.port}'),
                                         seconds)
  results += _label(rows, LOCAL)
  if OURS:
    for system, name in PEERS.items():
      rows = _peer_rows(system, args.quick)
      if rows is not None:
        results += _label(rows, name)
  if OURS:
    print('ours (server in another process) / peer:')
    print('\n'.join(_ratios(results)), flush=True)
  return results


if __name__ == '__main__':
  try:
    harness.main(__doc__, '0.3 s workloads', run, make_tables)
  except peers_workloads.BrokenBatch as e:
    raise SystemExit(f'FAILED: a sampled batch is wrong: {e}') from None
