--! uses events keep run_ended places question
-- awaiting_answer -> escalated (expired) or cancelled.
-- KEYS: run, question, questions, batch, steps
-- ARGV: run_id, status, result, reason, now, retention
if run_state(KEYS[1]) ~= S.AWAITING_ANSWER then return 0 end
end_question(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5],
             ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
return 1
