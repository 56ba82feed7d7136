-- remove.lua: delete a waiting message and, unless it is being handled, its body.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- ARGV[1] -> id
-- Returns: 1 removed, 0 not waiting (unknown, already delivered, or only in flight).
local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) == 0 then return 0 end
if not redis.call('ZSCORE', KEYS[2], id) then
  redis.call('HDEL', KEYS[3], id)
end
return 1
