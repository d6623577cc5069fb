--! uses places
-- awaiting_answer -> pending (a person answered with a control; the next attempt passes that
-- screen from memory), attempts counted afresh.
-- KEYS: run, question, questions, pending, wake, reserved, running   ARGV: run_id, score
if run_state(KEYS[1]) ~= S.AWAITING_ANSWER then return 0 end
repend(KEYS[1], '', KEYS[4], KEYS[6], KEYS[7], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[1], 'attempt', 0, 'result', '',
           'reason', 'answered by a person; queued again')
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('RPUSH', KEYS[5], ARGV[1])
return 1
