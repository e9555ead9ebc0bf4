/* lua_host.c — a program embedding LuaJIT with moonflow linked in
 * (libmoonflow.a whole, symbols exported): `require "moonflow"` must use the
 * engine in the program itself. Runs the Lua chunk argv[1]; exits 1 with the
 * error on stderr when it fails. Built and run by spec/discovery_spec.lua. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  int rc = luaL_dostring(L, argv[1]);
  if (rc) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  lua_close(L);
  return rc ? 1 : 0;
}
