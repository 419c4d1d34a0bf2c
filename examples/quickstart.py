"""The quickstart: a server with one table, an insert and two samples."""

import reverb


def main():
  server = reverb.Server(tables=[
      reverb.Table(
          name='my_table',
          sampler=reverb.selectors.Uniform(),
          remover=reverb.selectors.Fifo(),
          max_size=100,
          rate_limiter=reverb.rate_limiters.MinSize(1)),
  ])
  client = reverb.Client(f'localhost:{server.port}')
  client.insert([0, 1], priorities={'my_table': 1.0})
  samples = list(client.sample('my_table', num_samples=2))
  print(samples)
  server.stop()
  return samples


if __name__ == '__main__':
  main()
