--! uses lease
-- running -> running: one step row, fenced by the claim token and the device lease.
-- KEYS: run, steps, lease, pictures   ARGV: token, index, row, holder, the row's picture id
-- ('' for none: the run's pictures set keeps every id a row named, for a page drawn before
-- the run was claimed again and its rows written anew)
-- 1 written; 2 written, and a cancel was requested (the worker stops before its next step)
local lost = lease_lost(KEYS[3], ARGV[4])
if lost ~= 0 then return lost end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= S.RUNNING then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if ARGV[5] ~= '' then redis.call('SADD', KEYS[4], ARGV[5]) end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 2 end
return 1
