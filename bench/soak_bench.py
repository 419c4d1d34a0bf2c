"""Soak: writers, samplers and priority updates against one server for a
long time, watching the server's memory and open file descriptors.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14 (shared API:
trajectory_writer, sample, mutate_priorities), so the same command measures
both:

  .venv/bin/python bench/soak_bench.py [--quick] [--duration S]
      [--interval S] [--json OUT]
  .venv-dmreverb/bin/python -I bench/soak_bench.py ...

The server runs in a child process (or in this one with --same-process) with
one prioritized table of at most 20,000 items, full after the first seconds,
so that every insert then removes an item (and its chunks, once no item
references them). For `--duration` seconds (default 1800; --quick: 8) two
writer threads stream 4-step items (one TrajectoryWriter each, reused across
episodes), two sampler threads draw batches of 64 and check that every
sampled step is the step written, and one thread updates the priorities of
sampled keys and deletes some of them. Every `--interval` seconds (default
60; --quick: 2) a line gives the server's resident memory (VmRSS) and open
file descriptors (/proc/PID/fd); at the end, the growth of both from the end
of the warm-up (the first fifth of the run, at least one interval) to the
end. Reported rows: the inserts, samples and mutations per second, and a
row of the two growths (RSS in percent, descriptors in number), which
should be about 0.
"""

import inspect
import os
import sys
import threading
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_TABLE = 'soak'
_MAX_SIZE = 20_000
_STEP_FLOATS = 256  # 1 KiB of observation per step.
_ITEM_STEPS = 4
_EPISODE_STEPS = 200
_BATCH = 64
_TIMEOUT_S = 60  # Every blocking call: a hang fails the run.
# dm-reverb's Client.sample has no timeout.
_SAMPLE_KW = ({'timeout': _TIMEOUT_S}
              if 'timeout' in inspect.signature(reverb.Client.sample).parameters
              else {})


def make_tables():
  return [reverb.Table(
      name=_TABLE, sampler=reverb.selectors.Prioritized(0.8),
      remover=reverb.selectors.Fifo(), max_size=_MAX_SIZE,
      rate_limiter=reverb.rate_limiters.MinSize(1))]


def step(writer_id, number):
  """A step whose every value derives from (writer_id, number)."""
  value = writer_id * 1_000_000_000 + number
  return {'id': np.int64(value),
          'obs': np.full([_STEP_FLOATS], value % 65_536, np.float32)}


def check_sample(sample):
  ids, obs = (np.asarray(column) for column in sample.data)
  harness.check(ids.shape == (_ITEM_STEPS,) and
                obs.shape == (_ITEM_STEPS, _STEP_FLOATS),
                f'sample shapes {ids.shape}, {obs.shape}')
  harness.check(np.all(np.diff(ids) == 1), f'steps not consecutive: {ids}')
  expected = (ids % 65_536).astype(np.float32)[:, None]
  harness.check(np.all(obs == expected), f'observations differ for {ids}')


def proc_rss(pid):
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  return 0


def proc_fds(pid):
  return len(os.listdir(f'/proc/{pid}/fd'))


class Soak:
  """The workload's threads and their counts; the first error stops all."""

  def __init__(self, port, num_writers=2, num_samplers=2):
    self._address = f'localhost:{port}'
    self._stop = threading.Event()
    self._lock = threading.Lock()
    self._keys = []  # Recently sampled keys, for the priority updates.
    self.counts = {'insert': 0, 'sample': 0, 'mutate': 0}
    self.errors = []
    targets = ([lambda i=i: self._write(i) for i in range(num_writers)] +
               [self._sample] * num_samplers + [self._mutate])
    self._threads = [threading.Thread(target=self._guard(t), daemon=True)
                     for t in targets]

  def _guard(self, target):
    def run():
      try:
        target()
      except Exception as e:  # pylint: disable=broad-except
        self.errors.append(e)
        self._stop.set()
    return run

  def _count(self, what, n):
    with self._lock:
      self.counts[what] += n

  def _write(self, writer_id):
    client = reverb.Client(self._address)
    number = 0
    with client.trajectory_writer(num_keep_alive_refs=_ITEM_STEPS) as writer:
      while not self._stop.is_set():
        for t in range(_EPISODE_STEPS):
          writer.append(step(writer_id, number))
          number += 1
          if t + 1 >= _ITEM_STEPS:
            writer.create_item(_TABLE, 1.0, {
                'id': writer.history['id'][-_ITEM_STEPS:],
                'obs': writer.history['obs'][-_ITEM_STEPS:]})
            self._count('insert', 1)
        writer.end_episode(timeout_ms=_TIMEOUT_S * 1000)

  def _sample(self):
    client = reverb.Client(self._address)
    while not self._stop.is_set():
      keys = []
      for sample in client.sample(_TABLE, num_samples=_BATCH,
                                  emit_timesteps=False, **_SAMPLE_KW):
        check_sample(sample)
        keys.append(int(sample.info.key))
      self._count('sample', len(keys))
      with self._lock:
        self._keys = (self._keys + keys)[-4 * _BATCH:]

  def _mutate(self):
    client = reverb.Client(self._address)
    rng = np.random.default_rng(0)
    while not self._stop.is_set():
      with self._lock:
        keys, self._keys = self._keys, []
      if not keys:
        time.sleep(0.01)
        continue
      deletes = keys[::8]
      updates = {k: float(rng.uniform(0.1, 10)) for k in keys[1::8]}
      client.mutate_priorities(_TABLE, updates=updates, deletes=deletes)
      self._count('mutate', len(deletes) + len(updates))

  def __enter__(self):
    for thread in self._threads:
      thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    for thread in self._threads:
      thread.join(_TIMEOUT_S)
    harness.check(not any(t.is_alive() for t in self._threads),
                  'a workload thread did not stop')


def add_arguments(parser):
  parser.add_argument('--duration', type=float, default=None,
                      help='seconds of soak (default 1800; --quick: 8)')
  parser.add_argument('--interval', type=float, default=None,
                      help='seconds between readings (default 60; '
                      '--quick: 2)')


def run(args):
  duration = args.duration or (8.0 if args.quick else 1800.0)
  interval = args.interval or (2.0 if args.quick else 60.0)
  warm_up = max(interval, duration / 5)
  with harness.server(args, make_tables) as srv:
    pid = getattr(srv, 'pid', os.getpid())
    readings = []  # (seconds, rss, fds)
    with Soak(srv.port) as soak:
      start = time.monotonic()
      baseline = None
      while True:
        elapsed = time.monotonic() - start
        if elapsed >= duration or soak.errors:
          break
        time.sleep(min(interval, duration - elapsed))
        elapsed = time.monotonic() - start
        rss, fds = proc_rss(pid), proc_fds(pid)
        readings.append((elapsed, rss, fds))
        if baseline is None and elapsed >= warm_up:
          baseline = (rss, fds)
        counts = dict(soak.counts)
        print(f'{elapsed:8.0f} s  server RSS {rss / 2**20:8.1f} MiB  '
              f'fds {fds:4d}  inserts {counts["insert"]}  samples '
              f'{counts["sample"]}  mutations {counts["mutate"]}', flush=True)
      elapsed = time.monotonic() - start
    if soak.errors:
      error = soak.errors[0]
      if isinstance(error, harness.BrokenSample):
        raise error
      raise SystemExit(f'FAILED: the soak stopped on {error!r}')
    size = reverb.Client(f'localhost:{srv.port}').server_info(
        timeout=_TIMEOUT_S)[_TABLE].current_size
  harness.check(0 < size <= _MAX_SIZE, f'table size {size}')
  baseline = baseline or readings[0][1:]
  final_rss, final_fds = readings[-1][1:]
  rss_growth = 100 * (final_rss - baseline[0]) / baseline[0]
  fd_growth = final_fds - baseline[1]
  print(f'after the warm-up ({warm_up:.0f} s): server RSS '
        f'{baseline[0] / 2**20:.1f} -> {final_rss / 2**20:.1f} MiB '
        f'({rss_growth:+.2f}%), open fds {baseline[1]} -> {final_fds} '
        f'({fd_growth:+d}); table size {size} of {_MAX_SIZE}')
  item_bytes = _ITEM_STEPS * (8 + 4 * _STEP_FLOATS)
  counts = soak.counts
  return [
      ('4 KiB', 'insert (2 writers)', counts['insert'], elapsed, item_bytes),
      ('4 KiB', 'sample (2 samplers)', counts['sample'], elapsed, item_bytes),
      ('4 KiB', 'mutate_priorities', counts['mutate'], elapsed, 0),
      ('4 KiB', 'growth after warm-up', None, elapsed, 0,
       {'growth': {'rss_%': round(rss_growth, 3), 'fds': fd_growth}}),
  ]


if __name__ == '__main__':
  harness.main(__doc__, 'a few seconds instead of 30 minutes', run,
               make_tables, add_arguments=add_arguments)
