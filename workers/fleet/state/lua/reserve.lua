--! uses places
-- pending -> reserved, for each (run, device) pair a dispatch pass chose (the caller then sends
-- the messages of those reserved); each pair on its own: a run no longer pending or a device no
-- longer free refuses that pair alone.
-- KEYS: pending, reserved, then per pair: run, device, lease
-- ARGV: now, then per pair: run_id, device_id
-- One 1 (reserved) or 0 (refused) per pair, in order.
local out = {}
for i = 3, #KEYS, 3 do
  local run, device, lease = KEYS[i], KEYS[i + 1], KEYS[i + 2]
  local j = 2 + (i - 3) / 3 * 2
  local run_id, device_id = ARGV[j], ARGV[j + 1]
  local ok = 0
  if run_state(run) == S.QUEUED and redis.call('ZSCORE', KEYS[1], run_id)
     and device_free(device, lease) then
    reserve(run, device, KEYS[2], run_id, device_id, ARGV[1])
    redis.call('ZREM', KEYS[1], run_id)
    ok = 1
  end
  out[#out + 1] = ok
end
return out
