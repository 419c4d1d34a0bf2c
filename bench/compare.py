"""Side-by-side table of benchmark runs (the --json reports of the gRPC
benchmarks), as Markdown for docs/benchmarks.md:

  python3 bench/compare.py --ours ours1.json ours2.json ours3.json \\
      --theirs dm1.json dm2.json dm3.json

Rows are matched by (payload, workload); each cell is the median items/s of
the runs with the range in brackets, and the ratio is ours / theirs of the
medians. A row only one side ran shows a dash on the other. A report row with
the figures of a group of FIGURES (`latency_ms`: {'p50': ms, 'p99': ms},
say) adds a row per figure, whose ratio is theirs / ours (lower is better
there): above 1 means ours is better, as in the items/s rows. `write_plot`
draws the items/s medians as a bar chart (`python -m bench` writes it).
Needs no reverb.
"""

import argparse
import json
import statistics

# Groups of figures a report row may carry besides items/s, all of them
# lower-is-better: {row key: label of a figure, from its name}.
FIGURES = {
    'latency_ms': '{} ms',
    'cpu_us_per_item': '{} CPU us/item',
    'tv_distance': 'TV distance, {}',
    'tls_cost_us': 'TLS us {}',
    'growth': '{} growth',
    'faults': 'minor faults {}',
    'memory_per_payload': '{} memory / payload',
}


def _load(paths):
  """{(payload, workload, figure): [value, ...]} in first-seen order, and
  the load averages (1 min) the reports saw. `figure` is 'items/s' or the
  label of a figure of FIGURES ('p50 ms', ...); a row of such figures only
  has no 'items/s'."""
  values = {}
  loads = []
  for path in paths:
    with open(path) as f:
      report = json.load(f)
    loads.extend(report['loadavg_1min'])
    for row in report['results']:
      figures = [('items/s', row['items_per_s'])] + [
          (label.format(name), value) for group, label in FIGURES.items()
          for name, value in row.get(group, {}).items()]
      for figure, value in figures:
        if value is not None:
          values.setdefault((row['payload'], row['workload'], figure),
                            []).append(value)
  return values, loads


def _number(value, figure):
  if figure == 'items/s' or value >= 100:
    return f'{value:,.0f}'
  return f'{value:.{1 if value >= 10 else 2 if value >= 1 else 3}f}'


def _cell(values, figure):
  if not values:
    return '-'
  return (f'{_number(statistics.median(values), figure)} '
          f'({_number(min(values), figure)}-{_number(max(values), figure)})')


def _label(workload, figure):
  return workload if figure == 'items/s' else f'{workload}: {figure}'


def medians(paths):
  """{(payload, workload): median items/s} of --json reports."""
  values, _ = _load(paths)
  return {key[:2]: statistics.median(v) for key, v in values.items()
          if key[2] == 'items/s'}


def markdown_table(ours_paths, theirs_paths, theirs_name='dm-reverb 0.14'):
  """The side-by-side table of two sets of --json reports (theirs may be
  empty), as Markdown lines, after a line with the load averages."""
  ours, our_loads = _load(ours_paths)
  theirs, their_loads = _load(theirs_paths)
  loads = our_loads + their_loads
  lines = [f'load average (1 min) {min(loads):.2f}-{max(loads):.2f}', '',
           f'| payload | workload | ours | {theirs_name} | ratio |',
           '|---|---|---:|---:|---:|']
  lower_is_better = False
  for key in list(ours) + [key for key in theirs if key not in ours]:
    payload, workload, figure = key
    a, b = ours.get(key, []), theirs.get(key, [])
    ratio = '-'
    if a and b:
      a_median, b_median = statistics.median(a), statistics.median(b)
      if figure != 'items/s':  # Lower is better: theirs / ours.
        lower_is_better = True
        a_median, b_median = b_median, a_median
      ratio = f'{a_median / b_median:.1f}x' if b_median else '-'
    lines.append(f'| {payload} | {_label(workload, figure)} | '
                 f'{_cell(a, figure)} | {_cell(b, figure)} | {ratio} |')
  if lower_is_better:
    lines += ['', 'Rows of latencies (ms), CPU per item and distances are '
              'lower-is-better; their ratio is theirs / ours, so above 1 '
              'means ours is better, as in the items/s rows.']
  return lines


def write_plot(entries, path, ours_name='ours',
               theirs_name='dm-reverb 0.14'):
  """A horizontal bar chart (log scale) of median items/s, ours and theirs
  side by side, one pair of bars per (script, payload, workload).

  Args:
    entries: [(script, ours' --json reports, theirs')], in order.
    path: The PNG to write.
    ours_name: The label of the first side.
    theirs_name: The label of the other side.

  Returns:
    False (and writes nothing) if matplotlib is missing, else True.
  """
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  labels, ours, theirs = [], [], []
  for script, ours_paths, theirs_paths in entries:
    a, b = medians(ours_paths), medians(theirs_paths)
    for key in list(a) + [key for key in b if key not in a]:
      labels.append(f'{script.replace("_bench", "")}: {key[0]}, {key[1]}')
      ours.append(a.get(key, 0))
      theirs.append(b.get(key, 0))
  rows = range(len(labels))
  height = 0.4
  fig, ax = plt.subplots(figsize=(11, 1.2 + 0.36 * len(labels)))
  ax.barh([y - height / 2 for y in rows], ours, height, label=ours_name,
          color='tab:blue')
  if any(theirs):
    ax.barh([y + height / 2 for y in rows], theirs, height, label=theirs_name,
            color='tab:orange')
  for y, a, b in zip(rows, ours, theirs):
    if a and b:
      ax.text(max(a, b) * 1.15, y, f'{a / b:.1f}x', va='center', fontsize=8)
  ax.set_yticks(list(rows))
  ax.set_yticklabels(labels, fontsize=8)
  ax.invert_yaxis()
  ax.set_xscale('log')
  values = [v for v in ours + theirs if v]
  if values:
    ax.set_xlim(min(values) / 2, max(values) * 4)
  ax.set_xlabel('items/s (median of the runs; log scale)' + (
      f'; {ours_name} / {theirs_name} at the right of each pair'
      if any(theirs) else ''))
  ax.grid(axis='x', which='major', alpha=0.3)
  ax.legend(loc='best')
  ax.set_title(f'Reverb benchmarks: items/s, {ours_name}'
               + (f' and {theirs_name}' if any(theirs) else ''))
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return True


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
