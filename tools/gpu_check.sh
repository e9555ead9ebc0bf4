#!/bin/sh
# gpu_check.sh — the GPU checks, for a machine with an NVIDIA GPU and a
# checkout whose build/ was made elsewhere (carried along). LD_LIBRARY_PATH
# must reach the CUDA libraries the backend links (cuBLAS, cuDNN, cuRAND,
# NVRTC, NCCL) when they are not where the build machine had them.
#   tools/gpu_check.sh                 the GPU specs (spec/gpu_*_spec.lua) and spec/cuda_spec.lua with busted
#   tools/gpu_check.sh specs FILE...   those spec files instead
#   tools/gpu_check.sh smoke [FILE.c]  compiles a C smoke test (spec/gpu_smoke.c) against build/ and runs it
# BUILD names another build folder; BUSTED_ARGS go to busted (e.g. -o TAP). On a lent
# machine without LuaJIT and busted, tools/device_kit.sh packs them (and sets BUILD).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
lib="$PWD/$BUILD/libmoonflow.so"
[ -f "$lib" ] || { echo "gpu_check: no $lib: build first (make lib)" >&2; exit 2; }
[ -f "$BUILD/libmoonflow_cuda.so" ] || echo "gpu_check: no $BUILD/libmoonflow_cuda.so: every GPU case will be pending" >&2
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
mode=${1:-specs}
[ $# -gt 0 ] && shift
case "$mode" in
  specs)
    [ $# -gt 0 ] || set -- spec/cuda_spec.lua spec/gpu_*_spec.lua
    # shellcheck disable=SC2086
    LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" MOONFLOW_LIB="$lib" busted ${BUSTED_ARGS:-} "$@"
    ;;
  smoke)
    [ $# -le 1 ] || { echo "usage: tools/gpu_check.sh smoke [FILE.c]" >&2; exit 2; }
    out="$BUILD/gpu_smoke"
    ${CC:-cc} -std=c11 -O1 -g -Isrc/include "${1:-spec/gpu_smoke.c}" -L"$BUILD" -Wl,-rpath,"$PWD/$BUILD" -lmoonflow \
      -o "$out"
    "$out"
    ;;
  *) echo "gpu_check: unknown mode '$mode' (specs, smoke)" >&2; exit 2 ;;
esac
