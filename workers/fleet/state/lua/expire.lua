--! uses events keep run_ended places
-- pending -> unplaceable (a run being placed right now is left alone).
-- KEYS: run, steps, pending, batch   ARGV: run_id, result, now, retention, reason
if run_state(KEYS[1]) ~= S.QUEUED then return 0 end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'status', S.UNPLACEABLE, 'result', ARGV[2], 'reason', ARGV[5],
           'finished_at', ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[1])
run_ended(KEYS[1], KEYS[2], KEYS[4], S.UNPLACEABLE, ARGV[4])
return 1
