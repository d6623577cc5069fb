-- Drop a stale running-index entry unless the run was claimed again since it was read.
-- KEYS: running   ARGV: run_id, claim time as read
local t = redis.call('ZSCORE', KEYS[1], ARGV[1])
if t and tonumber(t) == tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
