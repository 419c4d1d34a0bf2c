"""Every gRPC benchmark, ours and dm-reverb 0.14's side by side.

  .venv/bin/python -m bench [--quick] [--runs 3] [--out bench-results]
      [--only ours] [--scripts NAME ...] [--same-process]

Runs client_bench, writer_bench, dataset_bench, tf_client_bench,
checkpoint_bench, prioritized_bench, ratelimit_bench, shard_bench,
unix_socket_bench, tls_bench, in_process_bench, import_bench,
peers_bench (which also runs TorchRL and cpprb from `.venv-peers`, made by
`.ci/peers_venv`, and skips them with a note where it is missing) and
batch_bench (each a script of its own: see their docstrings), and soak_bench with --quick or
when named in --scripts (without --quick it soaks for 30 minutes a run), with
our package (this interpreter) and, when
`.venv-dmreverb` exists (`.ci/dmreverb_venv`), with dm-reverb, alternating
the two (A B A B ...) `--runs` times. Every run validates what it received
and fails rather than score wrong data. The JSON reports go to `--out`,
`summary.md` there holds one table per benchmark: median (min-max) items/s
(and latencies, CPU per item, distances) of the runs and the ratio of the medians; and
`throughput.png` the items/s medians as a bar chart (skipped with a note
when matplotlib is missing). --same-process is passed on to the scripts:
those that start a server then run it in the benchmark process instead of a
child (checkpoint_bench, which restarts its server, shard_bench, which
measures its servers' CPU, unix_socket_bench and tls_bench, which compare two
ways between processes, in_process_bench, which always runs its server in its
own process, import_bench, which has none, and peers_bench, which runs
both, ignore it).
"""

import argparse
import os
import pathlib
import subprocess
import sys

from bench import compare

BENCH = pathlib.Path(__file__).resolve().parent
SCRIPTS = ['client_bench', 'writer_bench', 'dataset_bench', 'tf_client_bench',
           'checkpoint_bench', 'prioritized_bench', 'ratelimit_bench',
           'shard_bench', 'unix_socket_bench', 'tls_bench', 'in_process_bench',
           'import_bench', 'peers_bench', 'batch_bench', 'soak_bench']
# Run by default only with --quick (a few seconds then).
LONG_SCRIPTS = ['soak_bench']
DMREVERB_PYTHON = BENCH.parent / '.venv-dmreverb' / 'bin' / 'python'


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--quick', action='store_true',
                      help='short workloads (about a minute for ours)')
  parser.add_argument('--runs', type=int, default=3)
  parser.add_argument('--out', default='bench-results')
  parser.add_argument('--only', choices=['ours', 'dm-reverb'])
  parser.add_argument('--scripts', nargs='+', choices=SCRIPTS)
  parser.add_argument('--same-process', action='store_true',
                      help='servers in the benchmark processes, not children')
  args = parser.parse_args()
  if args.scripts is None:
    args.scripts = [s for s in SCRIPTS
                    if args.quick or s not in LONG_SCRIPTS]
  sides = {'ours': [sys.executable]}
  if DMREVERB_PYTHON.exists():
    sides['dm-reverb'] = [str(DMREVERB_PYTHON), '-I']
  if args.only:
    if args.only not in sides:
      raise SystemExit(f'{DMREVERB_PYTHON} is missing (.ci/dmreverb_venv)')
    sides = {args.only: sides[args.only]}
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  summary = []
  plotted = []
  for script in args.scripts:
    reports = {side: [] for side in sides}
    for run in range(1, args.runs + 1):
      for side, python in sides.items():
        report = out / f'{script}.{side}.{run}.json'
        command = python + [str(BENCH / f'{script}.py'), '--json', str(report)]
        if args.quick:
          command.append('--quick')
        if args.same_process:
          command.append('--same-process')
        print(f'== {script}, {side}, run {run}', flush=True)
        subprocess.run(command, env=env, check=True, timeout=3600)
        reports[side].append(report)
    ours = reports.get('ours', []) or reports['dm-reverb']
    theirs = reports.get('dm-reverb', []) if 'ours' in reports else []
    title = f'## {script}' + (' (--same-process)' if args.same_process else '')
    summary += [title, ''] + compare.markdown_table(ours, theirs) + ['']
    plotted.append((script, ours, theirs))
  text = '\n'.join(summary)
  (out / 'summary.md').write_text(text)
  print(text)
  ours_name = 'ours' if 'ours' in sides else 'dm-reverb 0.14'
  if compare.write_plot(plotted, out / 'throughput.png', ours_name):
    print(f'plot: {out / "throughput.png"}')
  else:
    print('note: matplotlib is missing; no throughput.png')


if __name__ == '__main__':
  main()
