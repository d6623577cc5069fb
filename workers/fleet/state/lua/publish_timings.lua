-- KEYS[1] timings hash; ARGV: fleet JSON, who, this publisher's JSON, defines ("1"/"0").
-- Returns the fleet's timings before this call ("" when there were none); a worker ("0") whose
-- timings differ from them writes nothing.
local before = redis.call('HGET', KEYS[1], 'fleet') or ''
if ARGV[4] == '0' and before ~= '' and before ~= ARGV[1] then
  return before
end
redis.call('HSET', KEYS[1], 'fleet', ARGV[1], ARGV[2], ARGV[3])
return before
