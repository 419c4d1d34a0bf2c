"""Item selectors: how a table picks items to sample or to remove.

- `Fifo()`: oldest inserted first.
- `Lifo()`: newest inserted first.
- `Uniform()`: every item equally likely.
- `Prioritized(priority_exponent)`: item i with probability
  p_i^e / sum_j p_j^e (zero priority means never, unless all are zero).
- `MinHeap()` / `MaxHeap()`: lowest / highest priority first; ties go to the
  least recently inserted or updated item.
"""

import functools

from reverb import pybind

Fifo = pybind.FifoSelector
Lifo = pybind.LifoSelector
Uniform = pybind.UniformSelector
Prioritized = pybind.PrioritizedSelector
MinHeap = functools.partial(pybind.HeapSelector, True)
MaxHeap = functools.partial(pybind.HeapSelector, False)
