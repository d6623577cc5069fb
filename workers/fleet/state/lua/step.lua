--! uses lease memory
-- running -> running: the step rows a run made since its last write (`workers.fleet.rows`),
-- fenced by the claim token and the device lease; with an `entry`, the decision-memory entry
-- of the screen the run is about to decide on, read in the same round trip (`recall_entry`).
-- KEYS: run, steps, lease, pictures[, entry]
-- ARGV: token, holder, now, memory ttl, then per row: its index, the row, its picture id
-- ('' for none: the run's pictures set keeps every id a row named, for a page drawn before
-- the run was claimed again and its rows written anew)
-- {1, entry} written; {2, entry} written, and a cancel was requested (the worker acts no
-- more); {0} the claim moved on; {-1} / {-2} the lease is lost (`lib/lease.lua`)
local lost = lease_lost(KEYS[3], ARGV[2])
if lost ~= 0 then return {lost} end
local run = redis.call('HMGET', KEYS[1], 'claim', 'status', 'cancel')
if run[1] ~= ARGV[1] or run[2] ~= S.RUNNING then return {0} end
for i = 5, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] ~= '' then redis.call('SADD', KEYS[4], ARGV[i + 2]) end
end
local code = 1
if run[3] == '1' then code = 2 end
if KEYS[5] then return {code, recall_entry(KEYS[5], ARGV[3], ARGV[4])} end
return {code}
