--! uses places
-- reserved -> reserved: a reservation never claimed is due its message again (it never left:
-- the sender died or Redis refused it between the reservation and the send; or it was lost:
-- the worker died holding it), and the reservation's time is now. Only while the run is still
-- reserved for that device and the device still holds it; 1: the caller sends the message
-- (a duplicate the worker receives is skipped by its claim).
-- KEYS: run, device, reserved   ARGV: run_id, device_id, now
if run_state(KEYS[1]) ~= S.RESERVED then return 0 end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then return 0 end
if redis.call('HGET', KEYS[2], 'run') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'dispatched_at', ARGV[3])
redis.call('ZADD', KEYS[3], 'XX', ARGV[3], ARGV[1])
return 1
