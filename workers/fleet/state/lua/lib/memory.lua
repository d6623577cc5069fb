-- A decision-memory entry written over whatever is there (a person's answer outranks what a
-- decider remembered for that screen): the hash `entry` holds the `fields` given (name, value,
-- ...: `RedisMemory.fields`), lives `ttl` seconds, and `member` joins the entries' `index`.
--
-- HSET is this function's first write, and it must be the script's: a full Redis refuses a
-- script's first write that may grow memory, but lets every write after one that does not (a
-- DEL) through, so a DEL first would let a "refused" answer land in full (the full-Redis test).
local function overwrite_entry(entry, index, member, ttl, ...)
  redis.call('HSET', entry, ...)
  local given = {}
  local fields = {...}
  for i = 1, #fields, 2 do given[fields[i]] = true end
  for _, name in ipairs(redis.call('HKEYS', entry)) do
    if not given[name] then redis.call('HDEL', entry, name) end
  end
  redis.call('EXPIRE', entry, ttl)
  redis.call('SADD', index, member)
end

-- A decision-memory entry read for a step: its hit counted and its TTL renewed when it exists
-- (never created); its hash (flat name, value, ...), or an empty table when there is none.
local function recall_entry(entry, now, ttl)
  if redis.call('HEXISTS', entry, 'entry') == 0 then return {} end
  redis.call('HINCRBY', entry, 'hits', 1)
  redis.call('HSET', entry, 'last_used_at', now)
  redis.call('EXPIRE', entry, ttl)
  return redis.call('HGETALL', entry)
end
