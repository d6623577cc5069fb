--! uses places
-- new -> pending, or new -> reserved (the caller then sends its message).
-- KEYS: run, pending, idem, device, lease, reserved, wake, the run list
-- ARGV: run_id, pending score, max pending (0: no limit), idem value ('': no key), idem ttl
--       (0: none), device to try ('': none), now, then the run's hash as field/value pairs
-- One run's submit in one round trip: an idempotency key already used answers what it names
-- and writes nothing; a full backlog writes nothing; else the run is written and, when the
-- device the caller's view picked is free (`device_free`), reserved for it (the caller sends
-- its message); else pending, with a wake-up for the scheduler.
if ARGV[4] ~= '' then
  local e = redis.call('GET', KEYS[3])
  if e then return {'existing', e} end
end
local cap = tonumber(ARGV[3])
if cap > 0 and redis.call('ZCARD', KEYS[2]) >= cap then return {'full'} end
if ARGV[4] ~= '' then
  if tonumber(ARGV[5]) > 0 then
    redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5])
  else
    redis.call('SET', KEYS[3], ARGV[4])
  end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 8))
redis.call('ZADD', KEYS[8], redis.call('HGET', KEYS[1], 'submitted_at'), ARGV[1])
if ARGV[6] ~= '' and device_free(KEYS[4], KEYS[5]) then
  reserve(KEYS[1], KEYS[4], KEYS[6], ARGV[1], ARGV[6], ARGV[7])
  return {'reserved'}
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('RPUSH', KEYS[7], 'submit')
return {'pending'}
