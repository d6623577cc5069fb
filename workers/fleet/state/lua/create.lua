-- new -> pending, for each of a list of runs, and their batch: all or nothing.
-- KEYS: idem ('-': none), pending, the run list, batch ('-': none), the batch's run ids,
--       then each run's hash
-- ARGV: idem value ('': no key), idem ttl (0: none), batch ttl (0: none), the number of the
--       batch hash's field/value items (0: no batch), those items, then for each run: its
--       id, pending score, submit time, the number of its hash's field/value items, those items
-- An idempotency key already used answers what it names and writes nothing; else every run
-- is written pending, with its batch, and the scheduler woken by the caller's dispatch.
if ARGV[1] ~= '' then
  local e = redis.call('GET', KEYS[1])
  if e then return e end
  if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[1])
  end
end
local i = 5 + tonumber(ARGV[4])
local ids = {}
for k = 6, #KEYS do
  local id, score, at, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  redis.call('HSET', KEYS[k], unpack(ARGV, i + 4, i + 3 + n))
  redis.call('ZADD', KEYS[2], score, id)
  redis.call('ZADD', KEYS[3], at, id)
  ids[#ids + 1] = id
  i = i + 4 + n
end
if tonumber(ARGV[4]) > 0 then
  redis.call('HSET', KEYS[4], unpack(ARGV, 5, 4 + tonumber(ARGV[4])))
  for k = 1, #ids, 1000 do
    redis.call('RPUSH', KEYS[5], unpack(ids, k, math.min(k + 999, #ids)))
  end
  if tonumber(ARGV[3]) > 0 then
    redis.call('EXPIRE', KEYS[4], ARGV[3])
    redis.call('EXPIRE', KEYS[5], ARGV[3])
  end
end
return false
