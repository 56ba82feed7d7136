-- send.lua: store a message, or merge it into the one with the same id.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> wake channel (a channel, listed so it shares the slot's tag)
-- ARGV[1] -> type: 1 range-merge, 2 priority, 3 fixed-time
-- ARGV[2] -> id
-- ARGV[3] -> range-merge: time range in ms; others: the score (priority or due ms)
-- ARGV[4] -> send nonce (unique per producer call)
-- ARGV[5] -> body
-- ARGV[6] -> wake command: PUBLISH, SPUBLISH or '' for none
-- Returns: 1 stored new, 2 merged into a waiting message (due time kept),
--          3 replaced a waiting message's score, 4 stored again while the
--          id is being handled, 0 this call already ran (go-redis resent it).
local typ = tonumber(ARGV[1])
local id = ARGV[2]
local nonce = tonumber(ARGV[4])
local now = now_ms()

local env = redis.call('HGET', KEYS[3], id)
local old
if env then
  old = env_decode(env)
  if old.nonce == nonce then return 0 end
end

local waiting = redis.call('ZSCORE', KEYS[1], id)
local e = { typ = typ, fails = 0, first = now, nonce = nonce, err = '' }
local result
if typ == 1 then
  if waiting then
    e.score = tonumber(waiting)
  else
    e.score = now + tonumber(ARGV[3])
  end
else
  e.score = tonumber(ARGV[3])
end
e.orig = e.score

if waiting and old then
  -- Merge into the waiting message: keep its history, take the new body.
  e.first, e.fails, e.err = old.first, old.fails, old.err
  if typ == 1 then
    e.orig = old.orig
    result = 2
  else
    result = 3
  end
elseif old and redis.call('ZSCORE', KEYS[2], id) then
  result = 4
else
  result = 1
end

redis.call('HSET', KEYS[3], id, env_encode(e, ARGV[5]))
if result ~= 2 then
  redis.call('ZADD', KEYS[1], e.score, id)
  wake_if_head(ARGV[6], KEYS[4], KEYS[1], typ ~= 2, id, e.score)
end
return result
