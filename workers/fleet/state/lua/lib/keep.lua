-- A run's retention, its one owner: the run, its step rows and the ids of every picture its
-- rows named are kept `keep` seconds (0: for good), and its batch (`batch` '' when it has none), which holds its request, at least as
-- long. Called when a run ends (`lib/run_ended.lua`) or, while a history writer holds ended
-- runs, once the writer has stored it (`release_held.lua`).
local function keep_run(run, steps, batch, keep)
  keep = tonumber(keep)
  if keep <= 0 then return end
  redis.call('EXPIRE', run, keep)
  redis.call('EXPIRE', steps, keep)
  local prefix, id = run_key_parts(run)
  redis.call('EXPIRE', K.pictures(prefix, id), keep)
  if batch ~= '' and redis.call('TTL', batch) < keep then redis.call('EXPIRE', batch, keep) end
end
