-- A quarantined device's probe failed: its quarantine reason says why it stays down
-- (`goalfleet devices`), so a run waiting for it shows the cause. Only a registered device
-- that is still quarantined changes; anything else is left alone (no stray hash).
-- KEYS: device   ARGV: reason
if redis.call('HGET', KEYS[1], 'quarantined') ~= '1' then return 0 end
redis.call('HSET', KEYS[1], 'quarantine_reason', ARGV[1])
return 1
