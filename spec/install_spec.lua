-- `make install-c` and C hosts of what it installs: the header, libmoonflow.a
-- (linked with plain -lmoonflow, no --whole-archive), the shared library
-- under its versioned soname exporting only the public API, and moonflow.pc.
-- The host is spec/static_link_check.c, which runs an op of every family.
local ffi = require("ffi")
local core = require("moonflow.core")
local H = require("spec.helpers")
local C = core.C

local version = ffi.string(C.mf_version())
local major = version:match("^(%d+)")
local build = core.library_path:match("^(.*)/libmoonflow%.so$")
local cc = os.getenv("CC") or "cc"
-- MOONFLOW_LINK_FLAGS carries the sanitizer flags when the library is instrumented.
local link_flags = os.getenv("MOONFLOW_LINK_FLAGS") or ""
local check_src = (os.getenv("PWD") or ".") .. "/spec/static_link_check.c"

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The functions moonflow.h declares.
local function header_functions()
  local names = {}
  for name in H.read("src/include/moonflow.h"):gmatch("\nMF_API [^\n(]-%f[%w_](mf_[%w_]+)%(") do
    names[#names + 1] = name
  end
  table.sort(names)
  return names
end

describe("make install-c", function()
  local prefix, lib
  setup(function()
    if not build then return end
    prefix = H.tmpdir()
    lib = prefix .. "/lib"
    local out, status = H.shell(string.format("make -s install-c BUILD='%s' PREFIX='%s'", build, prefix))
    assert.equal(0, status, out)
  end)
  teardown(function()
    if prefix then os.execute("rm -rf '" .. prefix .. "'") end
  end)
  local function needs_checkout()
    if build then return true end
    pending("the suite's library " .. core.library_path .. " is not a checkout's build/libmoonflow.so")
  end
  local function pkg_config(args)
    local out, status = H.shell("PKG_CONFIG_PATH='" .. lib .. "/pkgconfig' pkg-config " .. args)
    assert.equal(0, status, out)
    return (out:gsub("%s+$", ""))
  end

  it("installs the header, both libraries with the soname links, and moonflow.pc", function()
    if not needs_checkout() then return end
    for _, f in ipairs({"include/moonflow.h", "lib/libmoonflow.a", "lib/libmoonflow.so.0.1.0",
                        "lib/pkgconfig/moonflow.pc"}) do
      assert.is_true(exists(prefix .. "/" .. f:gsub("0%.1%.0", version)), f)
    end
    assert.equal("libmoonflow.so." .. version, H.shell("readlink '" .. lib .. "/libmoonflow.so." .. major .. "'"):gsub("\n", ""))
    assert.equal("libmoonflow.so." .. major, H.shell("readlink '" .. lib .. "/libmoonflow.so'"):gsub("\n", ""))
    local soname = H.shell("readelf -d '" .. lib .. "/libmoonflow.so." .. version .. "'")
    assert.truthy(soname:find("Library soname: [libmoonflow.so." .. major .. "]", 1, true), soname)
    assert.equal(version, pkg_config("--modversion moonflow"))
    assert.equal("-I" .. prefix .. "/include", pkg_config("--cflags moonflow"))
  end)

  it("exports exactly the functions moonflow.h declares", function()
    if not needs_checkout() then return end
    local out = H.shell("nm -D --defined-only '" .. lib .. "/libmoonflow.so'")
    local exported = {}
    for kind, name in out:gmatch("%x+ (%a) ([%w_]+)") do
      -- Sanitizer builds add their own __asan/__ubsan entry points.
      if kind == "T" and not name:find("^_") then exported[#exported + 1] = name end
    end
    table.sort(exported)
    assert.same(header_functions(), exported)
  end)

  it("links a C host against libmoonflow.a with plain -lmoonflow and runs every op family", function()
    if not needs_checkout() then return end
    -- Only the archive in the directory -L names first, as where a system has no shared one.
    local static_dir = prefix .. "/static"
    os.execute(string.format("mkdir -p '%s' && cp '%s/libmoonflow.a' '%s/'", static_dir, lib, static_dir))
    local exe = prefix .. "/static_host"
    local out, status = H.shell(string.format("%s -std=c11 %s '%s' -L'%s' %s %s -o '%s' && '%s' %d",
      cc, pkg_config("--cflags moonflow"), check_src, static_dir, pkg_config("--static --libs moonflow"),
      link_flags, exe, exe, C.mf_registry_num_ops()))
    assert.equal(0, status, out)
    assert.truthy(out:find("static_link_check: ok\n", 1, true), out)
    local dynamic = H.shell("readelf -d '" .. exe .. "'")
    assert.falsy(dynamic:find("libmoonflow", 1, true), dynamic)
  end)

  it("links the same host against the shared library through pkg-config", function()
    if not needs_checkout() then return end
    local exe = prefix .. "/shared_host"
    local out, status = H.shell(string.format("%s -std=c11 %s '%s' %s %s -o '%s' && LD_LIBRARY_PATH='%s' '%s' %d",
      cc, pkg_config("--cflags moonflow"), check_src, pkg_config("--libs moonflow"), link_flags, exe, lib, exe,
      C.mf_registry_num_ops()))
    assert.equal(0, status, out)
    assert.truthy(out:find("static_link_check: ok\n", 1, true), out)
    local dynamic = H.shell("readelf -d '" .. exe .. "'")
    assert.truthy(dynamic:find("Shared library: [libmoonflow.so." .. major .. "]", 1, true), dynamic)
  end)
end)
