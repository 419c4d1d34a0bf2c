"""`reverb` (also `python -m reverb`): a replay server seen by people.

  reverb info ADDRESS [ADDRESS ...] [--json]   every table, one line each
  reverb watch ADDRESS [ADDRESS ...]           the same, every second, with
                                               insert and sample rates
  reverb checkpoint ADDRESS [ADDRESS ...]      save the tables; print where
                                               (progress on stderr)
  reverb reset ADDRESS TABLE --yes             delete a table's items
  reverb serve --config=... | --config_file=...  as `reverb_server`

Several addresses are the shards of one buffer (`reverb.Client([...])`).
Exit codes: 0 done, 1 the server failed or does not answer (said in one
line), 2 a usage error (an unknown table lists the tables). Works with
dm-reverb servers too (they lack the `samples_blocked` extension; what
blocks is computed from the rate limiter's counts either way).
"""

import argparse
import json
import os
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence, TextIO, Tuple

from reverb import client as client_lib
from reverb import errors
from reverb import structured_value
from reverb.cc import schema_pb2

# How long a command waits for a server before it says none answers.
_TIMEOUT_S = 2.0
# How often `checkpoint` redraws its progress bar, or prints a progress line
# where its output is not a terminal.
_BAR_INTERVAL_S = 0.2
_LINE_INTERVAL_S = 2.0


class _Failure(Exception):
  """A message for the user, and the exit code that goes with it."""

  def __init__(self, message: str, code: int = 1):
    super().__init__(message)
    self.code = code


def _client(addresses: Sequence[str]) -> client_lib.Client:
  return client_lib.Client(addresses[0] if len(addresses) == 1 else
                           list(addresses))


def _call(addresses: Sequence[str], what, *args, **kwargs):
  """`what(*args, **kwargs)`, its failures said in one line."""
  where = ', '.join(addresses)
  try:
    return what(*args, **kwargs)
  except errors.DeadlineExceededError:
    raise _Failure(f'No Reverb server answers at {where} (waited '
                   f'{_TIMEOUT_S:g} s).') from None
  except RuntimeError as e:
    text = str(e)
    if 'UNAVAILABLE' in text or 'connect' in text.lower():
      raise _Failure(f'No Reverb server answers at {where}: '
                     f'{text.splitlines()[0]}') from None
    raise _Failure(f'{where}: {text.splitlines()[0]}') from None


def _tables(client: client_lib.Client, addresses: Sequence[str]
            ) -> List[schema_pb2.TableInfo]:
  # pylint: disable-next=protected-access
  serialized = _call(addresses, client._table_infos, _TIMEOUT_S)
  return sorted((schema_pb2.TableInfo.FromString(s) for s in serialized),
                key=lambda info: info.name)


def _selector(options: schema_pb2.KeyDistributionOptions) -> str:
  kind = options.WhichOneof('distribution')
  if kind == 'prioritized':
    return f'Prioritized({options.prioritized.priority_exponent:g})'
  if kind == 'heap':
    return 'MinHeap' if options.heap.min_heap else 'MaxHeap'
  return {'fifo': 'Fifo', 'lifo': 'Lifo', 'uniform': 'Uniform'}.get(
      kind, '?')


def _blocked(info: schema_pb2.TableInfo) -> Dict[str, bool]:
  """Whether the next insert and the next sample would wait (the rate
  limiter's rules, docs/concepts.md)."""
  limiter = info.rate_limiter_info
  spi = limiter.samples_per_insert
  inserts = limiter.insert_stats.completed
  samples = limiter.sample_stats.completed
  size = info.current_size
  return {
      'inserts': (size + 1 > limiter.min_size_to_sample and
                  (inserts + 1) * spi - samples > limiter.max_diff),
      'samples': (size < limiter.min_size_to_sample or
                  inserts * spi - (samples + 1) < limiter.min_diff),
  }


def _limiter(info: schema_pb2.TableInfo) -> str:
  limiter = info.rate_limiter_info
  def number(x):
    if abs(x) >= 1.7e308:  # std::numeric_limits<double>: no bound.
      return '-inf' if x < 0 else 'inf'
    return f'{x:g}'
  return (f'spi={number(limiter.samples_per_insert)} '
          f'min_size={limiter.min_size_to_sample} '
          f'diff=[{number(limiter.min_diff)}, {number(limiter.max_diff)}]')


def _signature(info: schema_pb2.TableInfo) -> str:
  if not info.HasField('signature'):
    return '-'
  return _nest(structured_value.decode(info.signature))


def _nest(value) -> str:
  if isinstance(value, dict):
    return '{' + ', '.join(f'{k}: {_nest(v)}' for k, v in value.items()) + '}'
  if isinstance(value, tuple) and hasattr(value, '_fields'):
    return (f'{type(value).__name__}(' + ', '.join(
        f'{k}={_nest(v)}' for k, v in zip(value._fields, value)) + ')')
  if isinstance(value, (list, tuple)):
    inner = ', '.join(_nest(v) for v in value)
    return f'[{inner}]' if isinstance(value, list) else f'({inner})'
  dtype = getattr(value, 'dtype', None)
  shape = getattr(value, 'shape', None)
  if dtype is not None and shape is not None:
    dims = ','.join('?' if d is None else str(d) for d in tuple(shape))
    return f'{getattr(dtype, "name", dtype)}[{dims}]'
  return repr(value)


def _row(info: schema_pb2.TableInfo) -> Dict[str, object]:
  blocked = _blocked(info)
  return {
      'table': info.name,
      'size': info.current_size,
      'max_size': info.max_size,
      'sampler': _selector(info.sampler_options),
      'remover': _selector(info.remover_options),
      'rate_limiter': _limiter(info),
      'inserts': info.rate_limiter_info.insert_stats.completed,
      'samples': info.rate_limiter_info.sample_stats.completed,
      'blocks': [kind for kind, waits in blocked.items() if waits],
      'signature': _signature(info),
  }


def _format(rows: List[Dict[str, object]],
            rates: Optional[Dict[str, Dict[str, float]]] = None) -> str:
  headers = ['table', 'size / max', 'sampler', 'remover', 'rate limiter',
             'blocks']
  if rates is not None:
    headers += ['inserts/s', 'samples/s']
  headers.append('signature')
  lines = []
  for row in rows:
    cells = [row['table'], f'{row["size"]} / {row["max_size"]}',
             row['sampler'], row['remover'], row['rate_limiter'],
             ', '.join(row['blocks']) or '-']
    if rates is not None:
      rate = rates.get(row['table'], {})
      cells += [f'{rate.get("inserts", 0.0):.1f}',
                f'{rate.get("samples", 0.0):.1f}']
    cells.append(row['signature'])
    lines.append([str(c) for c in cells])
  widths = [max(len(h), *(len(line[i]) for line in lines))
            for i, h in enumerate(headers)]
  def join(cells):
    return '  '.join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
  return '\n'.join([join(headers), join(['-' * w for w in widths]),
                    *(join(line) for line in lines)])


def _info(args, out: TextIO) -> int:
  rows = [_row(info) for info in _tables(_client(args.address),
                                         args.address)]
  if args.json:
    json.dump(rows, out, indent=2)
    out.write('\n')
  else:
    out.write(_format(rows) + '\n')
  return 0


def _watch(args, out: TextIO) -> int:
  client = _client(args.address)
  last = None
  try:
    while True:
      now = time.monotonic()
      rows = [_row(info) for info in _tables(client, args.address)]
      rates = {}
      if last is not None:
        then, before = last
        for row in rows:
          old = before.get(row['table'])
          if old is not None:
            rates[row['table']] = {
                kind: max(0, row[kind] - old[kind]) / (now - then)
                for kind in ('inserts', 'samples')}
      last = (now, {row['table']: row for row in rows})
      out.write('\x1b[H\x1b[2J' if out.isatty() else '\n')
      out.write(f'{", ".join(args.address)}  {time.strftime("%H:%M:%S")}  '
                '(Ctrl-C to stop)\n' + _format(rows, rates) + '\n')
      out.flush()
      time.sleep(max(0.0, args.interval - (time.monotonic() - now)))
  except KeyboardInterrupt:
    return 0


def _progress(client: client_lib.Client) -> Optional[Tuple[int, int, float]]:
  """(bytes done, bytes total, seconds) of the saves running on the
  servers, summed; None where no server tells (dm-reverb's) or none saves."""
  try:
    # pylint: disable-next=protected-access
    shards = client._client.CheckpointProgress(int(_TIMEOUT_S * 1000))
  except RuntimeError:
    return None
  saving = [shard for shard in shards if shard is not None and shard[0]]
  if not saving:
    return None
  return (sum(s[1] for s in saving), sum(s[2] for s in saving),
          max(s[3] for s in saving) / 1000)


def _progress_text(done: int, total: int, seconds: float,
                   width: Optional[int]) -> str:
  """`[####....] 120.0 / 400.0 MiB  30%  95.3 MiB/s  about 3 s left`, the
  bar only with a `width` (a terminal's)."""
  mib = 1 << 20
  rate = done / mib / seconds if seconds > 0 else 0.0
  if total <= 0:
    return f'saving: snapshotting the tables ({seconds:.0f} s)'
  fraction = min(1.0, done / total)
  text = (f'{done / mib:.1f} / {total / mib:.1f} MiB  {fraction:4.0%}  '
          f'{rate:.1f} MiB/s')
  if 0 < rate and done < total:
    text += f'  about {(total - done) / mib / rate:.0f} s left'
  if width is None:
    return f'saving: {text}'
  cells = max(10, min(40, width - len(text) - 12))
  filled = int(fraction * cells)
  return f'saving [{"#" * filled}{"." * (cells - filled)}] {text}'


def _checkpoint(args, out: TextIO) -> int:
  client = _client(args.address)
  _tables(client, args.address)  # Fails fast where no server answers.
  result = {}

  def save():
    try:
      result['paths'] = _call(args.address, client.checkpoint)
    except _Failure as failure:
      result['failure'] = failure

  saver = threading.Thread(target=save, daemon=True)
  saver.start()
  # Progress goes to stderr (stdout has only the paths, for scripts): a
  # bar redrawn in place on a terminal, else a line now and then; servers
  # that do not tell their progress (dm-reverb's) get neither.
  err = sys.stderr
  tty = err.isatty()
  interval = _BAR_INTERVAL_S if tty else _LINE_INTERVAL_S
  drawn = False
  while True:
    saver.join(interval)
    if not saver.is_alive():
      break
    progress = _progress(client)
    if progress is None:
      continue
    if tty:
      try:
        width = os.get_terminal_size(err.fileno()).columns or 80
      except (OSError, ValueError):
        width = 80
      line = _progress_text(*progress, width=width)[:width - 1]
      err.write('\r' + line.ljust(width - 1))
      drawn = True
    else:
      err.write(_progress_text(*progress, width=None) + '\n')
    err.flush()
  if drawn:
    err.write('\n')
  if 'failure' in result:
    raise result['failure']
  paths = result['paths']
  for path in [paths] if isinstance(paths, str) else paths:
    out.write(f'{path}\n')
  return 0


def _reset(args, out: TextIO) -> int:
  client = _client(args.address)
  names = [info.name for info in _tables(client, args.address)]
  if args.table not in names:
    raise _Failure(f'No table {args.table!r} at {", ".join(args.address)}; '
                   f'its tables: {", ".join(names) or "none"}.', code=2)
  if not args.yes:
    raise _Failure(f'reset deletes every item of {args.table!r}: add --yes '
                   'to do it.', code=2)
  _call(args.address, client.reset, args.table)
  out.write(f'{args.table}: reset\n')
  return 0


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog='reverb', description='Look at and operate Reverb servers.')
  commands = parser.add_subparsers(dest='command', required=True)
  info = commands.add_parser('info', help='every table, one line each')
  info.add_argument('address', nargs='+', help='host:port or unix:PATH')
  info.add_argument('--json', action='store_true',
                    help='a JSON list of tables instead')
  info.set_defaults(run=_info)
  watch = commands.add_parser('watch', help='info, refreshed, with rates')
  watch.add_argument('address', nargs='+')
  watch.add_argument('--interval', type=float, default=1.0,
                     help='seconds between refreshes (default 1)')
  watch.set_defaults(run=_watch)
  checkpoint = commands.add_parser('checkpoint', help='save the tables')
  checkpoint.add_argument('address', nargs='+')
  checkpoint.set_defaults(run=_checkpoint)
  reset = commands.add_parser('reset', help="delete a table's items")
  reset.add_argument('address', nargs=1)
  reset.add_argument('table')
  reset.add_argument('--yes', action='store_true',
                     help='really delete them')
  reset.set_defaults(run=_reset)
  commands.add_parser('serve', add_help=False,
                      help='run a server (the flags of reverb_server)')
  return parser


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout
         ) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if argv and argv[0] == 'serve':
    # pylint: disable-next=g-import-not-at-top
    from reverb.server_executable import server_main
    return server_main.main(argv[1:])
  args = _parser().parse_args(argv)
  try:
    return args.run(args, out)
  except _Failure as failure:
    print(f'reverb {args.command}: {failure}', file=sys.stderr)
    return failure.code


if __name__ == '__main__':
  sys.exit(main())
