"""Differential scenarios: reverb.Server, reverb.Table (and its queue and
stack presets), reverb.rate_limiters and reverb.selectors: bad arguments,
reprs and table infos.

pybind's "incompatible arguments" TypeErrors are compared by class only
(their texts print the bindings' internal signatures). Rate limiter
settings that abort dm-reverb's process run in a child interpreter.
"""

import socket
import subprocess
import sys
import time

import scenario_util as util


def _in_child(statement):
  """Runs `import reverb; <statement>` in a new interpreter of this package;
  how it ended (dm-reverb aborts on some arguments)."""
  command = [sys.executable] + (['-I'] if sys.flags.isolated else []) + [
      '-c', f'import reverb\ntry:\n  {statement}\nexcept Exception as e:\n'
      '  print(type(e).__name__, e)\n']
  proc = subprocess.run(command, capture_output=True, text=True, timeout=120,
                        check=False)
  return {'exit_code': proc.returncode,
          'printed': proc.stdout.strip().splitlines()[-1:]}


def _limiter(limiter):
  # pylint: disable=protected-access
  return {'repr': repr(limiter),
          'settings': [limiter._samples_per_insert, limiter._min_size_to_sample,
                       limiter._min_diff, limiter._max_diff]}


def _info(info):
  return {'name': info.name, 'sampler': str(info.sampler_options),
          'remover': str(info.remover_options), 'max_size': info.max_size,
          'max_times_sampled': info.max_times_sampled,
          'rate_limiter': str(info.rate_limiter_info),
          'signature': info.signature, 'current_size': info.current_size}


# reverb.Server.


def scenario_server_without_tables(reverb, env):
  del env
  reverb.Server([])


def scenario_server_with_tables_none(reverb, env):
  del env
  reverb.Server()


def scenario_server_with_duplicate_table_names(reverb, env):
  del env
  reverb.Server([util.table(reverb, n) for n in ('b', 'a', 'b', 'c', 'a', 'b')])


def scenario_server_with_negative_port(reverb, env):
  del env
  reverb.Server([util.table(reverb)], port=-1)


def scenario_server_with_port_above_65535(reverb, env):
  del env
  server = reverb.Server([util.table(reverb)], port=70000)
  port = server.port
  server.stop()
  return port


def scenario_server_with_port_in_use(reverb, env):
  del env
  with socket.socket(socket.AF_INET6) as sock:
    sock.bind(('::', 0))
    sock.listen()
    reverb.Server([util.table(reverb)], port=sock.getsockname()[1])


def scenario_server_with_port_of_other_server(reverb, env):
  address = env.server([util.table(reverb)])
  reverb.Server([util.table(reverb)], port=int(address.split(':')[1]))


def scenario_server_with_string_port(reverb, env):
  del env
  return util.type_error(lambda: reverb.Server([util.table(reverb)], port='x'))


def scenario_server_with_port_zero(reverb, env):
  del env
  server = reverb.Server([util.table(reverb)], port=0)
  port = server.port
  server.stop()
  return port > 0


def scenario_server_with_a_non_table(reverb, env):
  del env
  reverb.Server([object()])


def scenario_server_with_a_table_not_in_a_list(reverb, env):
  del env
  reverb.Server(util.table(reverb))


def scenario_server_stopped_twice(reverb, env):
  del env
  server = reverb.Server([util.table(reverb)])
  return [server.stop(), server.stop()]


def scenario_server_localhost_client(reverb, env):
  del env
  server = reverb.Server([util.table(reverb)])
  client = server.localhost_client()
  result = {'address': client.server_address == f'localhost:{server.port}',
            'tables': sorted(client.server_info())}
  server.stop()
  return result


# reverb.Table.


def scenario_table_with_zero_max_size(reverb, env):
  del env
  util.table(reverb, max_size=0)


def scenario_table_with_negative_max_size(reverb, env):
  del env
  util.table(reverb, max_size=-5)


def scenario_table_with_float_max_size(reverb, env):
  del env
  return util.type_error(lambda: util.table(reverb, max_size=2.5))


def scenario_table_with_empty_name(reverb, env):
  del env
  util.table(reverb, '')


def scenario_table_with_negative_max_times_sampled(reverb, env):
  del env
  return _info(util.table(reverb, max_times_sampled=-3).info)


def scenario_table_with_a_non_selector(reverb, env):
  del env
  return util.type_error(lambda: util.table(reverb, sampler='uniform'))


def scenario_table_repr_and_info(reverb, env):
  del env
  table = util.table(reverb, 'p', sampler=reverb.selectors.Prioritized(0.5),
                     remover=reverb.selectors.MaxHeap(), max_times_sampled=2,
                     rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
                         3.0, 5, 10.0))
  return {'repr': repr(table), 'name': table.name, 'info': _info(table.info)}


def scenario_table_can_sample_and_insert(reverb, env):
  del env
  table = util.table(reverb, rate_limiter=reverb.rate_limiters.MinSize(2))
  queue = reverb.Table.queue('q', 2)
  return [table.can_sample(1), table.can_insert(1), queue.can_sample(1),
          queue.can_insert(3)]


def scenario_table_replace(reverb, env):
  del env
  table = util.table(reverb, sampler=reverb.selectors.Prioritized(0.5),
                     max_times_sampled=2)
  replaced = table.replace(name='r', max_size=7)
  defaults = table.replace()
  return {'replaced': _info(replaced.info), 'defaults': _info(defaults.info),
          'repr': repr(replaced)}


def scenario_table_queue(reverb, env):
  del env
  table = reverb.Table.queue('q', 5)
  return {'repr': repr(table), 'info': _info(table.info)}


def scenario_table_stack(reverb, env):
  del env
  table = reverb.Table.stack('s', 5)
  return {'repr': repr(table), 'info': _info(table.info)}


def scenario_table_queue_of_size_zero(reverb, env):
  del env
  reverb.Table.queue('q', 0)


def scenario_table_queue_of_negative_size(reverb, env):
  del env
  reverb.Table.queue('q', -1)


def scenario_table_stack_of_size_zero(reverb, env):
  del env
  reverb.Table.stack('s', 0)


def scenario_table_queue_with_empty_name(reverb, env):
  del env
  reverb.Table.queue('', 5)


# reverb.rate_limiters.


def scenario_min_size_zero(reverb, env):
  del env
  reverb.rate_limiters.MinSize(0)


def scenario_min_size_negative(reverb, env):
  del env
  reverb.rate_limiters.MinSize(-1)


def scenario_min_size_float(reverb, env):
  del env
  return util.type_error(lambda: reverb.rate_limiters.MinSize(2.5))


def scenario_min_size(reverb, env):
  del env
  return _limiter(reverb.rate_limiters.MinSize(3))


def scenario_sample_to_insert_ratio(reverb, env):
  del env
  return [_limiter(reverb.rate_limiters.SampleToInsertRatio(*args)) for args in
          ((2, 10, 5), (1.5, 4, (-3.0, 9.0)), (1, 10, [0, 30]),
           (1, 100, (-10.0, 10.0)))]


def scenario_sample_to_insert_ratio_zero_ratio(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(0, 1, 10)


def scenario_sample_to_insert_ratio_negative_ratio(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(-1, 1, 10)


def scenario_sample_to_insert_ratio_small_buffer(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, 1, 0.5)


def scenario_sample_to_insert_ratio_buffer_below_ratio(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(4, 1, 3.9)


def scenario_sample_to_insert_ratio_zero_min_size(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, 0, 10)


def scenario_sample_to_insert_ratio_negative_min_size(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, -1, 10)


def scenario_sample_to_insert_ratio_range_above_min_size(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, 10, (20, 30))


def scenario_sample_to_insert_ratio_reversed_range(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, 10, (5, 1))


def scenario_sample_to_insert_ratio_three_numbers(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, 10, (1, 2, 3))


def scenario_sample_to_insert_ratio_string_buffer(reverb, env):
  del env
  reverb.rate_limiters.SampleToInsertRatio(1, 10, 'x')


def scenario_queue_and_stack(reverb, env):
  del env
  return [_limiter(reverb.rate_limiters.Queue(5)),
          _limiter(reverb.rate_limiters.Stack(5)),
          _limiter(reverb.rate_limiters.Queue(0)),
          _limiter(reverb.rate_limiters.Stack(0))]


def scenario_queue_of_negative_size(reverb, env):
  del env
  return _limiter(reverb.rate_limiters.Queue(-1))


def scenario_rate_limiter(reverb, env):
  del env
  return _limiter(reverb.rate_limiters.RateLimiter(1.5, 2, -3, 4))


def scenario_rate_limiter_with_reversed_range(reverb, env):
  del env
  return _limiter(reverb.rate_limiters.RateLimiter(1, 1, 5, 1))


def scenario_rate_limiter_with_zero_ratio(reverb, env):
  del env
  return _in_child('reverb.rate_limiters.RateLimiter(0, 1, 0, 1)')


def scenario_rate_limiter_with_zero_min_size(reverb, env):
  del env
  return _in_child('reverb.rate_limiters.RateLimiter(1, 0, 0, 1)')


# reverb.selectors.


def scenario_selectors_repr(reverb, env):
  del env
  selectors = reverb.selectors
  return [repr(s) for s in (selectors.Uniform(), selectors.Fifo(),
                            selectors.Lifo(), selectors.MinHeap(),
                            selectors.MaxHeap(), selectors.Prioritized(0.8),
                            selectors.Prioritized(-1), selectors.Prioritized(0),
                            selectors.Prioritized(float('nan')))]


def scenario_prioritized_with_string_exponent(reverb, env):
  del env
  return util.type_error(lambda: reverb.selectors.Prioritized('x'))


def scenario_prioritized_without_exponent(reverb, env):
  del env
  return util.type_error(reverb.selectors.Prioritized)


def scenario_uniform_with_an_argument(reverb, env):
  del env
  return util.type_error(lambda: reverb.selectors.Uniform(1))


def scenario_heap_with_an_argument(reverb, env):
  del env
  return util.type_error(lambda: reverb.selectors.MinHeap(1))


def scenario_table_object_follows_the_served_table(reverb, env):
  table = util.table(reverb, rate_limiter=reverb.rate_limiters.MinSize(2))
  client = reverb.Client(env.server([table]))
  states = []
  for size in (1, 2):
    client.insert([1], priorities={'t': 1.0})
    # dm-reverb confirms an insert before its table worker has applied it.
    deadline = time.monotonic() + 10
    while table.info.current_size != size and time.monotonic() < deadline:
      time.sleep(0.01)
    states.append([table.info.current_size, table.can_sample(1),
                   table.can_sample(3), table.can_insert(5)])
  list(client.sample('t', 2))
  states.append(table.info.rate_limiter_info.sample_stats.completed)
  return states


def scenario_server_with_a_given_port(reverb, env):
  del env
  with socket.socket() as sock:
    sock.bind(('localhost', 0))
    port = sock.getsockname()[1]
  server = reverb.Server([util.table(reverb)], port=port)
  result = [server.port == port,
            sorted(server.localhost_client().server_info())]
  server.stop()
  return result


def scenario_table_replace_with_zero_max_size(reverb, env):
  del env
  util.table(reverb).replace(max_size=0)


def scenario_table_replace_with_empty_name(reverb, env):
  del env
  util.table(reverb).replace(name='')


def scenario_table_replace_settings(reverb, env):
  del env
  table = util.table(reverb, max_times_sampled=3)
  return [repr(table.replace(max_times_sampled=0)),
          repr(table.replace(rate_limiter=reverb.rate_limiters.Queue(3),
                             sampler=reverb.selectors.Lifo())),
          repr(reverb.Table.queue('q', 2).replace(name='r'))]


def scenario_table_with_empty_signatures(reverb, env):
  del env
  return [repr(util.table(reverb, signature=empty).info.signature)
          for empty in ({}, [], ())]
