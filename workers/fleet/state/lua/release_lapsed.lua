--! uses places
-- running -> pending: the worker that claimed the run no longer holds its device's lease
-- (nobody does: it died or stopped for longer than the lease; or another worker registered
-- since). The attempt stays counted, the device is freed (its failure counters untouched),
-- and the claim token is cleared: if that worker ever runs again, its fence stops its device
-- actions and its step and finish writes are refused. 0: the run moved on meanwhile, or the
-- claiming worker (`holder` as the claim wrote it; '' for an unfenced claim: only a lapse
-- counts) still holds the lease.
-- KEYS: run, device, lease, pending, reserved, running, wake
-- ARGV: run_id, device_id, claim token as read, pending score
if run_state(KEYS[1]) ~= S.RUNNING then return 0 end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[3] then return 0 end
if redis.call('HGET', KEYS[1], 'device') ~= ARGV[2] then return 0 end
local holder = redis.call('HGET', KEYS[1], 'holder') or ''
local now = redis.call('GET', KEYS[3])
if now and (holder == '' or now == holder) then return 0 end
repend(KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[1], 'holder', '',
           'reason', 'its worker lost the device lease mid-run; pending again')
redis.call('RPUSH', KEYS[7], ARGV[1])
return 1
