--! uses console_bind
-- An API's tokens, at its start: every name of ARGV (name, fingerprint pairs) bound to its
-- token's fingerprint; every other bound name unbound (its token is gone: its sessions end,
-- and putting the token back starts a new generation).
-- KEYS: console tokens   ARGV: name, fingerprint, name, fingerprint, ...
local given = {}
for i = 1, #ARGV, 2 do
  given[ARGV[i]] = true
  bind(KEYS[1], ARGV[i], ARGV[i + 1])
end
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  if not given[flat[i]] then bind(KEYS[1], flat[i], '') end
end
return #flat / 2
