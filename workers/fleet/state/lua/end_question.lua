--! uses events run_ended places
-- awaiting_answer -> done / blocked (a person's answer), escalated (expired) or cancelled.
-- KEYS: run, question, questions, batch, steps
-- ARGV: run_id, status, result, reason, now, retention
if run_state(KEYS[1]) ~= S.AWAITING_ANSWER then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'reason', ARGV[4],
           'finished_at', ARGV[5])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
run_ended(KEYS[1], KEYS[5], KEYS[4], ARGV[2], ARGV[6])
return 1
