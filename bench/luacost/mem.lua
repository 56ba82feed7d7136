-- mem.lua: fill a HASH (id -> value) and/or a ZSET (id -> score) the way a
-- slot stores waiting messages. KEYS[1] hash, KEYS[2] zset.
-- ARGV: first index, count, id length, value length, zset 1/0, hash 1/0
local start, n, idlen, vlen = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local val = string.rep('v', vlen)
for i = start, start + n - 1 do
  local id = string.sub(string.format('%0' .. idlen .. 'd', i), -idlen)
  if ARGV[6] == '1' then redis.call('HSET', KEYS[1], id, val) end
  if ARGV[5] == '1' then redis.call('ZADD', KEYS[2], 1700000000000 + i, id) end
end
return n
