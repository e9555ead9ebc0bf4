-- bench/report.lua — the bench's rows (bench/harness.lua) as a text table for
-- the terminal, a markdown table and an SVG chart of the ratios, for
-- docs/bench.md and docs/bench.svg. Plain Lua: no plotting dependency.
local M = {}

local function fmt_ratio(r) return string.format(r < 0.1 and "%.3fx" or "%.2fx", r) end

local function target_cell(r)
  if r.target == nil then return "" end
  local goal = type(r.target) == "number" and ">= " .. fmt_ratio(r.target) or r.target
  return goal .. (r.met and " met" or " missed")
end

-- The cells of a row, in the order of M.HEADER.
M.HEADER = {"benchmark", "moonflow", "unit", "peer", "peer's figure", "peer/moonflow", "target", "note"}
function M.cells(r)
  return {r.name or "", r.value or "", r.unit or "", r.peer or "", r.peer_value or "",
          r.ratio and fmt_ratio(r.ratio) or "", target_cell(r), r.note or ""}
end

local RIGHT_ALIGNED = {[2] = true, [5] = true, [6] = true}

function M.text(rows)
  local all = {M.HEADER}
  for _, r in ipairs(rows) do all[#all + 1] = M.cells(r) end
  local widths = {}
  for _, cells in ipairs(all) do
    for i, cell in ipairs(cells) do widths[i] = math.max(widths[i] or 0, #cell) end
  end
  local lines = {}
  local function line(cells)
    local parts = {}
    for i, cell in ipairs(cells) do
      local pad = string.rep(" ", widths[i] - #cell)
      parts[i] = RIGHT_ALIGNED[i] and pad .. cell or cell .. pad
    end
    lines[#lines + 1] = (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  line(M.HEADER)
  local rule = {}
  for i, w in ipairs(widths) do rule[i] = string.rep("-", w) end
  line(rule)
  for i = 2, #all do line(all[i]) end
  return table.concat(lines, "\n") .. "\n"
end

local function markdown_line(cells)
  local escaped = {}
  for i, c in ipairs(cells) do escaped[i] = c:gsub("|", "\\|") end
  return "| " .. table.concat(escaped, " | ") .. " |"
end

-- intro: lines of text above the table (what was measured, where, when).
function M.markdown(rows, intro)
  local out = {}
  for _, l in ipairs(intro or {}) do out[#out + 1] = l end
  out[#out + 1] = ""
  out[#out + 1] = markdown_line(M.HEADER)
  out[#out + 1] = "|" .. string.rep("---|", #M.HEADER)
  for _, r in ipairs(rows) do out[#out + 1] = markdown_line(M.cells(r)) end
  return table.concat(out, "\n") .. "\n"
end

-- The rows that have a target (moonflow's own goal, or a ratio against a
-- peer), each under its benchmark's name and figure: README.md's summary.
function M.targets_markdown(rows)
  local out = {markdown_line({"benchmark", "moonflow", "peer", "peer's figure", "peer/moonflow", "target"}),
               "|---|---|---|---|---|---|"}
  local name, value = "", ""
  for _, r in ipairs(rows) do
    if r.name and r.name ~= "" then name, value = r.name, (r.value or "") .. " " .. (r.unit or "") end
    if r.target then
      local c = M.cells(r)
      out[#out + 1] = markdown_line({name, value, c[4], c[5], c[6], c[7]})
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- text with what lies between the lines `first` and `last` replaced by
-- block; nil when either marker is missing.
function M.splice(text, first, last, block)
  local i, j = text:find(first, 1, true), text:find(last, 1, true)
  if not i or not j or j < i then return nil end
  return text:sub(1, i + #first - 1) .. "\n" .. block .. text:sub(j)
end

-- The comparisons a chart shows: every peer row with a ratio, named after the
-- benchmark above it.
function M.comparisons(rows)
  local list, name = {}, ""
  for _, r in ipairs(rows) do
    if r.name and r.name ~= "" then name = r.name end
    if r.ratio then
      list[#list + 1] = {label = name .. " vs " .. r.peer, ratio = r.ratio,
                         target = type(r.target) == "number" and r.target or nil}
    end
  end
  return list
end

local function xml(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

local function log2(x) return math.log(x) / math.log(2) end

-- A horizontal bar per comparison on a log2 axis centred on 1x: bars to the
-- right mean moonflow is faster (or smaller), to the left slower; a tick
-- marks issue 13's target where there is one. title, subtitle: text lines.
function M.svg(comparisons, title, subtitle)
  local lo, hi = -2, 2
  for _, c in ipairs(comparisons) do
    lo = math.min(lo, math.floor(log2(c.ratio)))
    hi = math.max(hi, math.ceil(log2(c.ratio)))
  end
  lo, hi = math.max(lo, -10), math.min(hi, 10)
  local LABEL_W, PLOT_W, ROW_H, TOP = 520, 420, 22, 62
  local width = LABEL_W + PLOT_W + 80
  local height = TOP + ROW_H * #comparisons + 40
  local function x(ratio)
    local e = math.max(lo, math.min(hi, log2(ratio)))
    return LABEL_W + (e - lo) / (hi - lo) * PLOT_W
  end
  local out = {}
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
      'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">', width, height, width, height)
  add('<rect width="100%%" height="100%%" fill="white"/>')
  add('<text x="10" y="20" font-size="15" font-weight="bold">%s</text>', xml(title))
  add('<text x="10" y="38" fill="#555">%s</text>', xml(subtitle or ""))
  local bottom = TOP + ROW_H * #comparisons
  local step = math.ceil((hi - lo) / 10)  -- at most about ten axis labels
  for e = lo, hi do
    local gx = x(2 ^ e)
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>', gx, TOP - 6, gx, bottom,
        e == 0 and "#000" or "#ddd")
    local label = e >= 0 and string.format("%dx", 2 ^ e) or string.format("1/%dx", 2 ^ -e)
    if e % step == 0 then
      add('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>', gx, bottom + 16, label)
    end
  end
  add('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>', LABEL_W + PLOT_W / 2, bottom + 32,
      "peer's time / moonflow's time (log scale; right of 1x: moonflow faster; tick: target)")
  for i, c in ipairs(comparisons) do
    local y = TOP + (i - 1) * ROW_H
    local x0, x1 = x(1), x(c.ratio)
    add('<text x="%d" y="%d" text-anchor="end">%s</text>', LABEL_W - 8, y + 15, xml(c.label))
    add('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>', math.min(x0, x1), y + 4,
        math.max(math.abs(x1 - x0), 1), ROW_H - 8, c.ratio >= 1 and "#3a8f4f" or "#d9822b")
    local right = math.max(x0, x1)
    if c.target then
      local tx = x(c.target)
      add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000" stroke-width="2"><title>target %s</title></line>',
          tx, y + 1, tx, y + ROW_H - 1, fmt_ratio(c.target))
      right = math.max(right, tx)
    end
    add('<text x="%.1f" y="%d">%s</text>', right + 4, y + 15, fmt_ratio(c.ratio))
  end
  add('</svg>')
  return table.concat(out, "\n") .. "\n"
end

function M.write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

return M
