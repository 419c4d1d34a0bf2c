"""Shared plumbing of the gRPC benchmarks (client_bench.py, writer_bench.py).

A benchmark script runs with any Python whose `reverb` is ours or dm-reverb
0.14, and calls `main` with three things of its own: `run(args)`, which
measures and returns its rows; `make_tables()`, the tables of its server;
and optionally `worker(number)`, for scripts that drive clients in child
processes. `main` gives every script the same command line:

  --quick       shorter workloads
  --json OUT    also write the report (machine, load, rows) as JSON
  --same-process
                run the server in the benchmark process (`server` below)
                instead of a child; scripts that start no server
                (import_bench), one per phase (checkpoint_bench), several
                (shard_bench) or one for two processes (unix_socket_bench)
                ignore it
  --serve       (internal) be the server: print `PORT n`, serve until stdin
                closes
  --unix-socket PATH
                (internal, with --serve) also listen on this unix socket
  --worker N    (internal, with `worker`) be client process N

`server(args, make_tables)` is the server of a workload: by default a
`ServerProcess`, which starts the script itself with --serve, so the client
under test and the server never share a GIL or an in-process fast path; with
--same-process an `InProcessServer` in the benchmark's own process.
`ChildProcess` starts the script for any other internal mode. A sampled item
that is not what was written raises `BrokenSample`, and the run fails instead
of scoring.

With REVERB_BENCH_SCRAPE_S=SECONDS in the environment (our reverb only),
the server also serves Prometheus metrics and a thread of its process
fetches /metrics every SECONDS, as a Prometheus would: the cost of metrics
on the hot paths (docs/benchmarks.md, "Metrics").

Importing this module sets TF_CPP_MIN_LOG_LEVEL (dm-reverb imports
TensorFlow) and imports `reverb`.
"""

import argparse
import json
import math
import os
import platform
import select
import subprocess
import sys
import tempfile
import time

# Before reverb (which may import TensorFlow): no TF start-up chatter.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

# compare sits next to this module (the scripts put its directory on the
# path); its FIGURES are the figures a row may carry besides items/s.
import compare  # pylint: disable=g-import-not-at-top,wrong-import-position

_START_TIMEOUT = 120  # Seconds for a child to import reverb and start.


class BrokenSample(Exception):
  """A sampled item is not what was written."""


def check(condition, message):
  """BrokenSample(message) unless `condition`."""
  if not condition:
    raise BrokenSample(message)


class ChildProcess:
  """The running script again, with `args`, talking in lines on stdin and
  stdout; stderr is kept and shown (after `name`) if the child fails.
  Stopped (stdin closed, then waited for) on exit."""

  def __init__(self, args, name, env=None):
    self._name = name
    self._log = tempfile.TemporaryFile(mode='w+')
    # The child runs like the parent; -I keeps it from user site-packages
    # and PYTHONPATH too. `env`: variables to add to its environment.
    flags = ['-I'] if sys.flags.isolated else []
    self._proc = subprocess.Popen(
        [sys.executable] + flags + [os.path.abspath(sys.argv[0])] + args,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
        text=True, env=dict(os.environ, **(env or {})))

  @property
  def pid(self):
    return self._proc.pid

  def send(self, line):
    self._proc.stdin.write(line + '\n')
    self._proc.stdin.flush()

  def read(self, prefix, timeout=_START_TIMEOUT):
    """The rest of the next line that starts with `prefix`; other lines are
    skipped. SystemExit with the child's stderr if it ends or `timeout`
    seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      ready, _, _ = select.select([self._proc.stdout], [], [], 0.5)
      if ready:
        line = self._proc.stdout.readline()
        if line.startswith(prefix):
          return line[len(prefix):].strip()
        if not line:
          break
      elif self._proc.poll() is not None:
        break
    self.stop()
    self._log.seek(0)
    raise SystemExit(f'{self._name} ended or did not answer:\n'
                     f'{self._log.read()}')

  def stop(self):
    if self._proc.poll() is None:
      self._proc.stdin.close()
      try:
        self._proc.wait(timeout=20)
      except subprocess.TimeoutExpired:
        self._proc.kill()
        self._proc.wait(timeout=20)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.stop()
    self._log.close()


class ServerProcess(ChildProcess):
  """The running script with --serve; `port` is where it listens (and
  `unix_socket_path` too, if given). `env`: as ChildProcess's."""

  def __init__(self, unix_socket_path=None, env=None):
    unix = ['--unix-socket', unix_socket_path] if unix_socket_path else []
    super().__init__(['--serve'] + unix, 'benchmark server', env)
    self.port = int(self.read('PORT '))


class InProcessServer:
  """A `reverb.Server` with `tables` in this process (--same-process);
  `port` is where it listens. Stopped on exit."""

  def __init__(self, tables):
    self._server = reverb.Server(tables=tables, port=None)
    self.port = self._server.port

  def stop(self):
    if self._server is not None:
      self._server.stop()
      self._server = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.stop()


def server(args, make_tables):
  """The server of a workload, as a context manager with `port`: in this
  process with `make_tables()` if args.same_process, else a
  `ServerProcess` (whose --serve calls the script's own make_tables)."""
  if getattr(args, 'same_process', False):
    return InProcessServer(make_tables())
  return ServerProcess()


def children_cpu(children):
  """The CPU seconds that the processes of `children` (ChildProcess) have
  used (utime + stime)."""
  total = 0
  for child in children:
    with open(f'/proc/{child.pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
    total += int(fields[11]) + int(fields[12])  # Fields 14 and 15 of stat.
  return total / os.sysconf('SC_CLK_TCK')


class CpuTotals:
  """Items, seconds and CPU (this process's and a server child's) of one
  row, summed over the rounds of a workload."""

  def __init__(self):
    self.items = 0
    self.seconds = 0.0
    self.client_cpu = 0.0
    self.server_cpu = 0.0

  def timed(self, server, workload):
    """Runs `workload()` -> (items, seconds) on `server` (a ChildProcess)
    and adds what it took; returns its items."""
    client_cpu = time.process_time()
    server_cpu = children_cpu([server])
    items, seconds = workload()
    self.client_cpu += time.process_time() - client_cpu
    self.server_cpu += children_cpu([server]) - server_cpu
    self.items += items
    self.seconds += seconds
    return items

  def per_item_us(self, figure):
    """Microseconds of `figure` ('seconds', 'client_cpu', 'server_cpu') an
    item."""
    return getattr(self, figure) / self.items * 1e6

  def row(self, payload, workload, item_bytes):
    """The result row, with `cpu_us_per_item`."""
    cpu = {'client': round(self.per_item_us('client_cpu'), 1),
           'server': round(self.per_item_us('server_cpu'), 1)}
    return (payload, workload, self.items, self.seconds, item_bytes,
            {'cpu_us_per_item': cpu})


def latency_ms(seconds):
  """{'p50': ..., 'p99': ...} in milliseconds of a list of durations in
  seconds (nearest rank), for a row's `latency_ms`."""
  ordered = sorted(seconds)
  def rank(q):
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1e3
  return {'p50': round(rank(0.50), 4), 'p99': round(rank(0.99), 4)}


def sample_bulk(client, table, num_samples, seconds, check_sample):
  """Consumes `client.sample(table, num_samples)` generators until `seconds`
  pass (at least one). Only the sampling is timed; each sample is checked
  after, by `check_sample(sample)`. Returns the number of items, the seconds
  spent sampling them, and what `check_sample` returned for each."""
  count = 0
  elapsed = 0.0
  checked = []
  deadline = time.perf_counter() + seconds
  while count == 0 or time.perf_counter() < deadline:
    start = time.perf_counter()
    samples = list(client.sample(table, num_samples=num_samples,
                                 emit_timesteps=False))
    elapsed += time.perf_counter() - start
    check(len(samples) == num_samples,
          f'sample() yielded {len(samples)} of {num_samples} samples')
    checked.extend(check_sample(sample) for sample in samples)
    count += len(samples)
  return count, elapsed, checked


def start_workers(stack, count, name):
  """`count` children of this script with --worker 0..count-1 (named
  `name` N in errors), stopped when `stack` (a contextlib.ExitStack)
  closes."""
  return [stack.enter_context(ChildProcess(['--worker', str(n)], f'{name} {n}'))
          for n in range(count)]


def worker_jobs():
  """In a --worker process: yields (client, job) for every JSON job line
  the parent writes to stdin, until stdin closes. The client is made once,
  for the port of the first job."""
  client = None
  for line in iter(sys.stdin.readline, ''):
    job = json.loads(line)
    if client is None:
      client = reverb.Client(f'localhost:{job["port"]}')
    yield client, job


def fifo_table(name, max_size):
  """A table without queue semantics: uniform sampling, oldest removed past
  `max_size` (bounding the server's memory), sampling once it has an item."""
  return reverb.Table(name=name, sampler=reverb.selectors.Uniform(),
                      remover=reverb.selectors.Fifo(), max_size=max_size,
                      rate_limiter=reverb.rate_limiters.MinSize(1))


def _scrape_every(port, seconds):
  """Fetches http://localhost:port/metrics every `seconds`, on a daemon
  thread."""
  import threading  # pylint: disable=g-import-not-at-top
  import urllib.request  # pylint: disable=g-import-not-at-top

  def scrape():
    while True:
      with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics',
                                  timeout=10) as response:
        response.read()
      time.sleep(seconds)

  threading.Thread(target=scrape, daemon=True).start()


def serve(tables, unix_socket_path=None):
  """--serve: a server with `tables` (also on `unix_socket_path` if given);
  prints its port, then serves until stdin closes (the parent ended or let
  go)."""
  unix = {'unix_socket_path': unix_socket_path} if unix_socket_path else {}
  scrape_s = os.environ.get('REVERB_BENCH_SCRAPE_S')
  metrics = {'metrics_port': 0} if scrape_s else {}
  server = reverb.Server(tables=tables, port=0 if unix else None, **unix,
                         **metrics)
  if scrape_s:
    _scrape_every(server.metrics_port, float(scrape_s))
  print(f'PORT {server.port}', flush=True)
  sys.stdin.read()
  server.stop()


def reverb_description():
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  for dist in ('dm-reverb', 'dm-reverb-nightly', 'reverb'):
    try:
      return f'{dist} {metadata.version(dist)} ({reverb.__file__})'
    except metadata.PackageNotFoundError:
      continue
  return f'reverb ({reverb.__file__})'


def _row(payload, workload, items, elapsed, item_bytes, extra=None):
  row = {'payload': payload, 'workload': workload, 'items': items,
         'seconds': round(elapsed, 4) if elapsed is not None else None}
  if items is None:  # A row of other figures only (compare.FIGURES).
    row.update(items_per_s=None, mb_per_s=None)
  else:
    row.update(items_per_s=round(items / elapsed, 1),
               mb_per_s=round(items * item_bytes / elapsed / 1e6, 2))
  row.update(extra or {})
  return row


def report(args, results, load_start, load_end):
  """Prints the results and writes them to args.json if given.

  Args:
    args: The parsed command line.
    results: (payload, workload, items, seconds, bytes per item[, extra])
      tuples. `extra`, a dict, is merged into the row: its groups of
      compare.FIGURES (`latency_ms`: {'p50': ms, 'p99': ms}, say; see
      `latency_ms`) are shown here and by compare.py. A row whose items are
      None has such figures only (no items/s).
    load_start: os.getloadavg() before the workloads.
    load_end: os.getloadavg() after them.
  """
  rows = [_row(*result) for result in results]
  report_ = {
      'reverb': reverb_description(),
      'python': platform.python_version(),
      'cpus': os.cpu_count(),
      'quick': args.quick,
      'same_process': getattr(args, 'same_process', False),
      'loadavg_1min': [round(load_start[0], 2), round(load_end[0], 2)],
      'results': rows,
  }
  print(f'{report_["reverb"]}, Python {report_["python"]}, '
        f'{report_["cpus"]} CPUs, load average (1 min) '
        f'{load_start[0]:.2f} -> {load_end[0]:.2f}'
        + (', server in this process' if report_['same_process'] else ''))
  width = max([22] + [len(row['workload']) for row in rows])
  header = (f'{"payload":<8} {"workload":<{width}} {"items":>8} '
            f'{"seconds":>8} {"items/s":>10} {"MB/s":>8}  other figures')
  print(header)
  print('-' * len(header))
  for row in rows:
    if row['items_per_s'] is None:
      numbers = f'{"-":>8} {"-":>8} {"-":>10} {"-":>8}'
    else:
      numbers = (f'{row["items"]:>8} {row["seconds"]:>8.3f} '
                 f'{row["items_per_s"]:>10,.0f} {row["mb_per_s"]:>8.2f}')
    figures = '  '.join(
        f'{label.format(name)} {value:.3f}'
        for group, label in compare.FIGURES.items()
        for name, value in row.get(group, {}).items())
    print(f'{row["payload"]:<8} {row["workload"]:<{width}} {numbers}  '
          f'{figures}'.rstrip())
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(report_, f, indent=2)
      f.write('\n')


def main(doc, quick_help, run, make_tables, worker=None, add_arguments=None):
  """The command line of a benchmark script (see the module docstring).

  Args:
    doc: The script's docstring; its first line describes the script.
    quick_help: What --quick shortens, for --help.
    run: run(args) -> results, as `report` takes them; runs between two
      load-average readings, and its results are reported.
    make_tables: make_tables() -> the server's tables, for --serve.
    worker: worker(number), for --worker; None: no --worker.
    add_arguments: add_arguments(parser), for options of the script's own.
  """
  parser = argparse.ArgumentParser(
      description=doc.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--quick', action='store_true', help=quick_help)
  parser.add_argument('--json', metavar='OUT', help='also write results here')
  parser.add_argument('--same-process', action='store_true',
                      help='run the server in this process, not a child')
  parser.add_argument('--serve', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--unix-socket', help=argparse.SUPPRESS)
  if worker is not None:
    parser.add_argument('--worker', type=int, help=argparse.SUPPRESS)
  if add_arguments is not None:
    add_arguments(parser)
  args = parser.parse_args()
  if args.serve:
    serve(make_tables(), args.unix_socket)
    return
  if worker is not None and args.worker is not None:
    worker(args.worker)
    return
  try:
    load_start = os.getloadavg()
    results = run(args)
    load_end = os.getloadavg()
  except BrokenSample as e:
    raise SystemExit(f'FAILED: a sampled item is wrong: {e}') from None
  report(args, results, load_start, load_end)
