--! uses places
-- running (claimed with `token`) or, with token '', reserved for this device, or running on
-- this device under `holder` (a claim whose pool child died with it, handed back by the same
-- worker process when the lease it holds lapsed in Redis) -> pending with its own score; its
-- attempt stays counted (once), its device's failure counters are not touched, and the
-- scheduler is woken to dispatch it again.
-- KEYS: run, device, pending, reserved, wake, running
-- ARGV: token, device_id, run_id, score, holder
local st = run_state(KEYS[1])
if ARGV[1] ~= '' then
  if st ~= S.RUNNING or redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
elseif redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then
  return 0
elseif st == S.RUNNING then
  if ARGV[5] == '' or redis.call('HGET', KEYS[1], 'holder') ~= ARGV[5] then return 0 end
elseif st ~= S.RESERVED then
  return 0
end
repend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], ARGV[3], ARGV[4])
redis.call('RPUSH', KEYS[5], ARGV[3])
return 1
