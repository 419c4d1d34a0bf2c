"""The folders of cc/ are layers: each includes only the layers before it.

The order is the README's (Layout): support, tensor, selectors,
rate_limiters, core, checkpointing, wire, then service and client, which are
two sides of the wire and never include each other. Below wire no file
includes gRPC; nothing in cc/ includes the bindings or the TensorFlow ops.
"""

import pathlib
import re

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_CC = _ROOT / 'cc'
_LAYERS = ('support', 'tensor', 'selectors', 'rate_limiters', 'core',
           'checkpointing', 'wire', ('service', 'client'))
_RANK = {name: rank for rank, layer in enumerate(_LAYERS)
         for name in (layer if isinstance(layer, tuple) else (layer,))}
_INCLUDE = re.compile(r'^#include\s+"([^"]+)"', re.MULTILINE)
_GRPC = re.compile(r'^(grpcpp?/|grpc/|reverb/cc/reverb_service\.grpc)')


def _sources():
  return sorted(p for p in _CC.rglob('*') if p.suffix in ('.h', '.cc'))


def _includes(path):
  return _INCLUDE.findall(path.read_text())


def test_every_source_lives_in_a_layer():
  stray = [str(p.relative_to(_ROOT)) for p in _sources()
           if p.relative_to(_CC).parts[0] not in _RANK]
  assert not stray, f'sources outside the layers of cc/: {stray}'


@pytest.mark.parametrize('path', _sources(),
                         ids=lambda p: str(p.relative_to(_CC)))
def test_includes_only_earlier_layers(path):
  layer = path.relative_to(_CC).parts[0]
  for include in _includes(path):
    assert not include.startswith(('python/', 'tf_ops/')), include
    if not include.startswith('cc/'):
      continue
    other = include.split('/')[1]
    assert other in _RANK, f'{include}: not a layer'
    assert other == layer or _RANK[other] < _RANK[layer], (
        f'{path.relative_to(_ROOT)} ({layer}) includes {include} ({other})')


@pytest.mark.parametrize('path', [p for p in _sources()
                                  if _RANK[p.relative_to(_CC).parts[0]]
                                  < _RANK['wire']],
                         ids=lambda p: str(p.relative_to(_CC)))
def test_no_grpc_below_wire(path):
  grpc = [i for i in _includes(path) if _GRPC.match(i)]
  assert not grpc, f'{path.relative_to(_ROOT)} includes {grpc}'
