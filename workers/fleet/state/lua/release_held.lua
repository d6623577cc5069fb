--! uses keep
-- The history writer stored these ended runs: each leaves the outbox and its retention starts
-- (`lib/keep.lua`, as it would have at the run's end without a writer).
-- KEYS: outbox, then each run's key and its steps' key   ARGV: keep (0: for good)
for i = 2, #KEYS, 2 do
  local prefix, id = run_key_parts(KEYS[i])
  local batch = redis.call('HGET', KEYS[i], 'batch')
  if batch and batch ~= '' then batch = K.batch(prefix, batch) else batch = '' end
  keep_run(KEYS[i], KEYS[i + 1], batch, ARGV[1])
  redis.call('ZREM', KEYS[1], id)
end
return 0
