-- extend.lua: extend the leases of deliveries still being handled.
--
-- KEYS[1] -> prepare ZSET
-- KEYS[2] -> owner epoch STRING, ZooKeeper mode only (omit it for no fencing)
-- ARGV[1] -> new lease in seconds from Redis's now
-- ARGV[2], ARGV[3] ... -> pairs of id, delivery token
-- ARGV[#ARGV] -> the caller's owner epoch, when KEYS[2] is given (after the pairs)
-- Returns: one integer per pair: 1 extended, 0 lost (the delivery is no longer
-- the current one; its handler should stop). With KEYS[2]: an error reply
-- RMQFENCED, and nothing changed, when the epoch is not the slot's current one.
local last = #ARGV
if KEYS[2] then
  local refused = fence(KEYS[2], ARGV[last])
  if refused then return refused end
  last = last - 1
end
local now = now_ms()
local deadline = (math.floor(now / 1000) + tonumber(ARGV[1])) * TOKEN_MOD
local res = {}
for i = 2, last, 2 do
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
