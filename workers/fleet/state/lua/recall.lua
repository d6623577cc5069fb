--! uses memory
-- A decision-memory entry read (`RedisMemory.recall`) when no step row rides with it (`step.lua`
-- reads it with the rows otherwise).
-- KEYS: entry   ARGV: now, ttl
return recall_entry(KEYS[1], ARGV[1], ARGV[2])
