"""Checkpoint save and restore of a large table, and the server's memory.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14 (shared API:
Server(checkpointer=DefaultCheckpointer(path)), Client.checkpoint,
trajectory_writer), so the same command measures both:

  .venv/bin/python bench/checkpoint_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/checkpoint_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --worker). The parent
fills one table with about 1 GB (--quick: 64 MB) of 84x84x4 uint8 frames of
random (incompressible) bytes, one item per frame, through a
TrajectoryWriter; then times `Client.checkpoint()` ("save"), stops the
server and times the start of a new one on the same directory ("restore":
the Server constructor loads the checkpoint). The restored table must hold
every item, and 64 sampled frames must be the frames written (each carries
its number), so a broken build fails instead of scoring. The server's
resident memory over the payload it holds is printed before the table (RSS of
the server process before the save, and after the restore; also without the
memory of the server when it was empty: interpreter, libraries, threads).
"""

import os
import sys
import tempfile
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_FRAME_SHAPE = (84, 84, 4)
_FRAME_BYTES = int(np.prod(_FRAME_SHAPE))
_POOL = 256  # Distinct random frames; items repeat them.
_NUM_CHECKED = 64


def make_tables():
  return [harness.fifo_table('frames', 1_000_000)]


def frame(number, pool):
  data = pool[number % _POOL].copy()
  data.reshape(-1)[:8] = np.frombuffer(np.int64(number).tobytes(), np.uint8)
  return data


def frame_number(data):
  return int(np.frombuffer(data.tobytes()[:8], np.int64)[0])


def rss_bytes():
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  return 0


def worker(number):
  """--worker: a server checkpointing into the directory read from stdin;
  prints PORT, how long the start (restore) took, then answers RSS until
  stdin closes."""
  del number
  directory = sys.stdin.readline().strip()
  start = time.perf_counter()
  server = reverb.Server(
      tables=make_tables(), port=None,
      checkpointer=reverb.checkpointers.DefaultCheckpointer(directory))
  print(f'PORT {server.port} {time.perf_counter() - start:.6f}', flush=True)
  for line in sys.stdin:
    if line.strip() == 'RSS':
      print(f'RSS {rss_bytes()}', flush=True)
  server.stop()


def start_server(directory):
  child = harness.ChildProcess(['--worker', '0'], 'checkpoint server')
  child.send(directory)
  port, seconds = child.read('PORT ', timeout=3600).split()
  return child, int(port), float(seconds)


def server_rss(child):
  child.send('RSS')
  return int(child.read('RSS '))


def run(args):
  payload = (64 if args.quick else 1024) * 2**20
  num_items = payload // _FRAME_BYTES
  pool = np.random.default_rng(0).integers(
      0, 256, size=(_POOL,) + _FRAME_SHAPE, dtype=np.uint8)
  results = []
  with tempfile.TemporaryDirectory() as directory:
    child, port, _ = start_server(directory)
    with child:
      rss_empty = server_rss(child)
      client = reverb.Client(f'localhost:{port}')
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for i in range(num_items):
          writer.append({'frame': frame(i, pool)})
          writer.create_item('frames', 1.0, {'frame': writer.history['frame'][-1]})
          if i % 1000 == 999:
            writer.flush(block_until_num_items=100)
      size = client.server_info()['frames'].current_size
      harness.check(size == num_items, f'{size} of {num_items} items written')
      rss_full = server_rss(child)
      start = time.perf_counter()
      path = client.checkpoint()
      results.append(('frames', 'save', num_items,
                      time.perf_counter() - start, _FRAME_BYTES))
      harness.check(os.path.isdir(path), f'no checkpoint at {path}')

    child, port, seconds = start_server(directory)
    with child:
      results.append(('frames', 'restore', num_items, seconds, _FRAME_BYTES))
      client = reverb.Client(f'localhost:{port}')
      size = client.server_info()['frames'].current_size
      harness.check(size == num_items, f'restored {size} of {num_items}')
      for sample in client.sample('frames', num_samples=_NUM_CHECKED,
                                  emit_timesteps=False):
        data = np.asarray(sample.data[0])
        number = frame_number(data)
        harness.check(np.array_equal(data, frame(number, pool)),
                      f'frame {number} differs after the restore')
      rss_restored = server_rss(child)
  data_bytes = num_items * _FRAME_BYTES
  print(f'server RSS / payload: {rss_full / data_bytes:.3f} when written, '
        f'{rss_restored / data_bytes:.3f} after the restore '
        f'({data_bytes / 2**20:.0f} MiB payload); without the '
        f'{rss_empty / 2**20:.0f} MiB of the empty server: '
        f'{(rss_full - rss_empty) / data_bytes:.3f} and '
        f'{(rss_restored - rss_empty) / data_bytes:.3f}')
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'a 64 MB table instead of 1 GB', run, make_tables,
               worker)
