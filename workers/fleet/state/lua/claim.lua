--! uses lease places
-- reserved -> running (a redelivery: running -> running, attempt counted again).
-- KEYS: run, steps, device, reserved, lease, running
-- ARGV: device_id, worker, cap, token, now, run_id, holder
local lost = lease_lost(KEYS[5], ARGV[7])
if lost ~= 0 then return {'lease', tostring(lost)} end
local st = run_state(KEYS[1])
if not st then return {'missing', '0'} end
local attempt = tonumber(redis.call('HGET', KEYS[1], 'attempt') or '0') or 0
if st ~= S.RESERVED and st ~= S.RUNNING then
  if st == S.QUEUED then return {'elsewhere', tostring(attempt)} end
  return {'terminal', tostring(attempt)}
end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[1] then return {'elsewhere', tostring(attempt)} end
attempt = attempt + 1
redis.call('HSET', KEYS[1], 'status', S.RUNNING, 'worker', ARGV[2], 'attempt', attempt,
           'claim', ARGV[4], 'started_at', ARGV[5], 'holder', ARGV[7])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[3], 'run', ARGV[6])
redis.call('ZREM', KEYS[4], ARGV[6])
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[6])
local kind = 'claimed'
if attempt > tonumber(ARGV[3]) then kind = 'exhausted' end
return {kind, tostring(attempt), redis.call('HGETALL', KEYS[1])}
