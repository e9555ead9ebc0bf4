# moonflow — build, test, bench, install.
#   make            shared + static library and the generated FFI declarations
#   make test       the busted suite against build/
#   make asan       the library with AddressSanitizer + UBSan, in build-asan/
#   make test-asan  the suite against build-asan/
#   make bench      benchmarks with peer comparisons
#   make install    PREFIX=/usr/local (or LUADIR=... for LuaRocks)
CC ?= cc
CFLAGS ?= -O2 -g
WARN := -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter
PREFIX ?= /usr/local
LUADIR ?= $(PREFIX)/share/lua/5.1
DEB_PACKAGES := luajit libluajit-5.1-dev libopenblas-dev lua-busted

SRC := $(wildcard src/*.c)
HDR := $(wildcard src/*.h)
BUILD ?= build
OBJ := $(SRC:src/%.c=$(BUILD)/%.o)
LIBS := -lopenblas -lm -lpthread
CDEF := lua/moonflow/cdef.lua
LUA_ENV := LUA_PATH="lua/?.lua;lua/?/init.lua;;"

.PHONY: all deps test asan test-asan bench install clean
all: deps $(BUILD)/libmoonflow.so $(BUILD)/libmoonflow.a $(CDEF)

# Installs missing Debian packages when root; otherwise says what to run.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

$(BUILD)/%.o: src/%.c $(HDR) | $(BUILD)
	$(CC) $(WARN) $(CFLAGS) -fPIC -Isrc -c $< -o $@

$(BUILD):
	mkdir -p $@

$(BUILD)/libmoonflow.so: $(OBJ)
	$(CC) $(CFLAGS) -shared -o $@ $(OBJ) $(LIBS) $(LDFLAGS)

$(BUILD)/libmoonflow.a: $(OBJ)
	rm -f $@ && ar rcs $@ $(OBJ)

$(CDEF): src/moonflow.h tools/gencdef.sh
	sh tools/gencdef.sh src/moonflow.h > $@

test: all
	$(LUA_ENV) busted $(BUSTED_ARGS) spec

ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(ASAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
	  build-asan/libmoonflow.so $(CDEF)

# LuaJIT itself is not instrumented: preload the runtime, and skip leak checks
# (the interpreter keeps allocations alive until exit by design).
test-asan: deps asan
	$(LUA_ENV) MOONFLOW_LIB=build-asan/libmoonflow.so \
	  LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 busted $(BUSTED_ARGS) spec

bench: all
	$(LUA_ENV) luajit bench/run.lua

install: all
	mkdir -p $(DESTDIR)$(LUADIR)/moonflow
	cp lua/moonflow/*.lua $(DESTDIR)$(LUADIR)/moonflow/
	cp $(BUILD)/libmoonflow.so $(DESTDIR)$(LUADIR)/moonflow/libmoonflow.so
	mkdir -p $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib
	cp src/moonflow.h $(DESTDIR)$(PREFIX)/include/ 2>/dev/null || true
	cp $(BUILD)/libmoonflow.a $(DESTDIR)$(PREFIX)/lib/ 2>/dev/null || true

clean:
	rm -rf build build-asan $(CDEF)
