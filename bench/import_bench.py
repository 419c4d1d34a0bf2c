"""Start-up cost: seconds of `python -c 'import reverb'` in a fresh process.

Runs with any Python whose `reverb` is ours or dm-reverb 0.14, so the same
command measures both:

  .venv/bin/python bench/import_bench.py [--quick] [--json OUT]
  .venv-dmreverb/bin/python -I bench/import_bench.py [--quick] [--json OUT]

Starts this interpreter (with -I if this script runs with it, as for
dm-reverb) 5 times (--quick: 3) with `-c 'import reverb'` after one untimed
start (disk cache), and reports the median wall time of the whole process
as the row's p50 latency in milliseconds (`min_ms` and `max_ms` in the
JSON report are the fastest and slowest); the same for `-c 'pass'`,
the interpreter's own start, for reference. Each child also reports which
`reverb` it imported (it must be this script's) and whether TensorFlow came
with it (dm-reverb imports it; ours should not): the row's
`imports_tensorflow`. TF_CPP_MIN_LOG_LEVEL=2, as for the other benchmarks.
No server; --same-process changes nothing.
"""

import os
import statistics
import subprocess
import sys
import time

# harness sits next to this script; python -I leaves that directory out.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

# The timed statement, and (in a child of its own, untimed) what it imported:
# one line on stdout, apart from any warnings on stderr.
_IMPORT = 'import reverb'
_REPORT = ("import sys; print('IMPORTED', reverb.__file__, "
           "'tensorflow' in sys.modules)")


def make_tables():
  return []


def start(code):
  """Runs this interpreter with -c `code`; returns (wall seconds, stdout)."""
  flags = ['-I'] if sys.flags.isolated else []
  begin = time.perf_counter()
  done = subprocess.run([sys.executable] + flags + ['-c', code],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, timeout=300, check=False)
  elapsed = time.perf_counter() - begin
  if done.returncode != 0:
    raise SystemExit(f'{code!r} failed:\n{done.stderr}')
  return elapsed, done.stdout


def row(workload, times, extra=None):
  return ('-', workload, None, None, 0,
          dict({'runs': len(times),
                'latency_ms': {'p50': round(statistics.median(times) * 1e3, 2)},
                'min_ms': round(min(times) * 1e3, 2),
                'max_ms': round(max(times) * 1e3, 2)}, **(extra or {})))


def run(args):
  runs = 3 if args.quick else 5
  start(_IMPORT)  # Untimed: files into the page cache.
  # The timed child only imports; a second statement in another child says
  # what that import brought in.
  imports = [start(_IMPORT)[0] for _ in range(runs)]
  _, out = start(f'{_IMPORT}; {_REPORT}')
  line = [l for l in out.splitlines() if l.startswith('IMPORTED ')]
  harness.check(len(line) == 1, f'the child said {out!r}')
  path, tensorflow = line[0].split()[1:]
  harness.check(path == reverb.__file__,
                f'the child imported {path}, not {reverb.__file__}')
  start('pass')
  bare = [start('pass')[0] for _ in range(runs)]
  return [row("python -c 'import reverb'", imports,
              {'imports_tensorflow': tensorflow == 'True'}),
          row("python -c 'pass'", bare)]


if __name__ == '__main__':
  harness.main(__doc__, '3 starts instead of 5', run, make_tables)
