-- rollback.lua: end deliveries as failed: retry later, or move to dead.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> dead ZSET
-- KEYS[5] -> deadmsg HASH
-- KEYS[6] -> wake channel
-- KEYS[7] -> owner epoch STRING, ZooKeeper mode only (omit it for no fencing)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> max retries: attempt max+1 failing goes to dead
-- ARGV[3] -> dead retention count per slot (0 = unbounded)
-- ARGV[4] -> dead retention age in ms (0 = unbounded)
-- ARGV[5] -> B, then ARGV[6..5+B] -> backoff ms for attempt 1..B (the last repeats)
-- ARGV[6+B] ... -> triples of id, delivery token, error text
-- ARGV[#ARGV] -> the caller's owner epoch, when KEYS[7] is given (after the triples)
-- Returns: one integer per triple: 0 refused (stale token), 2 superseded by a
-- waiting re-send, 3 moved to dead, 4 back in store for a retry. With
-- KEYS[7]: an error reply RMQFENCED, and nothing changed, when the epoch is
-- not the slot's current owner epoch.
local last = #ARGV
if KEYS[7] then
  local refused = fence(KEYS[7], ARGV[last])
  if refused then return refused end
  last = last - 1
end
local k = { store = KEYS[1], prepare = KEYS[2], msg = KEYS[3], dead = KEYS[4], deadmsg = KEYS[5], wake = KEYS[6] }
local max_retries = tonumber(ARGV[2])
local dead_max, dead_age = tonumber(ARGV[3]), tonumber(ARGV[4])
local backoff, at = parse_backoff(ARGV, 5)
local now = now_ms()
local res = {}
for i = at, last, 3 do
  res[#res + 1] = rollback_one(k, ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], now, max_retries, backoff, dead_max, dead_age, ARGV[1])
end
return res
