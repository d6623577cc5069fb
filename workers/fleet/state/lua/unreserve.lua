--! uses places
-- reserved -> pending, when the device it is reserved for is down and the run can go elsewhere.
-- KEYS: run, device, pending, reserved, running   ARGV: run_id, device_id, score
if run_state(KEYS[1]) ~= S.RESERVED then return 0 end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then return 0 end
repend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3])
return 1
