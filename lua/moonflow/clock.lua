-- clock.lua — the monotonic clock in seconds (clock_gettime), for timing
-- that wall time decides: prefetch's trials, training's steps per second.
local ffi = require("ffi")

-- Declared under names of our own: a script may declare clock_gettime itself.
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } mf_clock_timespec;
int mf_clock_gettime(int clock_id, mf_clock_timespec *ts) __asm__("clock_gettime");
]]
local C = ffi.C
local CLOCK_MONOTONIC = 1
local ts = ffi.new("mf_clock_timespec")

return function()
  C.mf_clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
