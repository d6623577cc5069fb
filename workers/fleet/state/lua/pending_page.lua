-- The pending index's next `count` entries (id, score) after the entry (score, run id) a pass
-- read last: every entry that sorts before it or at it is skipped, whether or not that run is
-- still pending, so runs another scheduler reserved meanwhile shift nothing (reading by
-- offset, each one taken before the offset skipped an entry past it). Entries of one score
-- sort by id, as Redis sorts them.
-- KEYS: pending   ARGV: count, score, run_id
local before = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[2])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[2])) do
  if id > ARGV[3] then break end
  before = before + 1
end
return redis.call('ZRANGE', KEYS[1], before, before + tonumber(ARGV[1]) - 1, 'WITHSCORES')
