-- progress.lua: store the latest progress of an in-flight delivery.
--
-- KEYS[1] -> prepare ZSET
-- KEYS[2] -> progress HASH \ the slot's life keys (lifelib.lua)
-- KEYS[3] -> events STREAM /
-- ARGV[1] -> id
-- ARGV[2] -> delivery token
-- ARGV[3] -> progress (opaque bytes)
-- ARGV[4] -> the event log's length (0: no log)
-- Returns: 1 stored (and a progress event recorded), 0 refused: the
-- delivery is no longer the current one (acked, rolled back, swept,
-- cancelled or removed), or is held for its instant and not handed over.
-- The value carries the token, so a reader shows only the current
-- delivery's progress; the entry goes when the delivery ends, and the
-- hash expires a day after its last write in case an end missed it (a
-- delivery ended by a call without the life keys).
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
local token = tonumber(ARGV[2])
if not s or token_of(s) ~= token or token == 0 or is_held(token) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[2], 86400000)
local lk = { events = KEYS[3] }
life_event(lk, tonumber(ARGV[4]), 'progress', ARGV[1], token % 1000, ARGV[3])
return 1
