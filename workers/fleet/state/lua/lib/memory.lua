-- A decision-memory entry written over whatever is there (a person's answer outranks what a
-- decider remembered for that screen): the hash `entry` holds the `fields` given (name, value,
-- ...: `RedisMemory.fields`), lives `ttl` seconds, and `member` joins the entries' `index`.
local function overwrite_entry(entry, index, member, ttl, ...)
  redis.call('DEL', entry)
  redis.call('HSET', entry, ...)
  redis.call('EXPIRE', entry, ttl)
  redis.call('SADD', index, member)
end
