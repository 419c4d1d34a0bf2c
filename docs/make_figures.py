"""Draws the figures of docs/concepts.md (and the README's) with matplotlib.

    python docs/make_figures.py [OUT_DIR]

writes into OUT_DIR (default: docs/figures):
  items-and-chunks.png  items of two tables as slices of shared chunks;
  rate-limiter.png      the rate limiter's window over diff, and where
                        inserts and samples wait;
  shards.png            writers on one shard each, samplers drawing the
                        shard of every sample by its weight.
The figures are drawn from the rules they show (the chunk layout, the
limiter's arithmetic, the shard weights), so a change of those rules is a
change here too.
"""

import pathlib
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import patches  # noqa: E402

_INK = '#222222'
_CHUNK_COLOURS = ('#cfe2f3', '#d9ead3', '#fce5cd')
_ITEM_COLOURS = ('#3c78d8', '#6aa84f', '#cc0000', '#e69138')


def _box(ax, x, y, w, h, face, text='', **text_args):
  ax.add_patch(patches.FancyBboxPatch(
      (x, y), w, h, boxstyle='round,pad=0.02,rounding_size=0.08',
      facecolor=face, edgecolor=_INK, linewidth=1))
  if text:
    ax.text(x + w / 2, y + h / 2, text, ha='center', va='center',
            fontsize=text_args.pop('fontsize', 9), **text_args)


def _arrow(ax, start, end, colour=_INK, style='-|>', width=1.2):
  ax.add_patch(patches.FancyArrowPatch(
      start, end, arrowstyle=style, mutation_scale=10, color=colour,
      linewidth=width, shrinkA=2, shrinkB=2))


def _canvas(width, height):
  fig, ax = plt.subplots(figsize=(width, height))
  ax.set_xlim(0, width)
  ax.set_ylim(0, height)
  ax.set_aspect('equal')
  ax.axis('off')
  return fig, ax


def items_and_chunks(path):
  """Eight steps in two chunks of four; items of two tables slice them."""
  steps, chunk_len = 8, 4
  fig, ax = _canvas(10, 4.2)
  x0, cell = 1.8, 1.0
  for t in range(steps):
    ax.text(x0 + (t + 0.5) * cell, 3.85, f's{t}', ha='center', va='center',
            fontsize=9)
  ax.text(0.1, 3.85, 'steps', fontsize=9, va='center')
  ax.text(0.1, 3.2, 'chunks (stored\nonce, snappy)', fontsize=8, va='center')
  for c in range(steps // chunk_len):
    first = c * chunk_len
    _box(ax, x0 + first * cell + 0.05, 2.9, chunk_len * cell - 0.1, 0.6,
         _CHUNK_COLOURS[c],
         f'chunk {c + 1}: s{first}-s{first + chunk_len - 1}')
  # (table, first step, length) of each item; each step's cell takes the
  # colour of the chunk its row comes from.
  items = (('table A', 2, 3), ('table A', 4, 3), ('table B', 2, 3),
           ('table B', 5, 3))
  for row, (table, first, length) in enumerate(items):
    y = 2.15 - row * 0.5
    ax.text(0.1, y + 0.18, f'{table}: item {row + 1}', fontsize=8,
            va='center')
    for t in range(first, first + length):
      ax.add_patch(patches.Rectangle(
          (x0 + t * cell + 0.08, y), cell - 0.16, 0.36,
          facecolor=_CHUNK_COLOURS[t // chunk_len], edgecolor=_INK,
          linewidth=0.8))
      ax.text(x0 + (t + 0.5) * cell, y + 0.18, f's{t}', ha='center',
              va='center', fontsize=7.5)
  ax.plot([x0 + chunk_len * cell] * 2, [0.55, 3.55], linestyle=':',
          color='#888888', linewidth=1)
  ax.text(0.1, 0.05,
          'An item is a slice of rows of its chunks (its cells take the '
          'colour of their chunk): items of\nany table share chunks, and a '
          'chunk is freed with the last item that uses it.', fontsize=8.5)
  fig.savefig(path, dpi=110, bbox_inches='tight')
  plt.close(fig)


def rate_limiter(path, samples_per_insert=2.0, min_diff=4.0, max_diff=12.0):
  """diff = inserts * spi - samples over time, bouncing inside its window.

  The trace follows the limiter's rules: an insert proceeds if the diff
  after it stays <= max_diff, a sample if the diff after it stays >=
  min_diff; otherwise the call waits (the shaded bands).
  """
  fig, ax = plt.subplots(figsize=(8.5, 3.6))
  inserts = samples = 0
  diffs, waits = [0.0], []
  # Actors insert three times as fast as the learner samples, then stop
  # for a while: inserts wait at max_diff, then samples at min_diff.
  pattern = ['i', 'i', 'i', 's'] * 10 + ['s'] * 18 + ['i', 's'] * 6
  for call in pattern:
    diff = inserts * samples_per_insert - samples
    if call == 'i':
      if diff + samples_per_insert <= max_diff:
        inserts += 1
      else:
        waits.append((len(diffs), 'insert'))
    else:
      if diff - 1 >= min_diff:
        samples += 1
      else:
        waits.append((len(diffs), 'sample'))
    diffs.append(inserts * samples_per_insert - samples)
  xs = range(len(diffs))
  ax.axhspan(max_diff, max_diff + 4, color='#f4cccc')
  ax.axhspan(min_diff - 4, min_diff, color='#fff2cc')
  ax.axhline(max_diff, color='#cc0000', linewidth=1)
  ax.axhline(min_diff, color='#bf9000', linewidth=1)
  ax.step(xs, diffs, where='post', color=_INK, linewidth=1.5)
  for x, kind in waits:
    ax.plot(x, diffs[x], 'o', markersize=4,
            color='#cc0000' if kind == 'insert' else '#bf9000')
  ax.text(len(diffs) - 0.5, max_diff + 2, 'inserts wait', ha='right',
          va='center', fontsize=9, color='#990000')
  ax.text(len(diffs) - 0.5, min_diff - 2, 'samples wait', ha='right',
          va='center', fontsize=9, color='#7f6000')
  ax.text(0.5, (min_diff + max_diff) / 2, 'inserts and samples proceed',
          va='center', fontsize=9)
  ax.set_yticks([min_diff, max_diff], ['min_diff', 'max_diff'])
  ax.set_ylim(min_diff - 4, max_diff + 4)
  ax.set_xlabel('calls (an insert raises diff by samples_per_insert = 2, '
                'a sample lowers it by 1; dots: a call that waits)',
                fontsize=8.5)
  ax.set_ylabel('diff = inserts * spi - samples', fontsize=8.5)
  for side in ('top', 'right'):
    ax.spines[side].set_visible(False)
  fig.savefig(path, dpi=110, bbox_inches='tight')
  plt.close(fig)


def shards(path, sizes=(300, 100, 200)):
  """Three shards; each writer on one; samples drawn by shard weight."""
  fig, ax = _canvas(10, 5.2)
  total = sum(sizes)
  centres = [1.9 + i * 3.1 for i in range(len(sizes))]
  for i, size in enumerate(sizes):
    _box(ax, centres[i] - 0.9, 2.5, 1.8, 1.0, _CHUNK_COLOURS[i],
         f'shard {i}\n{size} items')
  writers = (0, 0, 1, 2)  # the shard of each writer
  for w, shard in enumerate(writers):
    x = 0.6 + w * 2.35
    _box(ax, x, 4.55, 1.3, 0.45, 'white', f'writer {w}', fontsize=8)
    _arrow(ax, (x + 0.65, 4.55), (centres[shard], 3.5),
           colour=_ITEM_COLOURS[shard])
  _box(ax, centres[1] - 1.1, 0.95, 2.2, 0.6, 'white', 'sampler', fontsize=9)
  for i, size in enumerate(sizes):
    _arrow(ax, (centres[i], 2.5), (centres[1], 1.55),
           width=0.6 + 4 * size / total, colour='#666666')
    ax.text(centres[i] + (0.25 if i >= 1 else -0.25), 2.05,
            f'weight {size / total:.2f}', ha='left' if i >= 1 else 'right',
            fontsize=8)
  ax.text(0.1, 0.0,
          'Each writer writes to one shard at a time (an item and its '
          'chunks live together) and may\nmove at an episode boundary. '
          'The sampler draws the shard of every sample with weight = its\n'
          'size (Uniform) or its sum of priority^exponent (Prioritized), '
          "then the item by that shard's selector.", fontsize=8.5)
  fig.savefig(path, dpi=110, bbox_inches='tight')
  plt.close(fig)


FIGURES = {
    'items-and-chunks.png': items_and_chunks,
    'rate-limiter.png': rate_limiter,
    'shards.png': shards,
}


def main(argv):
  out = pathlib.Path(argv[1]) if len(argv) > 1 else (
      pathlib.Path(__file__).resolve().parent / 'figures')
  out.mkdir(parents=True, exist_ok=True)
  for name, draw in FIGURES.items():
    draw(out / name)
    print(out / name)


if __name__ == '__main__':
  main(sys.argv)
