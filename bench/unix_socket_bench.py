"""Same-host transports: TCP loopback, a unix domain socket and shared
memory, for 1 MB items between two processes.

  .venv/bin/python bench/unix_socket_bench.py [--quick] [--json OUT]

Two servers run in child processes (this script with --serve): one with
shared memory off (REVERB_SHARED_MEMORY=0) listening on a TCP port and on a
unix socket (`reverb.Server(..., unix_socket_path=)`), one with it on (the
default: large chunks travel as /dev/shm segments, docs/wire-protocol.md
"Shared memory"). This process runs, over each of the three (`tcp`,
`unix`, `shared memory`: a `reverb.Client` each), taking turns in four
rounds of 0.5 s a workload,
  insert        `client.insert(item, {table: 1.0})` of a 1 MiB int32 array;
  writer stream   a `TrajectoryWriter` making an item of each 1 MiB step
                and flushed after each down to 8 unconfirmed items
                (`flush(block_until_num_items=8)`, as Acme's adders do):
                the writer, the transport and the server work at once;
  sample bulk   `client.sample(table, num_samples=50)` generators, consumed;
  ReplayIterator  batches of 8 (ours only: dm-reverb has none).
Every sampled item is checked afterwards (shape, dtype, and every 257th
element of the contents, which encode the insert's sequence number: a full
comparison would cost the client as much CPU as the sampling). These rows
also carry the CPU each item cost during the workload: `client`, this
process (time.process_time, all threads), and `server`, the server's
process (/proc/PID/stat), in microseconds per item. `server memory` rows
give what each server holds once its table is full (its RSS beyond its idle
self, shared memory apart, plus its segments under /dev/shm) per byte of
the items the table keeps, right after the workloads and again at rest,
after 11 s without a client call. With dm-reverb, which
has neither unix sockets nor shared memory, only the TCP rows are measured. Two rows bound what gRPC can reach
on this machine: `raw stream` is 1 MiB blocks sent from a child process
over a bare socket of each kind and received into one buffer (no gRPC, no
copies beyond the kernel's), and `memcpy` is a 1 MiB numpy copy in this
process. --same-process is ignored: the point is two processes.
"""

import contextlib
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
_BATCH = 8  # ReplayIterator's batches (ours only).
_IN_FLIGHT = 8  # Unconfirmed items a writer stream keeps.
# Long enough for a server to drop the free segments writers no longer take
# (shared_memory_host.h: after 5-10 s).
_REST_SECONDS = 11


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


def bench_stream(client, first_seq, seconds, max_items):
  """A writer's stream: an item per step, at most _IN_FLIGHT unconfirmed
  after each. Returns (items, seconds)."""
  items = [make_item(first_seq + i) for i in range(min(max_items, 16))]
  count = 0
  start = time.perf_counter()
  deadline = start + seconds
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    while count < max_items:
      writer.append([items[count % len(items)]])
      writer.create_item('t', 1.0, [writer.history[0][-1:]])
      count += 1
      writer.flush(block_until_num_items=_IN_FLIGHT)
      if time.perf_counter() >= deadline:
        break
    writer.flush()
  return count, time.perf_counter() - start


def bench_iterator(address, seconds):
  """Batches of `_BATCH` items from a ReplayIterator for `seconds` (after a
  warm-up); one row of each batch is checked. Returns (items, seconds)."""
  count, elapsed = 0, 0.0
  with reverb.ReplayIterator(address, 't', batch_size=_BATCH,
                             unpack_as_table_signature=False) as iterator:
    next(iterator)  # Warm-up: streams, first buffers.
    while count == 0 or elapsed < seconds:
      start = time.perf_counter()
      batch = next(iterator)
      elapsed += time.perf_counter() - start
      data = np.asarray(batch.data[0])
      harness.check(data.shape == (_BATCH, 1, _ELEMENTS), f'shape {data.shape}')
      row = data[count // _BATCH % _BATCH, 0, ::257]
      harness.check(np.all(row - _BASE[::257] == row[0] - _BASE[0]),
                    'item contents corrupted')
      count += _BATCH
  return count, elapsed


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


def server_bytes(pid):
  """What server process `pid` holds: its RSS apart from shared memory
  (RssAnon + RssFile), plus the sizes of its segments under /dev/shm (each
  file once, however many links it has: a writer links the chunks it built
  in place while it holds them)."""
  with open(f'/proc/{pid}/status') as f:
    fields = dict(line.split(':', 1) for line in f if ':' in line)
  rss = sum(int(fields[k].split()[0]) * 1024 for k in ('RssAnon', 'RssFile'))
  segments = {}
  for root, _, files in os.walk('/dev/shm'):
    if os.path.basename(root).startswith(f'reverb-{pid}-'):
      for name in files:
        try:
          info = os.stat(os.path.join(root, name))
        except FileNotFoundError:
          continue
        segments[(info.st_dev, info.st_ino)] = info.st_size
  return rss + sum(segments.values())


def bench_memcpy(count):
  target = np.empty_like(_BASE)
  start = time.perf_counter()
  for _ in range(count):
    np.copyto(target, _BASE)
  return time.perf_counter() - start


def run(args):
  rounds = 2 if args.quick else 4
  seconds = 0.25 if args.quick else 0.5  # Per round and workload.
  bulk_n = 50
  blocks = 500 if args.quick else 2000
  results = []
  with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, 'bench.sock') if _UNIX else None
    with contextlib.ExitStack() as stack:
      server = stack.enter_context(harness.ServerProcess(
          path, env={'REVERB_SHARED_MEMORY': '0'}))
      servers = {'tcp': server}
      clients = {'tcp': reverb.Client(f'localhost:{server.port}')}
      if _UNIX:
        servers['unix'] = server
        clients['unix'] = reverb.Client(f'unix:{path}')
        servers['shared memory'] = stack.enter_context(harness.ServerProcess())
        clients['shared memory'] = reverb.Client(
            f'localhost:{servers["shared memory"].port}')
      idle_bytes = {name: server_bytes(servers[name].pid) for name in clients}
      inserted = 0
      for client in clients.values():
        # Warm-up: connection, first allocations.
        inserted += bench_insert(client, inserted, 60.0, 20)[0]
        list(client.sample('t', num_samples=10, emit_timesteps=False))
      inserts = {name: harness.CpuTotals() for name in clients}
      streams = {name: harness.CpuTotals() for name in clients}
      samples = {name: harness.CpuTotals() for name in clients}
      batches = {name: harness.CpuTotals() for name in clients}
      addresses = {'tcp': f'localhost:{server.port}'}
      if _UNIX:
        addresses['unix'] = f'unix:{path}'
        addresses['shared memory'] = (
            f'localhost:{servers["shared memory"].port}')
      # The transports take turns, so that the machine's load drifts over
      # both alike.
      for _ in range(rounds):
        for name, client in clients.items():
          inserted += inserts[name].timed(
              servers[name],
              lambda c=client: bench_insert(c, inserted, seconds, 100_000))
          inserted += streams[name].timed(
              servers[name],
              lambda c=client: bench_stream(c, inserted, seconds, 100_000))
          samples[name].timed(servers[name], lambda c=client: harness.sample_bulk(
              c, 't', bulk_n, seconds, check_item)[:2])
          if _UNIX:
            batches[name].timed(servers[name], lambda a=addresses[name]:
                                bench_iterator(a, seconds))
      # What each server holds beyond its idle self, per byte of the items
      # its table keeps (the server of `tcp` and `unix` is one): right after
      # the workloads, and at rest (a shared-memory server removes the free
      # segments no writer took for 5-10 s).
      for when in ('', f' at rest ({_REST_SECONDS} s idle)'):
        if when:
          time.sleep(_REST_SECONDS)
        for name in clients:
          if name == 'unix':
            continue
          stored = (clients[name].server_info()['t'].current_size *
                    _ITEM_BYTES)
          held = server_bytes(servers[name].pid) - idle_bytes[name]
          results.append(('1MB', f'server memory{when}, {name}', None, None,
                          0, {'memory_per_payload': {
                              'server': round(held / stored, 3)}}))
      for name in clients:
        results.append(inserts[name].row('1MB', f'insert, {name}',
                                          _ITEM_BYTES))
        results.append(streams[name].row(
            '1MB', f'writer stream (<= {_IN_FLIGHT} unconfirmed), {name}',
            _ITEM_BYTES))
        results.append(samples[name].row(
            '1MB', f'sample bulk (N={bulk_n}), {name}', _ITEM_BYTES))
        if _UNIX:
          results.append(batches[name].row(
              '1MB', f'ReplayIterator (batch {_BATCH}), {name}', _ITEM_BYTES))
  for name, family in (('tcp', socket.AF_INET), ('unix', socket.AF_UNIX)):
    results.append(('1MB', f'raw stream, {name}', blocks,
                    raw_stream(family, blocks), _ITEM_BYTES))
  results.append(('1MB', 'memcpy', blocks, bench_memcpy(blocks), _ITEM_BYTES))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (2 rounds of 0.25 s)', run,
               make_tables)
