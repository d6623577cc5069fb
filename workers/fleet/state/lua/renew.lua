-- The heartbeat. 'taken': another holder has the lease, or registered since this one's
-- lapsed. 'vanished': no lease and no registration of anyone's (Redis lost its data: a
-- restart without persistence, FLUSHDB, a failover to an empty replica), or this holder's
-- registration is gone. A live lease is extended with PEXPIRE, which a full Redis (maxmemory,
-- noeviction) still accepts.
-- KEYS: lease, wake, device, devices   ARGV: holder, lease_ms, device_id
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 'taken' end
local worker = redis.call('HGET', KEYS[3], 'worker')
if not holder and worker and worker ~= '' and worker ~= ARGV[1] then return 'taken' end
if not worker or worker == '' or redis.call('SISMEMBER', KEYS[4], ARGV[3]) == 0 then
  return 'vanished'
end
if holder then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 'renewed'
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('RPUSH', KEYS[2], 'lease')
return 'renewed'
