"""Side-by-side table of benchmark runs (the --json reports of the gRPC
benchmarks), as Markdown for docs/benchmarks.md:

  python3 bench/compare.py --ours ours1.json ours2.json ours3.json \\
      --theirs dm1.json dm2.json dm3.json

Rows are matched by (payload, workload); each cell is the median items/s of
the runs with the range in brackets, and the ratio is ours / theirs of the
medians. A row only one side ran shows a dash on the other. Needs no reverb.
"""

import argparse
import json
import statistics


def _load(paths):
  """{(payload, workload): [items/s, ...]} in first-seen order, and the
  load averages (1 min) the reports saw."""
  rates = {}
  loads = []
  for path in paths:
    with open(path) as f:
      report = json.load(f)
    loads.extend(report['loadavg_1min'])
    for row in report['results']:
      rates.setdefault((row['payload'], row['workload']), []).append(
          row['items_per_s'])
  return rates, loads


def _cell(values):
  if not values:
    return '-'
  return (f'{statistics.median(values):,.0f} '
          f'({min(values):,.0f}-{max(values):,.0f})')


def markdown_table(ours_paths, theirs_paths, theirs_name='dm-reverb 0.14'):
  """The side-by-side table of two sets of --json reports (theirs may be
  empty), as Markdown lines, after a line with the load averages."""
  ours, our_loads = _load(ours_paths)
  theirs, their_loads = _load(theirs_paths)
  loads = our_loads + their_loads
  lines = [f'load average (1 min) {min(loads):.2f}-{max(loads):.2f}', '',
           f'| payload | workload | ours | {theirs_name} | ratio |',
           '|---|---|---:|---:|---:|']
  for key in list(ours) + [key for key in theirs if key not in ours]:
    a, b = ours.get(key, []), theirs.get(key, [])
    ratio = (f'{statistics.median(a) / statistics.median(b):.1f}x'
             if a and b else '-')
    lines.append(f'| {key[0]} | {key[1]} | {_cell(a)} | {_cell(b)} | '
                 f'{ratio} |')
  return lines


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--ours', nargs='+', required=True, metavar='JSON')
  parser.add_argument('--theirs', nargs='+', required=True, metavar='JSON')
  parser.add_argument('--theirs-name', default='dm-reverb 0.14')
  args = parser.parse_args()
  print('\n'.join(markdown_table(args.ours, args.theirs, args.theirs_name)))


if __name__ == '__main__':
  main()
