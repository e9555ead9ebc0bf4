# moonflow — build, test, bench, install.
#   make            shared + static library and the generated FFI declarations
#   make test       the busted suite against build/
#   make asan       the library with AddressSanitizer + UBSan, in build-asan/
#   make test-asan  the suite against build-asan/
#   make test-threads  the asynchronous-run API and concurrent runs of one session under ThreadSanitizer
#   make valgrind   a subset of the suite under valgrind: no byte definitely lost
#   make fuzz       libFuzzer on the readers (fuzz/README.md), FUZZ_SECONDS each
#   make bench      benchmarks with peer comparisons (docs/bench.md, docs/bench.svg)
#   make bench-peers  a virtualenv with NumPy, PyTorch and TensorFlow for the bench
#   make proto      regenerates src/proto/*.pb-c.* from the .proto files
#   make demo       runs examples/demo.lua
#   make install    Lua modules + library into LUADIR/moonflow, header,
#                   libraries and moonflow.pc into PREFIX/include and PREFIX/lib,
#                   the moonflow command (the REPL) into PREFIX/bin
#   make install-lua  only the Lua modules + library + API reference (what LuaRocks runs)
#   make install-c  only the header, libraries and moonflow.pc
CC ?= cc
CFLAGS ?= -O2 -g
# Warnings are errors in this project's builds; WERROR= builds users' copies
# (LuaRocks) without, so a newer compiler's new warning does not stop them.
WERROR ?= -Werror
WARN := -std=c11 -Wall -Wextra $(WERROR)
# sqrt and friends never set errno here, so their loops can vectorize; gcc's
# -O2 vectorizes only loops that need no remainder loop unless told its
# dynamic cost model (clang vectorizes them at -O2 and lacks the flag).
# Floating-point exceptions are never trapped, so gcc may compute both sides
# of a select (src/kernels/vecmath.h's loops vectorize only then); no result
# changes.
MATH := -fno-math-errno -fno-trapping-math $(shell $(CC) -fvect-cost-model=dynamic -E -x c /dev/null >/dev/null 2>&1 && echo -fvect-cost-model=dynamic)
PREFIX ?= /usr/local
LUADIR ?= $(PREFIX)/share/lua/5.1
# Where install-lua puts the library the Lua modules load: beside them by
# default; LuaRocks puts it in its tree for C code (rockspec/).
LUA_LIBDIR ?= $(LUADIR)
INCLUDEDIR ?= $(PREFIX)/include
LIBDIR ?= $(PREFIX)/lib
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DEB_PACKAGES := luajit libluajit-5.1-dev libopenblas-dev libfftw3-dev libjansson-dev zlib1g-dev libprotobuf-c-dev libpng-dev libjpeg62-turbo-dev lua-busted
DEB_TEST_PACKAGES := python3-sklearn pkg-config tmux

# The version is the header's MF_VERSION; the shared library's soname carries
# its major number (libmoonflow.so.0), which changes when the ABI does.
VERSION := $(shell sed -n 's/^\#define MF_VERSION "\(.*\)"$$/\1/p' src/include/moonflow.h)
SOVERSION := $(firstword $(subst ., ,$(VERSION)))
SONAME := libmoonflow.so.$(SOVERSION)

# One folder per layer (src/README.md); object files mirror the folders.
# src/mpi/ is no layer of the core: it builds libmoonflow_mpi.so apart.
SRC := $(filter-out src/mpi/%,$(wildcard src/*/*.c src/*/*/*.c))
HDR := $(wildcard src/*/*.h src/*/*/*.h)
INCLUDES := -Isrc -Isrc/include
BUILD ?= build
OBJ := $(SRC:src/%.c=$(BUILD)/%.o)
LIBS := -ljansson -lopenblas -lfftw3 -lfftw3f -lprotobuf-c -lpng -ljpeg -lz -lm -lpthread
CDEF := lua/moonflow/cdef.lua lua/moonflow/mpi_cdef.lua
# The MPI library (src/mpi/README.md), built where Open MPI's mpicc is found.
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
MPI_OBJ := $(patsubst src/%.c,$(BUILD)/%.o,$(wildcard src/mpi/*.c))
MPI_LIB := $(if $(MPI_LIBS),$(BUILD)/libmoonflow_mpi.so)
# The CUDA backend (src/cuda/README.md), built where nvcc is found: CUDA_HOME's,
# else the one on PATH. CUDA_ARCHS picks the GPUs it has code for.
NVCC := $(or $(wildcard $(CUDA_HOME)/bin/nvcc),$(shell command -v nvcc 2>/dev/null))
CUDA_DIR := $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)))
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
CUDA_SRC := $(wildcard src/cuda/*.cu)
CUDA_HDR := $(wildcard src/cuda/*.cuh src/device/cuda/*.h) src/kernels/philox.h
CUDA_OBJ := $(CUDA_SRC:src/%.cu=$(BUILD)/%.o)
CUDA_LIB := $(if $(NVCC),$(BUILD)/libmoonflow_cuda.so)
# nvcc's own programs crash with the sanitizer runtimes preloaded (make
# test-asan's specs build through make install-c), so they run without.
NVCC_RUN := env -u LD_PRELOAD $(NVCC)
LUA_ENV := LUA_PATH="lua/?.lua;lua/?/init.lua;;" MOONFLOW_LIB=$(CURDIR)/$(BUILD)/libmoonflow.so

.PHONY: all lib proto deps test-deps test asan test-asan test-threads valgrind fuzz bench bench-peers tensorboard-venv demo install install-lua install-c install-bin clean
all: deps lib
# The build without the Debian package step (LuaRocks builds this on any system).
lib: $(BUILD)/libmoonflow.so $(BUILD)/libmoonflow.a $(CDEF) $(MPI_LIB) $(CUDA_LIB)
ifeq ($(NVCC),)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
$(info nvcc not found: the CUDA backend is skipped)
endif
endif

# Installs the missing Debian packages of $(1) when root; otherwise says what
# to run, then runs $(2) (exit 1 where they are required).
define install_debs
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing packages; run: sudo apt-get install -y$$missing"; $(2); \
	  fi; \
	fi
endef
deps:
	$(call install_debs,$(DEB_PACKAGES),exit 1)
# The digits spec trains on the data python3-sklearn ships, the C host of
# names_spec is built with pkg-config, and the REPL spec drives the REPL on a
# terminal through tmux; without them, those specs are skipped.
test-deps: | deps
	$(call install_debs,$(DEB_TEST_PACKAGES),true)

$(BUILD)/%.o: src/%.c $(HDR)
	@mkdir -p $(@D)
	$(CC) $(WARN) $(MATH) $(CFLAGS) -fPIC -fvisibility=hidden $(INCLUDES) -c $< -o $@

# protoc-c initializes a oneof whose first member is a struct (AttrValue's
# bytes) with {0}, which -Wmissing-braces flags in code we do not write.
$(BUILD)/proto/%.o: WARN += -Wno-missing-braces

# Only what moonflow.h declares (MF_API) is exported; the rest is hidden.
$(BUILD)/libmoonflow.so.$(VERSION): $(OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -o $@ $(OBJ) $(LIBS) $(LDFLAGS)
$(BUILD)/libmoonflow.so: $(BUILD)/libmoonflow.so.$(VERSION)
	ln -sf libmoonflow.so.$(VERSION) $(BUILD)/$(SONAME) && ln -sf libmoonflow.so.$(VERSION) $@

# The MPI library links the shared core (by its soname, found beside it) and
# Open MPI; --no-undefined catches a call into the core's hidden internals.
$(BUILD)/mpi/%.o: INCLUDES += $(MPI_CFLAGS)
$(BUILD)/libmoonflow_mpi.so: $(MPI_OBJ) $(BUILD)/libmoonflow.so
	$(CC) $(CFLAGS) -shared -Wl,--no-undefined -Wl,-rpath,'$$ORIGIN' -o $@ $(MPI_OBJ) \
	  $(BUILD)/$(SONAME) $(MPI_LIBS) -lpthread $(LDFLAGS)

# The CUDA backend links no part of the core (it knows none of its structs):
# the core dlopens it (src/device/cuda.c) and checks its version. cudart is
# static; the CUDA libraries are found through LD_LIBRARY_PATH or the rpath to
# this machine's CUDA_DIR. Only the libraries its code calls are linked: one
# missing where it runs makes the load fail and the GPUs disappear. Warnings
# are errors, as for the core.
NVCCFLAGS ?= -O2 -g
$(BUILD)/cuda/%.o: src/cuda/%.cu $(CUDA_HDR)
	@mkdir -p $(@D)
	$(NVCC_RUN) $(CUDA_ARCHS) $(NVCCFLAGS) -std=c++17 -Werror all-warnings -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra \
	  -DMF_BACKEND_VERSION='"$(VERSION)"' $(INCLUDES) -c $< -o $@
$(BUILD)/libmoonflow_cuda.so: $(CUDA_OBJ)
	$(NVCC_RUN) $(CUDA_ARCHS) -shared -cudart static -Xlinker --no-undefined -Xlinker -rpath,$(CUDA_DIR)/lib64 \
	  -o $@ $(CUDA_OBJ) -L$(CUDA_DIR)/lib64 -lcublas -lcudnn -lpthread

$(BUILD)/libmoonflow.a: $(OBJ)
	rm -f $@ && ar rcs $@ $(OBJ)

# The protobuf-c code of src/proto/ is committed (src/proto/README.md); this
# regenerates it from the .proto files with protobuf-c-compiler.
proto:
	protoc-c --c_out=src/proto -Isrc/proto feature.proto example.proto types.proto tensor_shape.proto \
	  tensor.proto attr_value.proto node_def.proto versions.proto graph.proto summary.proto event.proto

lua/moonflow/cdef.lua: src/include/moonflow.h tools/gencdef.sh
	sh tools/gencdef.sh src/include/moonflow.h > $@
lua/moonflow/mpi_cdef.lua: src/mpi/moonflow_mpi.h tools/gencdef.sh
	sh tools/gencdef.sh src/mpi/moonflow_mpi.h > $@

test: all test-deps
	$(LUA_ENV) busted $(BUSTED_ARGS) spec

# UBSan's `undefined` checks signed overflow, shifts, division, bounds and
# pointer arithmetic; float-cast-overflow (a float that does not fit the
# integer it is converted to, which gcc leaves out of `undefined`) is added.
# clang's unsigned-integer-overflow is not: unsigned arithmetic wraps by
# definition, and the hashes, random generators and integer kernels wrap on
# purpose.
SANITIZERS := address,undefined,float-cast-overflow
ASAN_FLAGS := -O1 -g -fsanitize=$(SANITIZERS) -fno-omit-frame-pointer \
  -fno-sanitize-recover=undefined,float-cast-overflow
asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" LDFLAGS="-fsanitize=$(SANITIZERS)" \
	  build-asan/libmoonflow.so build-asan/libmoonflow.a $(CDEF)

# LuaJIT itself is not instrumented, so the sanitizer runtimes are preloaded
# (ASan must be the first library loaded). Leak checks are off: the interpreter
# keeps allocations alive until exit by design. Any report aborts the run, so
# busted then prints no summary and exits non-zero. MOONFLOW_LINK_FLAGS: C
# hosts that specs link against the instrumented archive need the runtimes.
ASAN_RUNTIME = $$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)
test-asan: deps asan
	$(LUA_ENV) MOONFLOW_LIB=$(CURDIR)/build-asan/libmoonflow.so LD_PRELOAD="$(ASAN_RUNTIME)" \
	  MOONFLOW_LINK_FLAGS="-fsanitize=$(SANITIZERS)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 MOONFLOW_CUDA=0 \
	  busted $(BUSTED_ARGS) spec

# The asynchronous-run API checked from C under ThreadSanitizer (LuaJIT
# cannot be instrumented, so this check drives the C API directly).
# OpenBLAS is pinned to one thread here: the Debian library is not
# instrumented, so TSan cannot see the hand-off between its caller and its own
# worker threads and reports a false race on the GEMM output (it appears or not
# depending on how many cores the machine has). moonflow's own threads are all
# instrumented, so races in moonflow's code stay visible; no suppressions.
TSAN_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1
THREAD_CHECKS := async_check threads_check fuse_check kernels_threads_check
test-threads: deps
	mkdir -p build-tsan
	for c in $(THREAD_CHECKS); do \
	  $(CC) -std=c11 $(MATH) -O1 -g -fsanitize=thread $(INCLUDES) spec/$$c.c $(SRC) $(LIBS) -o build-tsan/$$c || exit 1; \
	  $(TSAN_ENV) build-tsan/$$c || exit 1; \
	done

# Leaks under valgrind, over specs that together reach every module (the
# whole suite takes 20 minutes there; these, about 3). busted runs in LuaJIT
# directly, so valgrind watches the process that loads the library; LuaJIT's
# own memory is still reachable at exit, so any block definitely lost is
# moonflow's and fails the run.
VALGRIND_SPECS := $(addprefix spec/,args_spec.lua core_spec.lua array_spec.lua math_spec.lua index_spec.lua \
  nn_spec.lua nn_stable_spec.lua activation_spec.lua control_flow_spec.lua tensor_array_spec.lua \
  gradients_spec.lua grad_index_spec.lua train_spec.lua scopes_spec.lua saver_spec.lua graph_io_spec.lua \
  npy_spec.lua data_spec.lua prefetch_spec.lua layers_spec.lua debugging_spec.lua lua_func_spec.lua \
  hygiene_spec.lua device_spec.lua registry_spec.lua cookbook_spec.lua ordering_spec.lua bad_input_spec.lua \
  linalg_spec.lua eager_spec.lua printing_spec.lua image_codec_spec.lua)
valgrind: all
	$(call install_debs,valgrind,exit 1)
	$(LUA_ENV) MOONFLOW_CUDA=0 valgrind --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
	  --error-exitcode=1 --keep-debuginfo=yes -q luajit $$(command -v busted) --ignore-lua $(VALGRIND_SPECS)

# Fuzzing (fuzz/README.md): the engine built by clang with ASan, UBSan and
# libFuzzer's coverage in build-fuzz/, the harness embedding LuaJIT, and each
# target run for FUZZ_SECONDS from its seeds in fuzz/corpus/<target> (new
# inputs go to build-fuzz/corpus/<target>, findings to build-fuzz/<target>-*);
# then the C readers' targets of fuzz/readers.c, through the C API with no
# Lua, from the same seeds (build-fuzz/corpus/c-<target>, build-fuzz/c-<target>-*).
# Leaks are valgrind's to find: LeakSanitizer cannot see the pointers LuaJIT
# keeps in its own memory, so it would take garbage not yet collected for one.
FUZZ_TARGETS := checkpoint graph npy csv feeds tfrecord example sequence_example decode_png decode_jpeg graphdef summary
FUZZ_C_TARGETS := checkpoint graph tfrecord example sequence_example
FUZZ_SECONDS ?= 30
FUZZ_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
fuzz: deps
	$(call install_debs,clang,exit 1)
	$(MAKE) CC=clang BUILD=build-fuzz CFLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link" \
	  LDFLAGS="-fsanitize=address,undefined" build-fuzz/libmoonflow.so $(CDEF)
	clang $(WARN) $(FUZZ_FLAGS) -fsanitize=fuzzer $$(pkg-config --cflags luajit) fuzz/fuzz.c \
	  $$(pkg-config --libs luajit) -o build-fuzz/fuzz
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t && \
	  $(LUA_ENV) MOONFLOW_LIB=$(CURDIR)/build-fuzz/libmoonflow.so MOONFLOW_FUZZ_TARGET=$$t ASAN_OPTIONS=detect_leaks=0 \
	    build-fuzz/fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -artifact_prefix=build-fuzz/$$t- \
	    build-fuzz/corpus/$$t fuzz/corpus/$$t || exit 1; \
	done
	clang $(WARN) $(FUZZ_FLAGS) -fsanitize=fuzzer -Isrc/include fuzz/readers.c \
	  -Lbuild-fuzz -Wl,-rpath,$(CURDIR)/build-fuzz -lmoonflow -o build-fuzz/fuzz_c
	for t in $(FUZZ_C_TARGETS); do \
	  mkdir -p build-fuzz/corpus/c-$$t && \
	  MOONFLOW_FUZZ_TARGET=$$t ASAN_OPTIONS=detect_leaks=1 \
	    build-fuzz/fuzz_c -max_total_time=$(FUZZ_SECONDS) -timeout=10 -artifact_prefix=build-fuzz/c-$$t- \
	    build-fuzz/corpus/c-$$t fuzz/corpus/$$t || exit 1; \
	done

# The C peers are compiled by bench/harness.lua with the library's CC and
# CFLAGS. The Python peers (NumPy, PyTorch, TensorFlow 1.x graph mode) run in
# the virtualenv `make bench-peers` makes, else in Debian's python3 with what
# it has; BENCH_QUICK=1 is a short smoke run that reports into $(BUILD)/, and
# ONLY=<Lua patterns, comma-separated> runs only the sections whose name one
# of them matches (also into $(BUILD)/), e.g. make bench ONLY=tf.data,fusion.
BENCH_VENV ?= $(HOME)/.cache/moonflow/bench-venv
BENCH_PYTHON ?= $(firstword $(wildcard $(BENCH_VENV)/bin/python3 /usr/bin/python3) python3)
bench: all
	$(LUA_ENV) BENCH_BUILD=$(BUILD) BENCH_PYTHON="$(BENCH_PYTHON)" BENCH_ONLY="$(ONLY)" CC="$(CC)" CFLAGS="$(CFLAGS)" luajit bench/run.lua

# The peers' virtualenv, outside the tree (it is several GB: PyPI's torch
# wheel brings its CUDA libraries along) and shared by every checkout.
BENCH_PEER_PACKAGES := numpy torch tensorflow-cpu
bench-peers:
	$(call install_debs,python3-venv,exit 1)
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --upgrade $(BENCH_PEER_PACKAGES)

# TensorBoard from PyPI in a virtualenv outside the tree, for the check of
# spec/summary_spec.lua that loads moonflow's event files with TensorBoard's
# own reader (tools/tensorboard_check.py); .ci/run makes it.
TENSORBOARD_VENV ?= $(HOME)/.cache/moonflow/tensorboard-venv
tensorboard-venv:
	$(call install_debs,python3-venv,exit 1)
	python3 -m venv $(TENSORBOARD_VENV)
	$(TENSORBOARD_VENV)/bin/pip install --quiet --upgrade tensorboard

demo: all
	$(LUA_ENV) luajit examples/demo.lua

install: install-lua install-c install-bin

# Lua modules (with the generated cdef.lua), the library they load as
# LUA_LIBDIR/moonflow/libmoonflow.so (lua/moonflow/core.lua finds it there),
# and the API reference in LUADIR/moonflow/doc/, which the REPL's help() reads.
install-lua: lib
	mkdir -p $(DESTDIR)$(LUADIR)/moonflow $(DESTDIR)$(LUA_LIBDIR)/moonflow
	cp lua/moonflow/*.lua $(DESTDIR)$(LUADIR)/moonflow/
	for d in lua/moonflow/*/; do [ -d "$$d" ] || continue; sub=$$(basename "$$d"); \
	  mkdir -p $(DESTDIR)$(LUADIR)/moonflow/$$sub && cp "$$d"*.lua $(DESTDIR)$(LUADIR)/moonflow/$$sub/ || exit 1; done
	cp $(BUILD)/libmoonflow.so.$(VERSION) $(DESTDIR)$(LUA_LIBDIR)/moonflow/libmoonflow.so
	$(if $(MPI_LIB),cp $(MPI_LIB) $(DESTDIR)$(LUA_LIBDIR)/moonflow/libmoonflow_mpi.so)
	$(if $(CUDA_LIB),cp $(CUDA_LIB) $(DESTDIR)$(LUA_LIBDIR)/moonflow/libmoonflow_cuda.so)
	mkdir -p $(DESTDIR)$(LUADIR)/moonflow/doc
	cp docs/api/*.md $(DESTDIR)$(LUADIR)/moonflow/doc/

# The moonflow command: the REPL and script runner (LuaRocks installs it from
# the rockspec's build.install.bin).
install-bin:
	mkdir -p $(DESTDIR)$(PREFIX)/bin
	cp bin/moonflow $(DESTDIR)$(PREFIX)/bin/moonflow
	chmod 755 $(DESTDIR)$(PREFIX)/bin/moonflow

# The C API for hosts without Lua: the header, the static library, the shared
# one under its full version with the soname and development links, and
# moonflow.pc (`pkg-config --cflags --libs moonflow`; --static for the archive).
install-c: lib
	mkdir -p $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR)
	cp src/include/moonflow.h $(DESTDIR)$(INCLUDEDIR)/moonflow.h
	cp $(BUILD)/libmoonflow.a $(BUILD)/libmoonflow.so.$(VERSION) $(CUDA_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libmoonflow.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmoonflow.so
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@LIBDIR@|$(LIBDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|; s|@LIBS@|$(LIBS)|' src/moonflow.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/moonflow.pc

clean:
	rm -rf build build-asan build-clang build-tsan build-fuzz $(CDEF)
