"""The CMake package of libreverb that a wheel ships, for C++ programs.

A wheel holds, inside the `reverb` package, libreverb.so, its headers
(`include/`) and `lib/cmake/reverb/reverbConfig.cmake`, whose paths are
relative to itself: `find_package(reverb CONFIG)` then defines the target
`reverb::reverb`. See examples/cpp/README.md.
"""

import os


def get_cmake_dir() -> str:
  """The directory holding reverbConfig.cmake, for CMake's `reverb_DIR`.

  As `pybind11.get_cmake_dir()`:
  `cmake -Dreverb_DIR=$(python -c 'import reverb; print(reverb.get_cmake_dir())')`.

  Returns:
    The absolute path of `lib/cmake/reverb` in this package.

  Raises:
    FileNotFoundError: if the package has no CMake package, as when it was
      staged from a build tree rather than installed from a wheel.
  """
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      'lib', 'cmake', 'reverb')
  if not os.path.isfile(os.path.join(path, 'reverbConfig.cmake')):
    raise FileNotFoundError(
        f'{path} holds no reverbConfig.cmake: this reverb package was not '
        'installed from a wheel')
  return path
