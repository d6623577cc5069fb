--! uses places
-- The device leaves; a run reserved for it and not claimed yet (its message may sit in the
-- device's queue, or was never taken because the worker was shutting down) goes back to
-- pending with its own score, so it is dispatched elsewhere (or to this device when it
-- returns); the stale message is skipped by the claim (the run moved). -1: the device's run
-- changed since it was read; read again.
-- KEYS: lease, device, devices, run, pending, reserved, wake, running
-- ARGV: holder, device_id, keep, run_id ('' when the device is free), pending score
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local r = redis.call('HGET', KEYS[2], 'run') or ''
if r ~= ARGV[4] then return -1 end
if r ~= '' and run_state(KEYS[4]) == S.RESERVED
   and redis.call('HGET', KEYS[4], 'device') == ARGV[2] then
  repend(KEYS[4], KEYS[2], KEYS[5], KEYS[6], KEYS[8], r, ARGV[5])
  redis.call('RPUSH', KEYS[7], r)
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[2])
local keep = tonumber(ARGV[3])
if keep > 0 then redis.call('EXPIRE', KEYS[2], keep) end
return 1
