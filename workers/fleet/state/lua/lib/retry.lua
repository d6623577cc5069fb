-- A failed attempt of a run with retries left is tried again (`finish` calls it before the
-- run counts as ended): a new run, queued, for the same device or selector, in the same
-- batch, whose id is derived from this one's (a repeated finish makes no second one): what was
-- asked for (`ASKED`, from `RunRecord.ASKED`) copied, the attempt's own fields new. This
-- attempt keeps its record and its rows. The batch's total grows first, so the batch is never
-- complete between the two attempts.
local function retry_run(run, batch, status, now)
  if status == S.DONE or status == S.CANCELLED then return end
  local left = tonumber(redis.call('HGET', run, 'retries') or '0') or 0
  if left < 1 then return end
  local prefix, id = run_key_parts(run)
  local next_id = string.sub(redis.sha1hex(id .. ':retry'), 1, 32)
  local next_run = K.run(prefix, next_id)
  if redis.call('EXISTS', next_run) == 1 then return end
  local try = tonumber(redis.call('HGET', run, 'retry') or '0') or 0
  local fields = {'id', next_id, 'status', S.QUEUED, 'submitted_at', now, 'retries', left - 1,
                  'retry', try + 1, 'retry_of', id}
  local asked = redis.call('HMGET', run, unpack(ASKED))
  for i, name in ipairs(ASKED) do
    if asked[i] then
      fields[#fields + 1] = name
      fields[#fields + 1] = asked[i]
    end
  end
  redis.call('HSET', next_run, unpack(fields))
  local priority = tonumber(redis.call('HGET', run, 'priority') or '0') or 0
  redis.call('ZADD', K.pending(prefix), priority * PRIORITY_SPAN + math.floor(tonumber(now) * 1000),
             next_id)
  redis.call('ZADD', K.runs(prefix), now, next_id)
  if batch ~= '' and redis.call('EXISTS', batch) == 1 then
    redis.call('HINCRBY', batch, 'total', 1)
    redis.call('RPUSH', K.batch_runs(prefix, redis.call('HGET', batch, 'id')), next_id)
  end
end
