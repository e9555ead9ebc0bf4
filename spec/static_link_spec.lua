-- A C program linked against libmoonflow.a (the archive next to the library
-- the suite loads) sees every op family: spec/static_link_check.c.
local core = require("moonflow.core")

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

describe("the static library", function()
  local archive = core.library_path:gsub("%.so$", ".a")
  local src = (os.getenv("PWD") or ".") .. "/spec/static_link_check.c"

  it("registers every op family in a host linked without --whole-archive", function()
    if not exists(archive) then
      pending("no " .. archive .. " beside the library the suite loads (build it with `make lib`)")
      return
    end
    local exe = os.tmpname()
    -- MOONFLOW_LINK_FLAGS carries the sanitizer flags when the archive is instrumented.
    local cmd = string.format("%s -std=c11 -Isrc/include '%s' '%s' %s -lopenblas -lprotobuf-c -lz -lm -lpthread -o '%s' 2>&1 && '%s' 2>&1",
                              os.getenv("CC") or "cc", src, archive, os.getenv("MOONFLOW_LINK_FLAGS") or "",
                              exe, exe)
    local p = assert(io.popen(cmd .. "; echo \"exit=$?\""))
    local out = p:read("*a")
    p:close()
    os.remove(exe)
    assert(out:find("static_link_check: ok\nexit=0\n", 1, true), out)
  end)
end)
