--! uses events keep run_ended places
-- pending / reserved -> cancelled; running -> (cancel requested: the worker ends it).
-- KEYS: run, steps, device, pending, batch, wake, reserved, running
-- ARGV: run_id, device_id as read, result, now, retention
local st = run_state(KEYS[1])
if not st then return 'missing' end
if st == S.RUNNING then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return 'requested'
end
if st ~= S.QUEUED and st ~= S.RESERVED then return 'terminal:' .. st end
local d = redis.call('HGET', KEYS[1], 'device') or ''
if d ~= ARGV[2] then return 'retry' end
redis.call('HSET', KEYS[1], 'status', S.CANCELLED, 'result', ARGV[3],
           'reason', 'cancelled by the caller', 'finished_at', ARGV[4], 'cancel', '1')
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[7], ARGV[1])
redis.call('ZREM', KEYS[8], ARGV[1])
if d ~= '' and redis.call('HGET', KEYS[3], 'run') == ARGV[1] then
  redis.call('HSET', KEYS[3], 'run', '')
  redis.call('RPUSH', KEYS[6], ARGV[1])
end
run_ended(KEYS[1], KEYS[2], KEYS[5], S.CANCELLED, ARGV[5])
return 'cancelled'
