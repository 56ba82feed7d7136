-- deletedead.lua: delete dead messages of one slot, bodies with them.
--
-- KEYS[1] -> dead ZSET
-- KEYS[2] -> deadmsg HASH
-- ARGV[1] -> mode: 'ids' deletes the ids ARGV[2..]; 'all' deletes the slot's
--            whole dead queue (both keys are unlinked: O(1) for the caller)
-- ARGV[2] ... -> ids (mode 'ids')
-- Returns: how many dead messages were deleted.
if ARGV[1] == 'all' then
  local n = redis.call('ZCARD', KEYS[1])
  redis.call('UNLINK', KEYS[1], KEYS[2])
  return n
end
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('ZREM', KEYS[1], id) == 1 then n = n + 1 end
  redis.call('HDEL', KEYS[2], id)
end
return n
