--! uses lease
-- running -> running: one step row, fenced by the claim token and the device lease.
-- KEYS: run, steps, lease   ARGV: token, index, row, holder
-- 1 written; 2 written, and a cancel was requested (the worker stops before its next step)
local lost = lease_lost(KEYS[3], ARGV[4])
if lost ~= 0 then return lost end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= S.RUNNING then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 2 end
return 1
