package = "moonflow"
-- The library's version (MF_VERSION in src/include/moonflow.h), then the rockspec's revision.
version = "0.1.0-1"
source = {
  -- `luarocks make` builds the checkout it is run in.
  url = ".",
}
description = {
  summary = "Symbolic tensor graphs for LuaJIT in the manner of TensorFlow 1.x",
  detailed = [[
moonflow is a C11 engine for symbolic tensor graphs (graphs, sessions, shape
inference, an op library on OpenBLAS) bound to LuaJIT through the FFI:
local tf = require("moonflow"). The C API works without Lua too: the rock
carries moonflow.h, libmoonflow.a, libmoonflow.so and moonflow.pc.
]],
}
dependencies = {
  "lua == 5.1",  -- LuaJIT: the binding uses the FFI
}
external_dependencies = {
  OPENBLAS = { library = "openblas" },
  FFTW3 = { header = "fftw3.h", library = "fftw3" },
  JANSSON = { header = "jansson.h", library = "jansson" },
  ZLIB = { header = "zlib.h", library = "z" },
  PROTOBUF_C = { header = "protobuf-c/protobuf-c.h", library = "protobuf-c" },
  PNG = { header = "png.h", library = "png" },
  JPEG = { header = "jpeglib.h", library = "jpeg" },
}
build = {
  type = "make",
  -- `lib` builds without the Debian package step of `make all`; WERROR=
  -- keeps a compiler's new warnings from failing a user's build.
  build_target = "lib",
  build_variables = {
    CC = "$(CC)",
    CFLAGS = "$(CFLAGS) -I$(FFTW3_INCDIR) -I$(JANSSON_INCDIR) -I$(ZLIB_INCDIR) -I$(PROTOBUF_C_INCDIR) -I$(PNG_INCDIR) -I$(JPEG_INCDIR)",
    LDFLAGS = "-L$(OPENBLAS_LIBDIR) -L$(FFTW3_LIBDIR) -L$(JANSSON_LIBDIR) -L$(ZLIB_LIBDIR) -L$(PROTOBUF_C_LIBDIR) -L$(PNG_LIBDIR) -L$(JPEG_LIBDIR)",
    WERROR = "",
  },
  -- The Lua modules go to LUADIR (the tree's share/lua/5.1/moonflow/) and the
  -- library they load to LIBDIR/moonflow/ (the tree's lib/lua/5.1/moonflow/,
  -- on package.cpath, where core.lua looks). For C hosts, the rock's own
  -- directory (`luarocks show --rock-dir moonflow`) gets include/moonflow.h
  -- and c/lib/ with libmoonflow.a, libmoonflow.so and pkgconfig/moonflow.pc.
  install_target = "install",
  install_variables = {
    LUADIR = "$(LUADIR)",
    LUA_LIBDIR = "$(LIBDIR)",
    PREFIX = "$(PREFIX)",
    INCLUDEDIR = "$(PREFIX)/include",
    LIBDIR = "$(PREFIX)/c/lib",
  },
  -- The moonflow command (the REPL); LuaRocks wraps it to find the tree's modules.
  install = {
    bin = {moonflow = "bin/moonflow"},
  },
}
