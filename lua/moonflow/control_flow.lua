-- control_flow.lua — being written.
return function(tf, ops)
end
