--! uses events keep run_ended places memory question
-- A person's answer, all in one: the run still waits for the very question that was answered
-- (its JSON's SHA-1: a run answered, run again and parked anew is not answered by a reply to
-- its old question), the answer's memory entry is written (a control or done; none for
-- blocked), and the run goes awaiting_answer -> pending (a control) or done / blocked. A
-- refused answer (0) has written nothing.
-- KEYS: run, question, questions, pending, wake, reserved, running, batch, steps,
--       memory entry, memory index
-- ARGV: run_id, question sha1, status (queued | done | blocked), score, result, reason, now,
--       retention, memory key ('' for none), memory ttl, the entry's fields (name, value, ...)
if run_state(KEYS[1]) ~= S.AWAITING_ANSWER then return 0 end
local asked = redis.call('GET', KEYS[2])
if not asked or redis.sha1hex(asked) ~= ARGV[2] then return 0 end
if ARGV[9] ~= '' then
  overwrite_entry(KEYS[10], KEYS[11], ARGV[9], ARGV[10], unpack(ARGV, 11))
end
if ARGV[3] == S.QUEUED then
  requeue_answered(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7],
                   ARGV[1], ARGV[4])
else
  end_question(KEYS[1], KEYS[2], KEYS[3], KEYS[8], KEYS[9],
               ARGV[1], ARGV[3], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
end
return 1
