-- bucketed.lua: the same ZSET entries split into ZSETs of 120 members
-- (listpack-encoded under Redis's default zset-max-listpack-entries 128).
local start, n = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = start, start + n - 1 do
  redis.call('ZADD', KEYS[1] .. ':' .. math.floor(i / 120), 1700000000000 + i, string.format('%012d', i))
end
return n
