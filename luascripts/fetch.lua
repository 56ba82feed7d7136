-- fetch.lua: move up to n due messages from store to prepare (one delivery each).
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> owner epoch STRING, ZooKeeper mode only (omit it for no fencing)
-- ARGV[1] -> 1 for time-based topics (due = score <= now, lowest first),
--            0 for priority (highest first)
-- ARGV[2] -> n, the most messages to move (the caller's free handler capacity)
-- ARGV[3] -> lease in seconds
-- ARGV[4] -> how many store entries to read at a time (n plus a little room
--            for blocked ones; more windows are read while blocked ones fill them)
-- ARGV[5] -> bound, or '' for none: take only scores <= bound (time-based) or
--            >= bound (priority); the caller passes the head of the next-best
--            slot so messages leave a topic in order across its slots
-- ARGV[6] -> the caller's owner epoch, when KEYS[4] is given
-- Returns: { nowUs, head, blocked, 0, id1, envelope1, token1, storeScore1, id2, ... }
--   head    -> the score of the first remaining message in consume order
--              (lowest for time-based, highest for priority) that is not
--              blocked; -1 if store is empty, -2 if all it looked at are blocked
--   blocked -> due messages left in store because the same id is being handled
-- A message whose id is in prepare stays in store until that delivery ends
-- (its ack or rollback wakes the slot), so one id is never handled twice at once.
-- With KEYS[4]: an error reply RMQFENCED, and nothing moved, when ARGV[6] is
-- not the slot's current owner epoch.
if KEYS[4] then
  local refused = fence(KEYS[4], ARGV[6])
  if refused then return refused end
end
local time_based = ARGV[1] == '1'
local n = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local now, now_us = now_ms()
local deadline = (math.floor(now / 1000) + lease) * TOKEN_MOD

local function scan(offset, count)
  if time_based then
    local upto = now
    if ARGV[5] ~= '' then upto = math.min(now, tonumber(ARGV[5])) end
    return redis.call('ZRANGE', KEYS[1], '-inf', upto, 'BYSCORE', 'LIMIT', offset, count, 'WITHSCORES')
  end
  local from = '-inf'
  if ARGV[5] ~= '' then from = ARGV[5] end
  return redis.call('ZRANGE', KEYS[1], '+inf', from, 'BYSCORE', 'REV', 'LIMIT', offset, count, 'WITHSCORES')
end

local out = { now_us, -1, 0, 0 }
local moved, blocked = 0, 0
local window = tonumber(ARGV[4])
-- Scan in windows: moved entries leave store, blocked ones stay in front,
-- so the next window starts after the blocked ones seen so far.
while moved < n do
  local due = scan(blocked, window)
  for i = 1, #due, 2 do
    if moved >= n then break end
    local id = due[i]
    if redis.call('ZSCORE', KEYS[2], id) then
      blocked = blocked + 1
    else
      redis.call('ZREM', KEYS[1], id)
      local env = redis.call('HGET', KEYS[3], id)
      if env then
        local _, _, fails = struct.unpack('>BBH', env)
        local attempt = math.min(fails + 1, 999)
        local token = ((now_us + moved) % 1000) * 1000 + attempt
        redis.call('ZADD', KEYS[2], deadline + token, id)
        out[#out + 1] = id
        out[#out + 1] = env
        out[#out + 1] = token
        out[#out + 1] = due[i + 1]
        moved = moved + 1
      end
    end
  end
  if #due < 2 * window or blocked >= 1024 then break end
end

-- The new head: the first entry in consume order that is not blocked.
local function range(upto)
  if time_based then
    return redis.call('ZRANGE', KEYS[1], 0, upto, 'WITHSCORES')
  end
  return redis.call('ZRANGE', KEYS[1], 0, upto, 'REV', 'WITHSCORES')
end
local look = range(0)
if look[1] and redis.call('ZSCORE', KEYS[2], look[1]) then look = range(63) end
for i = 1, #look, 2 do
  if not redis.call('ZSCORE', KEYS[2], look[i]) then
    out[2] = look[i + 1]
    break
  end
end
if out[2] == -1 and #look > 0 then out[2] = -2 end
out[3] = blocked
return out
