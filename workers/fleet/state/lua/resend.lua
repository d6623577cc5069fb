--! uses places
-- reserved -> reserved: the message of a reservation never claimed is pushed again (it was
-- lost: the worker died holding it unacknowledged, or the queue was flushed), and the
-- reservation's time is now. Only while the run is still reserved for that device and the
-- device still holds it; a duplicate the worker receives is skipped by its claim.
-- KEYS: run, device, reserved, the device's queue   ARGV: run_id, device_id, now, message
if run_state(KEYS[1]) ~= S.RESERVED then return 0 end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then return 0 end
if redis.call('HGET', KEYS[2], 'run') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'dispatched_at', ARGV[3])
redis.call('ZADD', KEYS[3], 'XX', ARGV[3], ARGV[1])
redis.call('LPUSH', KEYS[4], ARGV[4])
return 1
