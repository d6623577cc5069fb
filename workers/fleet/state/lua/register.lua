-- A device's worker takes its lease and registers (refused while another holder's is live).
-- KEYS: lease, device, devices, wake   ARGV: holder, lease_ms, info, now, device_id
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'info', ARGV[3], 'worker', ARGV[1], 'registered_at', ARGV[4])
redis.call('PERSIST', KEYS[2])
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('RPUSH', KEYS[4], ARGV[5])
return ''
