--! uses places
-- reserved -> pending for a reservation no registered device holds (the device left the set
-- without handing it back, or its record is gone); an index entry for a run no longer
-- reserved (claimed, ended, re-pended) is dropped.
-- KEYS: run, device, pending, reserved, devices, running   ARGV: run_id, device_id, score
if run_state(KEYS[1]) ~= S.RESERVED then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
local d = redis.call('HGET', KEYS[1], 'device')
if d ~= ARGV[2] then return 0 end
if redis.call('SISMEMBER', KEYS[5], d) == 1 and redis.call('HGET', KEYS[2], 'run') == ARGV[1]
then return 0 end
repend(KEYS[1], '', KEYS[3], KEYS[4], KEYS[6], ARGV[1], ARGV[3])
return 1
