"""Concurrent writers and samplers under a SampleToInsertRatio rate limiter.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14; it uses only
their shared public API (Client.trajectory_writer, Client.sample,
Client.server_info, rate_limiters.SampleToInsertRatio), so the same command
measures both:

  .venv/bin/python bench/ratelimit_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/ratelimit_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --serve; in this
process with --same-process) and so does every writer and every sampler
(this script with --worker N, each with its own Client); the parent only
coordinates, reads the table's counters and checks. Each workload has a
table of its own: uniform sampling, Fifo removal past 10^6 items,
`SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=100,
error_buffer=1000)`, so samples may run at most 900 ahead of inserts and
inserts at most 1,100 ahead of samples. Items are one step {'obs':
float32[4], 'seq': int64} (24 bytes) whose contents encode the writer and
the step.
  writer   `trajectory_writer(num_keep_alive_refs=2)`; per step
      `append(step)` and `create_item(table, 1.0, {k: history[k][-1]})`,
      `end_episode()` every 100 steps (20 untimed steps first);
  sampler  one `client.sample(table, num_samples=10**9)` generator, consumed,
      every item checked (columns, dtypes, shapes, contents) as it comes.
Workloads: 1 writer + 1 sampler, and 4 writers + 4 samplers, all started at
once. After 0.5 s (--quick: 0.2 s) the parent reads the table's completed
inserts and samples, waits 2 s (--quick: 0.5 s) and reads them again: the
rows are inserted items/s and sampled items/s over that window, as the
server counted them. Then the workers stop (a worker blocked by the rate
limiter is left so; its process ends with the run). Besides every sample's
contents, the counters must keep inserts - samples within the limiter's
range, every sampler must have received items, and no client may have
received more samples or written fewer items than the server counted, so a
build that garbles data or ignores the limiter fails instead of scoring.
"""

import contextlib
import json
import os
import sys
import threading
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_SAMPLES_PER_INSERT = 1.0
_MIN_SIZE_TO_SAMPLE = 100
_ERROR_BUFFER = 1000
_MIN_DIFF = _SAMPLES_PER_INSERT * _MIN_SIZE_TO_SAMPLE - _ERROR_BUFFER
_MAX_DIFF = _SAMPLES_PER_INSERT * _MIN_SIZE_TO_SAMPLE + _ERROR_BUFFER
_MAX_WORKERS = 4  # Writers, and samplers, of the largest workload.
_EPISODE_STEPS = 100
_WARMUP_STEPS = 20
_POOL = 1000
_TAG_WRITER = 2**22  # A step's tag: writer * _TAG_WRITER + index in pool.
_OFFSETS = np.arange(4, dtype=np.float32) * np.float32(0.25)
_ITEM_BYTES = 4 * 4 + 8

WORKLOADS = [(1, '1 writer + 1 sampler'), (4, '4 writers + 4 samplers')]


def table_name(pairs):
  return f'ratio_{pairs}x{pairs}'


def make_tables():
  return [reverb.Table(
      name=table_name(pairs), sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(), max_size=1_000_000,
      rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          samples_per_insert=_SAMPLES_PER_INSERT,
          min_size_to_sample=_MIN_SIZE_TO_SAMPLE,
          error_buffer=_ERROR_BUFFER)) for pairs, _ in WORKLOADS]


def step(tag):
  return {'obs': _OFFSETS + np.float32(tag), 'seq': np.int64(tag)}


def check_sample(sample, num_writers):
  data = sample.data
  harness.check(isinstance(data, (list, tuple)) and len(data) == 2,
                f'data is {type(data).__name__} of {len(data)}')
  obs, seq = np.asarray(data[0]), np.asarray(data[1])
  harness.check(obs.dtype == np.float32 and obs.shape == (4,),
                f'obs is {obs.dtype}{obs.shape}')
  harness.check(seq.dtype == np.int64 and seq.shape == (),
                f'seq is {seq.dtype}{seq.shape}')
  tag = int(seq)
  writer, index = divmod(tag, _TAG_WRITER)
  harness.check(0 <= writer < num_writers and index < _POOL,
                f'seq {tag} never written')
  harness.check(np.array_equal(obs, _OFFSETS + np.float32(tag)),
                f'item {tag}: obs differs')


class Job:
  """One worker's part of a workload; `loop` runs in a thread of its own
  until `stop` is set (or forever, if the rate limiter blocks it)."""

  def __init__(self, client, job):
    self.stop = threading.Event()
    self.count = 0  # Items created (writer) or received and checked.
    self.error = None
    self._table = job['table']
    self._role = job['role']
    self._num_writers = job['num_writers']
    if self._role == 'writer':
      number = job['number']
      self._pool = [step(number * _TAG_WRITER + i) for i in range(_POOL)]
      self._keys = sorted(self._pool[0])
      self._writer = client.trajectory_writer(num_keep_alive_refs=2)
      self._steps = 0
      while self._steps < _WARMUP_STEPS:
        self._write_step()
      self._writer.end_episode()
      self.count = 0
    else:
      self._client = client

  def _write_step(self):
    writer = self._writer
    writer.append(self._pool[self._steps % _POOL])
    writer.create_item(self._table, 1.0,
                       {key: writer.history[key][-1] for key in self._keys})
    self._steps += 1
    self.count += 1
    if self._steps % _EPISODE_STEPS == 0:
      writer.end_episode()

  def loop(self):
    try:
      if self._role == 'writer':
        while not self.stop.is_set():
          self._write_step()
      else:
        for sample in self._client.sample(self._table, num_samples=10**9,
                                          emit_timesteps=False):
          check_sample(sample, self._num_writers)
          self.count += 1
          if self.stop.is_set():
            break
    except harness.BrokenSample as e:
      self.error = f'BrokenSample: {e}'
    except Exception as e:  # pylint: disable=broad-except
      if not self.stop.is_set():
        self.error = f'{type(e).__name__}: {e}'


def worker(number):
  """--worker N: for each job line on stdin, sets it up and says READY,
  starts on GO, and on STOP reports DONE {json} at once. The job's thread is
  left behind: if the rate limiter blocks it, nothing will unblock it."""
  del number  # The job says what to do.
  for client, job in harness.worker_jobs():
    work = Job(client, job)
    print('READY', flush=True)
    sys.stdin.readline()  # GO
    thread = threading.Thread(target=work.loop, daemon=True)
    thread.start()
    sys.stdin.readline()  # STOP
    work.stop.set()
    thread.join(timeout=1.0)
    print('DONE ' + json.dumps({'count': work.count, 'error': work.error}),
          flush=True)
  # Threads may still wait in the rate limiter: skip the interpreter's
  # clean-up, which would wait for them or tear their objects down.
  sys.stdout.flush()
  os._exit(0)  # pylint: disable=protected-access


def counters(client, table):
  """(inserts, samples) the table has completed."""
  info = client.server_info()[table].rate_limiter_info
  return info.insert_stats.completed, info.sample_stats.completed


def check_ratio(table, inserts, samples):
  diff = inserts * _SAMPLES_PER_INSERT - samples
  harness.check(_MIN_DIFF <= diff <= _MAX_DIFF,
                f'{table}: {inserts} inserts, {samples} samples: '
                f'the rate limiter allows {_MIN_DIFF:.0f} to {_MAX_DIFF:.0f}')


def run_workload(client, port, writers, samplers, settle, seconds):
  """Runs one workload on the given worker processes; returns the inserts
  and samples the table completed in the window, and its seconds."""
  table = table_name(len(writers))
  for n, child in enumerate(writers):
    child.send(json.dumps({'port': port, 'table': table, 'role': 'writer',
                           'number': n, 'num_writers': len(writers)}))
  for child in samplers:
    child.send(json.dumps({'port': port, 'table': table, 'role': 'sampler',
                           'num_writers': len(writers)}))
  busy = writers + samplers
  for child in busy:
    child.read('READY')
  for child in busy:
    child.send('GO')
  time.sleep(settle)
  start = time.perf_counter()
  inserts0, samples0 = counters(client, table)
  time.sleep(seconds)
  inserts1, samples1 = counters(client, table)
  elapsed = time.perf_counter() - start
  for child in busy:
    child.send('STOP')
  done = [json.loads(child.read('DONE ')) for child in busy]
  inserts2, samples2 = counters(client, table)
  for d in done:
    if d['error'] and d['error'].startswith('BrokenSample: '):
      raise harness.BrokenSample(d['error'][len('BrokenSample: '):])
    if d['error']:
      raise SystemExit(f'{table}: a worker failed: {d["error"]}')
  for inserts, samples in ((inserts0, samples0), (inserts1, samples1),
                           (inserts2, samples2)):
    check_ratio(table, inserts, samples)
  written = sum(d['count'] for d in done[:len(writers)]) + (
      _WARMUP_STEPS * len(writers))
  received = [d['count'] for d in done[len(writers):]]
  harness.check(all(received), f'{table}: a sampler received nothing')
  harness.check(sum(received) <= samples2,
                f'{table}: samplers received {sum(received)} items, the '
                f'server completed {samples2} samples')
  harness.check(written >= inserts2,
                f'{table}: writers created {written} items, the server '
                f'completed {inserts2} inserts')
  harness.check(inserts1 > inserts0 and samples1 > samples0,
                f'{table}: no progress in {elapsed:.1f} s')
  return inserts1 - inserts0, samples1 - samples0, elapsed


def run(args):
  seconds = 0.5 if args.quick else 2.0
  settle = 0.2 if args.quick else 0.5
  results = []
  with harness.server(args, make_tables) as server, \
      contextlib.ExitStack() as stack:
    workers = harness.start_workers(stack, 2 * _MAX_WORKERS, 'worker')
    client = reverb.Client(f'localhost:{server.port}')
    for pairs, label in WORKLOADS:
      writers = workers[:pairs]
      samplers = workers[_MAX_WORKERS:_MAX_WORKERS + pairs]
      inserts, samples, elapsed = run_workload(
          client, server.port, writers, samplers, settle, seconds)
      results.append(('small', f'{label}, inserts', inserts, elapsed,
                      _ITEM_BYTES))
      results.append(('small', f'{label}, samples', samples, elapsed,
                      _ITEM_BYTES))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (0.5 s instead of 2 s)', run,
               make_tables, worker)
