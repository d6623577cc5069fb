-- Read only: the running runs whose claiming worker no longer holds its device's lease (the
-- candidates of `release_lapsed`, which checks each again), as flat (run id, device id,
-- claim token, priority, submitted_at) tuples after how many runs it looked at. It reads one
-- slice of the running index (by rank), so the check costs Redis three commands per running
-- run and the scheduler a round trip per slice, and Redis is never held longer than a slice
-- takes. The run and lease keys are built from the prefix by `K` (the layouts of `Keys`; one
-- Redis, no cluster: the fleet's keys all live on one node, as `lib/run_ended.lua` assumes).
-- KEYS: running   ARGV: key prefix, first rank, last rank
local ids = redis.call('ZRANGE', KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
local out = {tostring(#ids)}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', K.run(ARGV[1], id), 'status', 'device', 'claim', 'holder',
                       'priority', 'submitted_at')
  if f[1] == S.RUNNING and f[2] and f[2] ~= '' and f[3] and f[3] ~= '' then
    local now = redis.call('GET', K.lease(ARGV[1], f[2]))
    local holder = f[4] or ''
    if not now or (holder ~= '' and now ~= holder) then
      for _, v in ipairs({id, f[2], f[3], f[5] or '0', f[6] or '0'}) do table.insert(out, v) end
    end
  end
end
return out
