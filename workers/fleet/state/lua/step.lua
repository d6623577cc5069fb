--! uses lease
-- running -> running: one step row, fenced by the claim token and the device lease.
-- KEYS: run, steps, lease   ARGV: token, index, row, holder
local lost = lease_lost(KEYS[3], ARGV[4])
if lost ~= 0 then return lost end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= S.RUNNING then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
