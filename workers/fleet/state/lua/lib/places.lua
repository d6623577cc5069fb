-- Reserved is a state of its own: a run `queued` with a `device`, in the reserved index and
-- the device's `run` (not in pending). These are the only places that enter or leave it.

-- A run's state: its status, or 'reserved' for a queued run that holds a device.
local function run_state(run)
  local st = redis.call('HGET', run, 'status')
  if st == S.QUEUED then
    local d = redis.call('HGET', run, 'device')
    if d and d ~= '' then return S.RESERVED end
  end
  return st
end

-- A device a run can be reserved for: holding no run, not quarantined, its lease alive.
local function device_free(device, lease)
  local r = redis.call('HGET', device, 'run')
  if r and r ~= '' then return false end
  if redis.call('HGET', device, 'quarantined') == '1' then return false end
  return redis.call('EXISTS', lease) == 1
end

-- pending -> reserved (the run's status stays queued), at `now` in the reserved index. The
-- caller sends its message after the script (`scheduler.store.enqueue`); a reservation whose
-- message never left, or was lost, is sent again by the scheduler's sweep (`resend`).
local function reserve(run, device, reserved, run_id, device_id, now)
  redis.call('HSET', run, 'device', device_id, 'dispatched_at', now)
  redis.call('HSET', device, 'run', run_id)
  redis.call('ZADD', reserved, now, run_id)
end

-- The device lets go of `run_id` (only if it still holds that run).
local function free_device(device, run_id)
  if redis.call('HGET', device, 'run') == run_id then redis.call('HSET', device, 'run', '') end
end

-- reserved / running / awaiting_answer -> pending, with its own score; out of the reserved and
-- running indexes; `device` '' when no device record holds it.
local function repend(run, device, pending, reserved, running, run_id, score)
  redis.call('HSET', run, 'status', S.QUEUED, 'device', '', 'dispatched_at', '', 'claim', '')
  if device ~= '' then free_device(device, run_id) end
  redis.call('ZADD', pending, score, run_id)
  redis.call('ZREM', reserved, run_id)
  redis.call('ZREM', running, run_id)
end
