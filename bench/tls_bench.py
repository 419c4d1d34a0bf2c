"""TLS with an auth token against plaintext: the client workloads over each.

  .venv/bin/python bench/tls_bench.py [--quick] [--json OUT]

Two servers run in child processes (this script with --serve): one in
plaintext, one with TLS (a certificate made at start with `openssl`, see
tests/python/tls_certs.py) and an auth token, which it reads from the
REVERB_TLS_* and REVERB_AUTH_TOKEN variables its parent sets for it. This
process runs, over each (a `reverb.Client` each, the secured one with
`tls=` and `auth_token=`), taking turns in rounds, for two payloads:
  small   a float32 scalar an item;
  1MB     a 1 MiB int32 array an item (contents checked as in
          unix_socket_bench: dtype, shape, every 257th element);
the workloads
  insert        `client.insert(item, {table: 1.0})`, one call an item;
  sample bulk   `client.sample(table, num_samples=N)` generators, consumed.
Rows carry the CPU each item cost (client: this process; server: the
server's process), in microseconds. For every payload and workload a last
row, `TLS cost`, states what TLS + token added: wall time per item (and per
MB, for 1 MB items): `tls_cost_us`, the difference of the two rows' seconds
per item; and the client's and server's extra CPU per item.
dm-reverb has no TLS: with it only the plaintext rows are measured.
--same-process is ignored (the servers are children).
"""

import contextlib
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

# harness sits next to this script; python -I leaves that directory out.
_BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_BENCH))
sys.path.insert(0, str(_BENCH.parent / 'tests' / 'python'))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position
import tls_certs  # pylint: disable=g-import-not-at-top,wrong-import-position

_TLS = hasattr(reverb, 'TlsOptions') and tls_certs.available()
_TOKEN = 'bench-token-5d1e'
_ELEMENTS = 1 << 18  # int32: 1 MiB an item.
_BASE = np.arange(_ELEMENTS, dtype=np.int32)
_PAYLOADS = {
    # name: (table, bytes an item, item of sequence number i, bulk N)
    'small': ('small', 4, lambda i: np.float32(i), 200),
    '1MB': ('large', 4 * _ELEMENTS, lambda i: _BASE + np.int32(i), 50),
}


def check_large(sample):
  data = np.asarray(sample.data[0])
  harness.check(data.dtype == np.int32, f'dtype {data.dtype}')
  harness.check(data.shape == (1, _ELEMENTS), f'shape {data.shape}')
  shift = data[0, ::257] - _BASE[::257]
  harness.check(np.all(shift == shift[0]), 'item contents corrupted')


def check_small(sample):
  data = np.asarray(sample.data[0])
  harness.check(data.dtype == np.float32 and data.size == 1,
                f'dtype {data.dtype}, size {data.size}')


_CHECKS = {'small': check_small, '1MB': check_large}


def make_tables():
  # Fifo removal bounds the server: 200 MB of large items.
  return [harness.fifo_table('small', 100_000),
          harness.fifo_table('large', 200)]


def bench_insert(client, payload, seconds, max_items):
  table, _, make, _ = _PAYLOADS[payload]
  items = [make(i) for i in range(16)]
  count = 0
  start = time.perf_counter()
  deadline = start + seconds
  while count < max_items:
    client.insert(items[count % len(items)], priorities={table: 1.0})
    count += 1
    if time.perf_counter() >= deadline:
      break
  return count, time.perf_counter() - start


def cost_row(payload, workload, plain, secured):
  """What TLS + token added to `workload` (CpuTotals of each side)."""
  item_mb = _PAYLOADS[payload][1] / 1e6
  per_item = secured.per_item_us('seconds') - plain.per_item_us('seconds')
  cost = {'per item': round(per_item, 1)}
  if item_mb >= 1:  # Per MB means nothing for a few bytes.
    cost['per MB'] = round(per_item / item_mb, 1)
  extra_cpu = {
      side: round(secured.per_item_us(f'{side}_cpu') -
                  plain.per_item_us(f'{side}_cpu'), 1)
      for side in ('client', 'server')}
  return (payload, f'{workload}, TLS cost', None, None, None,
          {'tls_cost_us': cost, 'cpu_us_per_item': extra_cpu})


@contextlib.contextmanager
def secured_environment(certs):
  """os.environ as the secured server child reads it, inside the block."""
  saved = dict(os.environ)
  os.environ.update(REVERB_TLS_CERTIFICATE_CHAIN=str(certs.server_chain),
                    REVERB_TLS_PRIVATE_KEY=str(certs.server_key),
                    REVERB_AUTH_TOKEN=_TOKEN)
  try:
    yield
  finally:
    os.environ.clear()
    os.environ.update(saved)


def run(args):
  rounds = 2 if args.quick else 4
  seconds = 0.25 if args.quick else 0.5  # Per round, payload and workload.
  results = []
  with contextlib.ExitStack() as stack:
    servers = {'plaintext': stack.enter_context(harness.ServerProcess())}
    clients = {'plaintext': reverb.Client(
        f'localhost:{servers["plaintext"].port}')}
    if _TLS:
      certs = tls_certs.make(stack.enter_context(tempfile.TemporaryDirectory()))
      with secured_environment(certs):
        servers['TLS+token'] = stack.enter_context(harness.ServerProcess())
      clients['TLS+token'] = reverb.Client(
          f'localhost:{servers["TLS+token"].port}',
          tls=reverb.TlsOptions(root_certificates=certs.ca),
          auth_token=_TOKEN)
    totals = {}
    for name, client in clients.items():  # Warm-up.
      for payload, (table, _, _, _) in _PAYLOADS.items():
        bench_insert(client, payload, 60.0, 20)
        list(client.sample(table, num_samples=10, emit_timesteps=False))
    # The sides take turns, so that the machine's load drifts over both.
    for _ in range(rounds):
      for payload, (table, _, _, bulk_n) in _PAYLOADS.items():
        for name, client in clients.items():
          insert = totals.setdefault((payload, 'insert', name),
                                     harness.CpuTotals())
          insert.timed(servers[name], lambda c=client, p=payload:
                       bench_insert(c, p, seconds, 1_000_000))
          sample = totals.setdefault(
              (payload, f'sample bulk (N={bulk_n})', name),
              harness.CpuTotals())
          sample.timed(servers[name], lambda c=client, t=table, n=bulk_n, p=
                       payload: harness.sample_bulk(c, t, n, seconds,
                                                    _CHECKS[p])[:2])
    for payload, (_, _, _, bulk_n) in _PAYLOADS.items():
      for workload in ('insert', f'sample bulk (N={bulk_n})'):
        for name in clients:
          results.append(totals[(payload, workload, name)].row(
              payload, f'{workload}, {name}', _PAYLOADS[payload][1]))
        if _TLS:
          results.append(cost_row(
              payload, workload, totals[(payload, workload, 'plaintext')],
              totals[(payload, workload, 'TLS+token')]))
  return results


if __name__ == '__main__':
  harness.main(__doc__, 'shorter workloads (2 rounds of 0.25 s)', run,
               make_tables)
