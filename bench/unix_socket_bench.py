"""TCP loopback against a unix domain socket: 1 MB items between two processes.

  .venv/bin/python bench/unix_socket_bench.py [--quick] [--json OUT]

The server runs in a child process (this script with --serve) listening on
a TCP port and on a unix socket (`reverb.Server(..., unix_socket_path=)`);
this process runs, over each of the two (a `reverb.Client` each), taking
turns in four rounds of 0.5 s a workload,
  insert        `client.insert(item, {table: 1.0})` of a 1 MiB int32 array;
  sample bulk   `client.sample(table, num_samples=50)` generators, consumed.
Every sampled item is checked afterwards (shape, dtype, and every 257th
element of the contents, which encode the insert's sequence number: a full
comparison would cost the client as much CPU as the sampling). These rows
also carry the CPU each item cost during the workload: `client`, this
process (time.process_time, all threads), and `server`, the server's
process (/proc/PID/stat), in microseconds per item. With dm-reverb, which
has no unix sockets, only the TCP rows are measured. Two rows bound what gRPC can reach
on this machine: `raw stream` is 1 MiB blocks sent from a child process
over a bare socket of each kind and received into one buffer (no gRPC, no
copies beyond the kernel's), and `memcpy` is a 1 MiB numpy copy in this
process. --same-process is ignored: the point is two processes.
"""

import inspect
import os
import socket
import sys
import tempfile
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

_ELEMENTS = 1 << 18  # int32: 1 MiB an item.
_ITEM_BYTES = 4 * _ELEMENTS
_BASE = np.arange(_ELEMENTS, dtype=np.int32)
_UNIX = 'unix_socket_path' in inspect.signature(reverb.Server).parameters


def make_item(seq):
  return _BASE + np.int32(seq)


def check_item(sample):
  data = np.asarray(sample.data[0])
  harness.check(data.dtype == np.int32, f'dtype {data.dtype}')
  harness.check(data.shape == (1, _ELEMENTS), f'shape {data.shape}')
  shift = data[0, ::257] - _BASE[::257]
  harness.check(np.all(shift == shift[0]), 'item contents corrupted')


def make_tables():
  # Fifo removal past 200 items bounds the server at about 200 MB.
  return [harness.fifo_table('t', 200)]


def bench_insert(client, first_seq, seconds, max_items):
  items = [make_item(first_seq + i) for i in range(min(max_items, 16))]
  count = 0
  start = time.perf_counter()
  deadline = start + seconds
  while count < max_items:
    client.insert(items[count % len(items)], priorities={'t': 1.0})
    count += 1
    if time.perf_counter() >= deadline:
      break
  return count, time.perf_counter() - start


def raw_stream(family, blocks):
  """Seconds to receive `blocks` 1 MiB blocks that a forked child sends
  over a fresh socket of `family` (loopback TCP or a unix socket)."""
  with tempfile.TemporaryDirectory() as directory:
    listener = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_UNIX:
      address = os.path.join(directory, 'raw.sock')
    else:
      address = ('127.0.0.1', 0)
    listener.bind(address)
    listener.listen(1)
    address = listener.getsockname()
    pid = os.fork()
    if pid == 0:  # The sender.
      try:
        with socket.socket(family, socket.SOCK_STREAM) as sender:
          sender.connect(address)
          block = _BASE.tobytes()
          for _ in range(blocks):
            sender.sendall(block)
      finally:
        os._exit(0)  # pylint: disable=protected-access
    connection, _ = listener.accept()
    buffer = memoryview(bytearray(_ITEM_BYTES))
    remaining = blocks * _ITEM_BYTES
    start = time.perf_counter()
    while remaining:
      received = connection.recv_into(buffer[:min(remaining, _ITEM_BYTES)])
      harness.check(received > 0, 'raw stream ended early')
      remaining -= received
    elapsed = time.perf_counter() - start
    connection.close()
    listener.close()
    os.waitpid(pid, 0)
  return elapsed


def bench_memcpy(count):
  target = np.empty_like(_BASE)
  start = time.perf_counter()
  for _ in range(count):
    np.copyto(target, _BASE)
  return time.perf_counter() - start


class Totals:
  """Items, seconds and CPU of one row, summed over the rounds."""

  def __init__(self):
    self.items = 0
    self.seconds = 0.0
    self.client_cpu = 0.0
    self.server_cpu = 0.0

  def timed(self, server, workload):
    """Runs `workload()` -> (items, seconds) and adds what it took."""
    client_cpu = time.process_time()
    server_cpu = harness.children_cpu([server])
    items, seconds = workload()
    self.client_cpu += time.process_time() - client_cpu
    self.server_cpu += harness.children_cpu([server]) - server_cpu
    self.items += items
    self.seconds += seconds
    return items

  def row(self, workload):
    per_item = lambda cpu: round(cpu / self.items * 1e6, 1)
    return ('1MB', workload, self.items, self.seconds, _ITEM_BYTES,
            {'cpu_us_per_item': {'client': per_item(self.client_cpu),
                                 'server': per_item(self.server_cpu)}})


def run(args):
  rounds = 2 if args.quick else 4
  seconds = 0.25 if args.quick else 0.5  # Per round and workload.
  bulk_n = 50
  blocks = 500 if args.quick else 2000
  results = []
  with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, 'bench.sock') if _UNIX else None
    with harness.ServerProcess(path) as server:
      clients = {'tcp': reverb.Client(f'localhost:{server.port}')}
      if _UNIX:
        clients['unix'] = reverb.Client(f'unix:{path}')
      inserted = 0
      for client in clients.values():
        # Warm-up: connection, first allocations.
        inserted += bench_insert(client, inserted, 60.0, 20)[0]
        list(client.sample('t', num_samples=10, emit_timesteps=False))
      inserts = {name: Totals() for name in clients}
      samples = {name: Totals() for name in clients}
      # The transports take turns, so that the machine's load drifts over
      # both alike.
      for _ in range(rounds):
        for name, client in clients.items():
          inserted += inserts[name].timed(server, lambda c=client: bench_insert(
              c, inserted, seconds, 100_000))
          samples[name].timed(server, lambda c=client: harness.sample_bulk(
              c, 't', bulk_n, seconds, check_item)[:2])
      for name in clients:
        results.append(inserts[name].row(f'insert, {name}'))
        results.append(samples[name].row(f'sample bulk (N={bulk_n}), {name}'))
  for name, family in (('tcp', socket.AF_INET), ('unix', socket.AF_UNIX)):
    results.append(('1MB', f'raw stream, {name}', blocks,
                    raw_stream(family, blocks), _ITEM_BYTES))
  results.append(('1MB', 'memcpy', blocks, bench_memcpy(blocks), _ITEM_BYTES))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (2 rounds of 0.25 s)', run,
               make_tables)
