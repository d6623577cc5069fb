-- Every script that ends a run calls it (finish, cancel, expire, a question's end): the run
-- counts once in its batch (`batch` '' when it has none), joins the index of its end status
-- (`{p}:runs:<status>`, by submit time: the run list's filter), and the run and its step rows
-- are kept `keep` seconds (0: for good); the run's end, and its batch's when it was the last,
-- are events (`lib/events.lua`), and its retention starts (`lib/keep.lua`). The index's key is built from the run key's prefix by `K` (one Redis,
-- no cluster: the fleet's keys all live on one node). While a history writer is on
-- (`{p}:history:on`), the run joins its outbox (`{p}:history:outbox`, by end time in ms) and
-- its keys are held, with no expiry, until the writer has stored them and sets their `keep`.
local function run_ended(run, steps, batch, status, keep)
  local prefix, id = run_key_parts(run)
  if prefix and redis.call('EXISTS', K.history_on(prefix)) == 1 then
    local t = redis.call('TIME')
    redis.call('ZADD', K.history_outbox(prefix), 'NX', t[1] * 1000 + math.floor(t[2] / 1000), id)
    keep = 0
  end
  local submitted = redis.call('HGET', run, 'submitted_at')
  if prefix and submitted and submitted ~= '' then
    redis.call('ZADD', K.ended(prefix, status), submitted, id)
  end
  if prefix then emit(prefix, batch, 'kind', 'run_ended', 'run', id, 'status', status) end
  if batch ~= '' and redis.call('EXISTS', batch) == 1 then
    redis.call('HINCRBY', batch, 'n:' .. status, 1)
    local finished = redis.call('HINCRBY', batch, 'finished', 1)
    local total = tonumber(redis.call('HGET', batch, 'total') or '0') or 0
    if prefix and finished == total then
      emit(prefix, batch, 'kind', 'batch_finished', 'batch', redis.call('HGET', batch, 'id'))
    end
  end
  keep_run(run, steps, batch, keep)
end
