#!/bin/sh
# device_kit.sh — packs what a lent GPU machine lacks into .devkit/ (keep it
# out of git: `echo /.devkit/ >> .git/info/exclude`), for runs there that
# carry it with the checkout. The machine seen on 2026-11-27 (Ubuntu 24.04,
# glibc 2.39, CUDA 13.0 with nvcc, cuDNN and NCCL in /usr/lib/x86_64-linux-gnu,
# an NVIDIA H200) has no LuaJIT, busted, OpenBLAS, FFTW, jansson, protobuf-c,
# libpng or libjpeg: they go from this machine (Debian 12, glibc 2.36, whose
# binaries run on the newer glibc), with the core library built here
# (stripped) and the generated FFI declarations, which git ignores. The CUDA
# backend is built there, by its own nvcc and for its own GPU (a fat build for
# several GPUs would not fit the 64 MiB a run carries):
#   tools/device_kit.sh                  here, after `make lib`
#   . .devkit/env.sh                     there, from the checkout's root: paths, the backend built
#   tools/gpu_check.sh                   there: the GPU specs (BUILD=.devkit/build is set by env.sh)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
kit=.devkit
[ -f "$BUILD/libmoonflow.so" ] && [ -f lua/moonflow/cdef.lua ] || { echo "device_kit: run make lib first" >&2; exit 2; }
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/build" "$kit/share" "$kit/clib" "$kit/lua/moonflow"
cp "$(command -v luajit)" "$kit/bin/"
# The core's libraries but the C runtime's, which every Linux has.
ldd "$BUILD/libmoonflow.so" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so' | while read -r f; do cp -L "$f" "$kit/lib/"; done
so=$(readlink -f "$BUILD/libmoonflow.so")
cp "$so" "$kit/build/" && strip -g "$kit/build/$(basename "$so")"
ln -sf "$(basename "$so")" "$kit/build/libmoonflow.so"
ln -sf "$(basename "$so")" "$kit/build/$(readlink "$BUILD/libmoonflow.so" | sed 's/\.[0-9]*\.[0-9]*$//')"
cp lua/moonflow/cdef.lua "$kit/lua/moonflow/"
# busted and the Lua modules it loads, pure Lua but for lfs, system and term.
for m in busted busted.lua cliargs cliargs.lua luassert mediator.lua pl say system term dkjson.lua; do
  cp -rL "/usr/share/lua/5.1/$m" "$kit/share/"
done
for m in lfs.so system term; do cp -rL "/usr/lib/x86_64-linux-gnu/lua/5.1/$m" "$kit/clib/"; done
printf '%s\n' '#!/bin/sh' 'exec luajit "$(dirname "$0")/busted.lua" "$@"' > "$kit/bin/busted"
printf '%s\n' "require 'busted.runner'({ standalone = false })" > "$kit/bin/busted.lua"
chmod +x "$kit/bin/busted"
cat > "$kit/env.sh" <<'ENV'
# Sourced from the checkout's root on the GPU machine.
K=$PWD/.devkit
export PATH="$K/bin:$PATH" BUILD=.devkit/build
export LUA_PATH="$K/share/?.lua;$K/share/?/init.lua;$K/lua/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="$K/clib/?.so;;"
export LD_LIBRARY_PATH="$K/lib:$K/build:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export MOONFLOW_LIB=$K/build/libmoonflow.so CUDA_HOME=/usr/local/cuda
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
[ -f "$K/build/libmoonflow_cuda.so" ] ||
  make -s -j"$(nproc)" BUILD=.devkit/build CUDA_ARCHS="-gencode arch=compute_${arch:-90},code=sm_${arch:-90}" \
    .devkit/build/libmoonflow_cuda.so
ENV
du -sh "$kit"
