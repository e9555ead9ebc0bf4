-- math_ops.lua — op wrappers.
return function(tf, ops)
end
