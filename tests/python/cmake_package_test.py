"""reverb.get_cmake_dir(): the CMake package a wheel ships, and the C++
example (examples/cpp) built on it alone."""

import importlib.metadata
import os
import pathlib
import shutil
import subprocess

import pytest

import reverb

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / 'examples' / 'cpp'
PACKAGE = pathlib.Path(reverb.__file__).resolve().parent


def _installed_from_wheel():
  """Whether the imported reverb is the one pip installed (a package staged
  from a build tree has no CMake package)."""
  try:
    init = importlib.metadata.distribution('reverb').locate_file(
        'reverb/__init__.py')
  except importlib.metadata.PackageNotFoundError:
    return False
  return pathlib.Path(init).resolve() == PACKAGE / '__init__.py'


pytestmark = pytest.mark.skipif(
    not _installed_from_wheel(),
    reason=f'reverb is imported from {PACKAGE}, which pip did not install '
    'from a wheel: it has no CMake package')


def test_cmake_dir_holds_the_package_and_headers():
  cmake_dir = pathlib.Path(reverb.get_cmake_dir())
  assert cmake_dir == PACKAGE / 'lib' / 'cmake' / 'reverb'
  for name in ('reverbConfig.cmake', 'reverbConfigVersion.cmake',
               'reverbTargets.cmake'):
    assert (cmake_dir / name).is_file(), name
  # project(reverb VERSION ...) in CMakeLists.txt is pyproject.toml's.
  assert (f'set(PACKAGE_VERSION "{importlib.metadata.version("reverb")}")' in
          (cmake_dir / 'reverbConfigVersion.cmake').read_text())
  include = PACKAGE / 'include'
  assert (include / 'reverb' / 'cc' / 'client' / 'client.h').is_file()
  assert (include / 'reverb' / 'cc' / 'schema.pb.h').is_file()
  assert (include / 'reverb' / 'tensorflow' / 'core' / 'framework' /
          'types.pb.h').is_file()


def test_example_builds_on_the_package_alone_and_runs(tmp_path):
  cmake = shutil.which('cmake')
  if not cmake or not any(map(shutil.which, ('c++', 'g++', 'clang++'))):
    pytest.skip('building examples/cpp needs cmake and a C++ compiler on PATH')
  configure = [cmake, '-S', str(EXAMPLE), '-B', str(tmp_path),
               f'-Dreverb_DIR={reverb.get_cmake_dir()}']
  if shutil.which('ninja'):
    configure += ['-G', 'Ninja']
  if shutil.which('ccache'):  # Rebuilds hit the cache (paths are relative
    # to the build directory).
    configure.append(f'-DCMAKE_CXX_COMPILER_LAUNCHER={shutil.which("ccache")}')
  env = dict(os.environ, CCACHE_BASEDIR=str(tmp_path))
  for command in (configure, [cmake, '--build', str(tmp_path)]):
    result = subprocess.run(command, capture_output=True, text=True, env=env,
                            timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  result = subprocess.run([str(tmp_path / 'replay_roundtrip')],
                          capture_output=True, text=True, timeout=120,
                          check=False)
  assert result.returncode == 0, result.stderr
  assert '16 samples checked' in result.stdout
