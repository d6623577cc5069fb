--! uses lease retry events keep run_ended places
-- running -> a terminal status; the device freed, its health counted (and quarantined after
-- `quarantine_after` infrastructure failures in a row); a failure with retries left queues
-- its next attempt (`lib/retry.lua`).
-- The run's step rows not yet written (`workers.fleet.rows`: the last ones, made after its last
-- device action) are written first, as `step.lua` writes them.
-- KEYS: run, steps, device, batch, wake, lease, running, pictures
-- ARGV: token, status, result, reason, now, retention, failure, quarantine_after, run_id, holder,
--       then per unwritten row: its index, the row, its picture id ('' for none)
local lost = lease_lost(KEYS[6], ARGV[10])
if lost ~= 0 then return lost end
local run = redis.call('HMGET', KEYS[1], 'claim', 'status')
if run[1] ~= ARGV[1] or run[2] ~= S.RUNNING then return 0 end
for i = 11, #ARGV, 3 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] ~= '' then redis.call('SADD', KEYS[8], ARGV[i + 2]) end
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'reason', ARGV[4],
           'finished_at', ARGV[5], 'claim', '')
retry_run(KEYS[1], KEYS[4], ARGV[2], ARGV[5])
run_ended(KEYS[1], KEYS[2], KEYS[4], ARGV[2], ARGV[6])
redis.call('ZREM', KEYS[7], ARGV[9])
free_device(KEYS[3], ARGV[9])
redis.call('HINCRBY', KEYS[3], 'runs_total', 1)
local f = ARGV[7]
if f == F.INFRA then
  local n = redis.call('HINCRBY', KEYS[3], 'infra_failures', 1)
  if n >= tonumber(ARGV[8]) then
    redis.call('HSET', KEYS[3], 'quarantined', '1', 'quarantine_reason',
               n .. ' infrastructure failures in a row; last: ' .. ARGV[4])
  end
elseif f == F.NONE then
  redis.call('HSET', KEYS[3], 'infra_failures', 0, 'decision_failures', 0)
elseif f == F.DECISION then
  redis.call('HSET', KEYS[3], 'infra_failures', 0)
  redis.call('HINCRBY', KEYS[3], 'decision_failures', 1)
end
redis.call('RPUSH', KEYS[5], ARGV[9])
redis.call('LTRIM', KEYS[5], -WAKE_KEPT, -1)
return 1
