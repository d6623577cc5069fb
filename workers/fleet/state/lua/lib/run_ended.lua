-- Every script that ends a run calls it (finish, cancel, expire, a question's end): the run
-- counts once in its batch (`batch` '' when it has none), and the run and its step rows are
-- kept `keep` seconds (0: for good).
local function run_ended(run, steps, batch, status, keep)
  if batch ~= '' and redis.call('EXISTS', batch) == 1 then
    redis.call('HINCRBY', batch, 'n:' .. status, 1)
    redis.call('HINCRBY', batch, 'finished', 1)
  end
  keep = tonumber(keep)
  if keep > 0 then
    redis.call('EXPIRE', run, keep)
    redis.call('EXPIRE', steps, keep)
    -- the batch holds its runs' request: it outlives each of them
    if batch ~= '' and redis.call('TTL', batch) < keep then redis.call('EXPIRE', batch, keep) end
  end
end
