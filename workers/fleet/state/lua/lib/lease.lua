-- The lease check of every fenced script: 0 while `holder` ('' for an unfenced caller) holds
-- `lease`; -1 another holder has it; -2 nobody does (it lapsed, or Redis lost it).
local function lease_lost(lease, holder)
  if holder == '' then return 0 end
  local h = redis.call('GET', lease)
  if h == holder then return 0 end
  if h then return -1 end
  return -2
end
