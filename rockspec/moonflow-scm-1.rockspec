package = "moonflow"
version = "scm-1"
source = {
  -- `luarocks make` builds the checkout it is run in.
  url = ".",
}
description = {
  summary = "Symbolic tensor graphs for LuaJIT in the manner of TensorFlow 1.x",
  detailed = [[
moonflow is a C11 engine for symbolic tensor graphs (graphs, sessions, shape
inference, an op library on OpenBLAS) bound to LuaJIT through the FFI:
local tf = require("moonflow").
]],
}
dependencies = {
  "lua == 5.1",  -- LuaJIT: the binding uses the FFI
}
external_dependencies = {
  OPENBLAS = { library = "openblas" },
  ZLIB = { header = "zlib.h", library = "z" },
  PROTOBUF_C = { header = "protobuf-c/protobuf-c.h", library = "protobuf-c" },
}
build = {
  type = "make",
  -- `lib` builds without the Debian package step of `make all`.
  build_target = "lib",
  build_variables = {
    CC = "$(CC)",
    CFLAGS = "$(CFLAGS)",
    LDFLAGS = "-L$(OPENBLAS_LIBDIR) -L$(ZLIB_LIBDIR) -L$(PROTOBUF_C_LIBDIR)",
  },
  -- The Lua modules, the generated cdef.lua and libmoonflow.so go to
  -- LUADIR/moonflow/, where core.lua finds the library next to itself.
  install_target = "install-lua",
  install_variables = {
    LUADIR = "$(LUADIR)",
  },
}
