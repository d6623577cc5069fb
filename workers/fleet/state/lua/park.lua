--! uses lease events places
-- running -> awaiting_answer, the device freed (2: a cancel was requested: not parked).
-- KEYS: run, device, question, questions, wake, lease, running
-- ARGV: token, result, reason, now, run_id, question json, deadline, holder ('' unfenced)
local lost = lease_lost(KEYS[6], ARGV[8])
if lost ~= 0 then return lost end
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= S.RUNNING then return 0 end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 2 end
redis.call('HSET', KEYS[1], 'status', S.AWAITING_ANSWER, 'result', ARGV[2], 'reason', ARGV[3],
           'claim', '', 'worker', '')
free_device(KEYS[2], ARGV[5])
redis.call('ZREM', KEYS[7], ARGV[5])
redis.call('SET', KEYS[3], ARGV[6])
redis.call('ZADD', KEYS[4], ARGV[7], ARGV[5])
redis.call('RPUSH', KEYS[5], ARGV[5])
local prefix = run_key_parts(KEYS[1])
local batch = redis.call('HGET', KEYS[1], 'batch')
if batch and batch ~= '' then batch = K.batch(prefix, batch) else batch = '' end
emit(prefix, batch, 'kind', 'question', 'run', ARGV[5])
return 1
