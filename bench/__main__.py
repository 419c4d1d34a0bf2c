"""Every gRPC benchmark, ours and dm-reverb 0.14's side by side.

  .venv/bin/python -m bench [--quick] [--runs 3] [--out bench-results]
      [--only ours]

Runs client_bench, writer_bench, dataset_bench and checkpoint_bench (each a
script of its own: see their docstrings) with our package (this
interpreter) and, when `.venv-dmreverb` exists (`.ci/dmreverb_venv`), with
dm-reverb, alternating the two (A B A B ...) `--runs` times. Every run
validates what it received and fails rather than score wrong data. The JSON
reports go to `--out`, and `summary.md` there holds one table per benchmark:
median (min-max) items/s of the runs and the ratio of the medians.
"""

import argparse
import os
import pathlib
import subprocess
import sys

from bench import compare

BENCH = pathlib.Path(__file__).resolve().parent
SCRIPTS = ['client_bench', 'writer_bench', 'dataset_bench', 'checkpoint_bench']
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
  parser.add_argument('--scripts', nargs='+', choices=SCRIPTS,
                      default=SCRIPTS)
  args = parser.parse_args()
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
  for script in args.scripts:
    reports = {side: [] for side in sides}
    for run in range(1, args.runs + 1):
      for side, python in sides.items():
        report = out / f'{script}.{side}.{run}.json'
        command = python + [str(BENCH / f'{script}.py'), '--json', str(report)]
        if args.quick:
          command.append('--quick')
        print(f'== {script}, {side}, run {run}', flush=True)
        subprocess.run(command, env=env, check=True, timeout=3600)
        reports[side].append(report)
    summary += [f'## {script}', ''] + compare.markdown_table(
        reports.get('ours', []) or reports['dm-reverb'],
        reports.get('dm-reverb', []) if 'ours' in reports else []) + ['']
  text = '\n'.join(summary)
  (out / 'summary.md').write_text(text)
  print(text)


if __name__ == '__main__':
  main()
