#!/usr/bin/env bash
# Regenerates the seed corpora fuzz/corpus/<target>/ with fuzz_make_seeds
# (fuzz/make_seeds.cc), built by a build with REVERB_BUILD_TESTS=ON.
# Usage: fuzz/make_seeds.sh [build directory, default build/dev]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/dev}
cmake --build "$BUILD" --target fuzz_make_seeds
rm -rf fuzz/corpus
"$BUILD/fuzz/fuzz_make_seeds" fuzz/corpus
ls -R fuzz/corpus | head -50
