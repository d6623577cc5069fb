-- A wrong token from one client (`scheduler.api.throttle`): the client's set of the wrong
-- tokens it gave (keyed hashes, at most cap of them) takes this one; when it is new to the
-- set, every client's count goes up by one. Each key's window starts at its first failure and
-- the key expires with it; a token given again counts once.
-- KEYS: the client's wrong tokens, every client's count   ARGV: window_ms, token hash, cap
-- Returns {the client's wrong tokens, every client's count, their ms left, 1 if this token
-- was new to the client's set}.
local new = 0
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[3]) then
  new = redis.call('SADD', KEYS[1], ARGV[2])
end
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if new == 1 then
  redis.call('INCR', KEYS[2])
  if redis.call('PTTL', KEYS[2]) < 0 then redis.call('PEXPIRE', KEYS[2], ARGV[1]) end
end
return {
  redis.call('SCARD', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0'),
  redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]), new,
}
