-- A parked run's question ends (an answer, its expiry, a cancel): the two ways out of
-- awaiting_answer. The caller has checked the run is awaiting_answer.

-- awaiting_answer -> pending (a person answered with a control; the next attempt passes that
-- screen from memory), attempts counted afresh.
local function requeue_answered(run, question, questions, pending, wake, reserved, running,
                                run_id, score)
  repend(run, '', pending, reserved, running, run_id, score)
  redis.call('HSET', run, 'attempt', 0, 'result', '', 'reason', 'answered by a person; queued again')
  redis.call('DEL', question)
  redis.call('ZREM', questions, run_id)
  redis.call('RPUSH', wake, run_id)
end

-- awaiting_answer -> done / blocked (a person's answer), escalated (expired) or cancelled.
local function end_question(run, question, questions, batch, steps, run_id, status, result,
                            reason, now, keep)
  redis.call('HSET', run, 'status', status, 'result', result, 'reason', reason, 'finished_at', now)
  redis.call('DEL', question)
  redis.call('ZREM', questions, run_id)
  run_ended(run, steps, batch, status, keep)
end
