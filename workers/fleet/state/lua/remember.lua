--! uses memory
-- A decision-memory entry written over whatever is there (`RedisMemory.overwrite`).
-- KEYS: entry, index   ARGV: key, ttl, the entry's fields (name, value, ...)
overwrite_entry(KEYS[1], KEYS[2], ARGV[1], ARGV[2], unpack(ARGV, 3))
return 1
