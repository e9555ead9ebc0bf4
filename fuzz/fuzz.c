/* fuzz.c — libFuzzer entry for moonflow's readers: checkpoints, graph files,
 * .npy and CSV files, and feeds.
 *
 * The targets are the Lua API's readers (checkpoints and graph files call the
 * engine's C readers), so this embeds
 * LuaJIT and hands each input to a target of fuzz/targets.lua, named by the
 * environment variable MOONFLOW_FUZZ_TARGET. A Lua error is a rejected input;
 * a crash or a sanitizer report (in the engine, built with ASan and UBSan) is
 * a finding. libFuzzer sees the engine's coverage through its instrumentation
 * and the Lua readers' coverage through a line hook that counts each (chunk,
 * line) in its extra counters; the JIT is off so that every line is hooked. */
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static lua_State *L;
static int target_ref;

/* One counter per hash of (chunk, line): libFuzzer reads the section. */
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t lua_lines[1 << 16];

static void count_line(lua_State *l, lua_Debug *ar) {
  if (!lua_getinfo(l, "S", ar)) return;
  uintptr_t h = (uintptr_t)ar->source * 2654435761u ^ (uintptr_t)ar->currentline * 40503u;
  lua_lines[(h ^ h >> 16) & (sizeof lua_lines - 1)]++;
}

static void die(const char *what) {
  fprintf(stderr, "fuzz: %s: %s\n", what, lua_tostring(L, -1));
  exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *name = getenv("MOONFLOW_FUZZ_TARGET");
  if (!name) {
    fprintf(stderr, "fuzz: set MOONFLOW_FUZZ_TARGET to one of the targets in fuzz/targets.lua\n");
    exit(1);
  }
  L = luaL_newstate();
  luaL_openlibs(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  if (luaL_dostring(L, "return require('fuzz.targets')")) die("loading fuzz/targets.lua");
  lua_getfield(L, -1, name);
  if (!lua_isfunction(L, -1)) {
    fprintf(stderr, "fuzz: no target '%s' in fuzz/targets.lua\n", name);
    exit(1);
  }
  target_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_sethook(L, count_line, LUA_MASKLINE, 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, target_ref);
  lua_pushlstring(L, (const char *)data, size);
  lua_pcall(L, 1, 0, 0);  /* an error rejects the input */
  lua_settop(L, 0);
  return 0;
}
