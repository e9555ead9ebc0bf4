-- layer_scope.lua — the variable scope a layer (tf.layers.*, tf.nn.rnn_cell.*)
-- builds its variables in, named as TensorFlow 1.x names it.
--
-- Without `name` the scope is the layer's kind, made unique in the current
-- variable scope (`dense`, `dense_1`, ...); a `name` that is taken gets the
-- same suffix, unless `reuse` is set, which opens that scope exactly and
-- reuses its variables. The count starts again each time a variable scope is
-- entered, as in TensorFlow, so re-entering a scope with reuse = true (or a
-- tf.make_template's later calls) reuses the layers in the order they were
-- first built.
local core = require("moonflow.core")

-- Scope names opened by layers, per entry of a variable scope (a scope
-- object is made at each entry, so the counts start again at each one).
local opened = setmetatable({}, {__mode = "k"})

-- Runs fn(scope) in the variable scope of a layer of kind `base` (fname
-- names the layer's function in errors); returns what fn returns.
return function(tf, fname, base, name, reuse, fn)
  local parent = tf.get_variable_scope()
  local names = opened[parent]
  if not names then names = {}; opened[parent] = names end
  name = name or base
  if type(name) ~= "string" or name == "" then core.fail(fname .. ": name must be a non-empty string") end
  if reuse == false then reuse = nil end
  if reuse == nil and names[name] then
    local i = 1
    while names[name .. "_" .. i] do i = i + 1 end
    name = name .. "_" .. i
  end
  names[name] = true
  return tf.variable_scope(name, {reuse = reuse}, fn)
end
