-- train.lua — being written.
return function(tf, ops)
end
