"""Differential scenarios: reverb.Client calls and the errors they raise."""

import numpy as np


def _table(reverb, name='t', **kwargs):
  options = dict(sampler=reverb.selectors.Uniform(),
                 remover=reverb.selectors.Fifo(), max_size=100,
                 rate_limiter=reverb.rate_limiters.MinSize(1))
  options.update(kwargs)
  return reverb.Table(name=name, **options)


def scenario_insert_then_sample(reverb, env):
  client = reverb.Client(env.server([_table(reverb)]))
  client.insert([np.int32(3), np.float32(1.5)], priorities={'t': 2.0})
  [sample] = list(client.sample('t', num_samples=1))
  return {'data': [s.data for s in sample],
          'priority': sample[0].info.priority,
          'probability': sample[0].info.probability,
          'table_size': sample[0].info.table_size}


def scenario_insert_into_unknown_table(reverb, env):
  client = reverb.Client(env.server([_table(reverb)]))
  client.insert([np.int32(3)], priorities={'missing': 1.0})
