-- ack.lua: end deliveries as done.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> wake channel
-- KEYS[5] -> owner epoch STRING, ZooKeeper mode only (omit it for no fencing)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2], ARGV[3] ... -> pairs of id, delivery token
-- ARGV[#ARGV] -> the caller's owner epoch, when KEYS[5] is given (after the pairs)
-- Returns: one integer per pair: 1 acked, 0 refused (the delivery is no
-- longer the current one: lease lost, or this call already ran). With
-- KEYS[5]: an error reply RMQFENCED, and nothing changed, when the epoch is
-- not the slot's current owner epoch.
local last = #ARGV
if KEYS[5] then
  local refused = fence(KEYS[5], ARGV[last])
  if refused then return refused end
  last = last - 1
end
local res = {}
for i = 2, last, 2 do
  local id, token = ARGV[i], tonumber(ARGV[i + 1])
  local s = redis.call('ZSCORE', KEYS[2], id)
  if s and token_of(s) == token then
    redis.call('ZREM', KEYS[2], id)
    local waiting = redis.call('ZSCORE', KEYS[1], id)
    if waiting then
      -- A send arrived during the delivery: keep its body, let it go next.
      if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[4], waiting) end
    else
      redis.call('HDEL', KEYS[3], id)
    end
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
return res
