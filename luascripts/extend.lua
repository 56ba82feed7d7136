-- extend.lua: extend the leases of deliveries still being handled.
--
-- KEYS[1] -> prepare ZSET
-- ARGV[1] -> new lease in seconds from Redis's now
-- ARGV[2], ARGV[3] ... -> pairs of id, delivery token
-- Returns: one integer per pair: 1 extended, 0 lost (the delivery is no longer
-- the current one; its handler should stop).
local now = now_ms()
local deadline = (math.floor(now / 1000) + tonumber(ARGV[1])) * TOKEN_MOD
local res = {}
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], tonumber(ARGV[i + 1])
  local s = redis.call('ZSCORE', KEYS[1], id)
  if s and token_of(s) == token then
    redis.call('ZADD', KEYS[1], 'XX', deadline + token, id)
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
return res
