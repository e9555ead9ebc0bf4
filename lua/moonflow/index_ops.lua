-- index_ops.lua — being written.
return function(tf, ops)
end
