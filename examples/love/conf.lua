-- LÖVE's configuration of the example: a small window, no sound (a game that
-- only shows a net's output needs no audio device), no vsync wait.
function love.conf(t)
  t.identity = "moonflow-love-example"
  t.version = "11.4"
  t.window.title = "moonflow in LÖVE: a policy net each frame"
  t.window.width, t.window.height = 480, 240
  t.window.vsync = 0
  t.modules.audio, t.modules.sound, t.modules.joystick, t.modules.physics = false, false, false, false
end
