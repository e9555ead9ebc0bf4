-- progress.lua — the progress line of long work (Estimator:train and
-- :evaluate): steps done (of how many, when known), the last loss, steps per
-- second and the time left. On a terminal it is one line rewritten in place
-- (at most ten times a second) and ended when the work ends; elsewhere (a
-- file, a pipe) a plain line every `every` steps and one at the end.
local ffi = require("ffi")
local now = require("moonflow.clock")

pcall(ffi.cdef, "int isatty(int fd);")

local Progress = {}
Progress.__index = Progress

local REDRAW_SECONDS = 0.1

-- Seconds as "42s", "3m05s", "1h02m".
local function duration(s)
  s = math.floor(s + 0.5)
  if s < 60 then return s .. "s" end
  if s < 3600 then return string.format("%dm%02ds", math.floor(s / 60), s % 60) end
  return string.format("%dh%02dm", math.floor(s / 3600), math.floor(s % 3600 / 60))
end

-- Progress.new{label =, first = the step work starts at, last = the step it
-- ends at (nil: unknown), every = steps between plain lines, stream = a
-- file (io.stderr), tty = whether it is a terminal (asked when nil)}.
function Progress.new(o)
  local stream = o.stream or io.stderr
  local tty = o.tty
  if tty == nil then tty = stream == io.stderr and ffi.C.isatty(2) == 1 or stream == io.stdout and ffi.C.isatty(1) == 1 end
  local t = now()
  return setmetatable({label = o.label, first = o.first or 0, last = o.last, every = o.every, stream = stream,
                       tty = tty, start = t, mark_time = t, mark_step = o.first or 0, rate = nil,
                       drawn_at = -math.huge}, Progress)
end

function Progress:line(step, loss)
  local parts = {self.label}
  parts[#parts + 1] = self.last and string.format("step %d/%d", step, self.last) or string.format("step %d", step)
  if loss then parts[#parts + 1] = string.format("loss %.4g", loss) end
  if self.rate then
    parts[#parts + 1] = string.format("%.1f steps/s", self.rate)
    if self.last and self.last > step then parts[#parts + 1] = "ETA " .. duration((self.last - step) / self.rate) end
  end
  return table.concat(parts, "  ")
end

-- The rate over the steps since the last mark: on a terminal, marks at
-- least a second apart (a steadier figure); else the last printed line.
function Progress:measure(step, t)
  if self.tty and self.rate and t - self.mark_time < 1 then return end
  if step > self.mark_step and t > self.mark_time then
    self.rate = (step - self.mark_step) / (t - self.mark_time)
    self.mark_time, self.mark_step = t, step
  end
end

-- After each step.
function Progress:update(step, loss)
  local t = now()
  if self.tty then
    if t - self.drawn_at < REDRAW_SECONDS then return end
    self:measure(step, t)
    self.drawn_at = t
    self.stream:write("\r", self:line(step, loss), "\27[K")
    self.stream:flush()
  elseif self.every and self.every > 0 and (step - self.first) % self.every == 0 and step ~= self.last then
    self:measure(step, t)
    self.stream:write(self:line(step, loss), "\n")
    self.stream:flush()
  end
end

-- Before other output (an evaluation between steps): ends the line drawn in
-- place, so that the output starts on a line of its own.
function Progress:pause()
  if self.tty and self.drawn_at > -math.huge then
    self.stream:write("\n")
    self.stream:flush()
    self.drawn_at = -math.huge
  end
end

-- When the work ends: the last line, with the rate over the whole run.
function Progress:finish(step, loss, tail)
  local t = now()
  if step > self.first and t > self.start then self.rate = (step - self.first) / (t - self.start) end
  local last = self.last
  self.last = nil
  local text = self:line(step, loss) .. (tail and "  " .. tail or "")
  self.last = last
  if self.tty then text = "\r" .. text .. "\27[K" end
  self.stream:write(text, "\n")
  self.stream:flush()
end

return Progress
