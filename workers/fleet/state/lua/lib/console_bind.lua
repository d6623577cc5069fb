-- The console's token bindings (`scheduler.console.session`): the hash KEYS[1] holds
-- name -> "<fingerprint>:<generation>". A session records its name's generation when it opens
-- and is valid only while the binding still holds it; a binding whose fingerprint changes
-- (the token rotated, removed: fingerprint '', or put back) takes the next generation, so no
-- session of an earlier one opens again.
local function binding_gen(v)
  if not v then return 0 end
  return tonumber(string.match(v, ':(%d+)$')) or 0
end

local function bind(h, name, fp)
  local v = redis.call('HGET', h, name)
  if v and string.match(v, '^([^:]*):') == fp then return binding_gen(v) end
  local gen = binding_gen(v) + 1
  redis.call('HSET', h, name, fp .. ':' .. gen)
  return gen
end
