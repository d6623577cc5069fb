--! uses places
-- pending -> reserved (the caller then sends its message).
-- KEYS: run, device, lease, pending, reserved
-- ARGV: run_id, device_id, now
if run_state(KEYS[1]) ~= S.QUEUED then return 0 end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then return 0 end
if not device_free(KEYS[2], KEYS[3]) then return 0 end
reserve(KEYS[1], KEYS[2], KEYS[5], ARGV[1], ARGV[2], ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
