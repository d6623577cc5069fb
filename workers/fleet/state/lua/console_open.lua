--! uses console_bind
-- A console session opens: its name bound to this API's fingerprint of its token (a process
-- started before a rotation binds it back to its own: the other's sessions end), the session
-- recorded with the binding's generation, expiring after ttl_s. Returns the generation.
-- KEYS: console tokens, the session   ARGV: name, fingerprint, ttl_s
local gen = bind(KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], 'name', ARGV[1], 'gen', gen)
redis.call('EXPIRE', KEYS[2], ARGV[3])
return gen
