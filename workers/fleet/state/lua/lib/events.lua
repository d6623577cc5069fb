-- The fleet's events for webhooks (`scheduler.service.webhooks`): appended to the capped
-- stream `{p}:events` only when someone listens: the run's batch has a webhook, or a
-- scheduler serves a fleet-wide one (`{p}:webhook`, kept alive while it runs). One XADD: a
-- worker never waits on a webhook.
local function emit(prefix, batch, ...)
  local wanted = redis.call('EXISTS', K.webhook(prefix)) == 1
  if not wanted and batch ~= '' then
    local url = redis.call('HGET', batch, 'webhook')
    wanted = url and url ~= ''
  end
  if wanted then
    redis.call('XADD', K.events(prefix), 'MAXLEN', '~', 10000, '*', ...)
  end
end
