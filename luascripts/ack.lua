-- ack.lua: end deliveries as done, of one or more slots.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[4g-3..4g] likewise for
-- KEYS[3] -> msg HASH        | group g (several groups on a single node only)
-- KEYS[4] -> wake channel   /
-- KEYS[5] -> owner epoch STRING, ZooKeeper mode only, with exactly one group
--            (omit it for no fencing)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] ... ARGV[1+G] -> how many deliveries of each group follow
-- then pairs of id, delivery token: group 1's, then group 2's, ...
-- ARGV[#ARGV] -> the caller's owner epoch, when KEYS[5] is given (after the pairs)
-- Returns: one integer per pair, in order: 1 acked, 0 refused (the delivery
-- is no longer the current one: lease lost, or this call already ran). With
-- KEYS[5]: an error reply RMQFENCED, and nothing changed, when the epoch is
-- not the slot's current owner epoch.
local fenced = #KEYS == 5
local G = fenced and 1 or #KEYS / 4
if fenced then
  local refused = fence(KEYS[5], ARGV[#ARGV])
  if refused then return refused end
end
local res = {}
local at = 2 + G
for g = 1, G do
  local ids, tokens = {}, {}
  for _ = 1, tonumber(ARGV[1 + g]) do
    ids[#ids + 1] = ARGV[at]
    tokens[#tokens + 1] = tonumber(ARGV[at + 1])
    at = at + 2
  end
  if #ids > 0 then
    local cur = mcall('ZMSCORE', KEYS[4 * g - 2], ids)
    local acked, seen = {}, {}
    for j = 1, #ids do
      -- An id named twice is acked once, as two calls in a row would.
      if cur[j] and not seen[ids[j]] and token_of(cur[j]) == tokens[j] then
        seen[ids[j]] = true
        acked[#acked + 1] = ids[j]
        res[#res + 1] = 1
      else
        res[#res + 1] = 0
      end
    end
    if #acked > 0 then
      mcall('ZREM', KEYS[4 * g - 2], acked)
      local waiting = mcall('ZMSCORE', KEYS[4 * g - 3], acked)
      local gone = {}
      for j = 1, #acked do
        if waiting[j] then
          -- A send arrived during the delivery: keep its body, let it go next.
          if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[4 * g], waiting[j]) end
        else
          gone[#gone + 1] = acked[j]
        end
      end
      if #gone > 0 then mcall('HDEL', KEYS[4 * g - 1], gone) end
    end
  end
end
return res
