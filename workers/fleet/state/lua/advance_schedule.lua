-- A schedule's next due time, moved on only by the caller that read the due time it expects.
-- KEYS: schedules   ARGV: id, expected due (string as stored), next due
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
