-- requeue.lua: move dead messages of one slot back to store as fresh ones.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> dead ZSET
-- KEYS[5] -> deadmsg HASH
-- KEYS[6] -> wake channel
-- KEYS[7] -> delayed ZSET
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> requeue nonce (unique per call: a resent call recognises its work)
-- ARGV[3] -> n: 0 requeues the ids ARGV[5..]; n > 0 requeues up to n of the
--            oldest dead messages that died at or before ARGV[4]
-- ARGV[4] -> with n > 0, the latest time of death (ms) to take; with n = 0,
--            '' or 0 (the messages keep their options), or 'R,T': every
--            message stored as fresh gets max retries R and an expiry T ms
--            from now (T = 0: none), its old expiry no longer counting
-- ARGV[5] ... -> ids (with n = 0)
-- Returns: with n = 0, one code per id; with n > 0, { requeued, looked at,
--          left in place (code 7) }.
-- Codes: 0 not dead in this slot (nothing changed)
--        1 stored as a new message
--        2 merged into a waiting message with the same id, whose score stays
--        3 merged into a waiting message with the same id, whose score moved
--          up (fixed-time: due now; priority: the higher of the two)
--        4 stored again behind a delivery of the same id in flight (it is
--          delivered after that delivery ends, like a send)
--        5 already requeued by this call (go-redis ran the script twice)
--        6 a dead entry without a body: removed, nothing to requeue
--        7 an envelope that cannot be read: left as it is
--        8 expired (a per-message option): deleted with its body, not requeued
-- A requeued message is fresh: no failures, no last error, no snoozes (its
-- other options stay, unless ARGV[4] renews them), due now
-- (fixed-time and range-merge, Redis's clock) or at its original priority.
-- A waiting message keeps its body and history when one merges into it: it
-- was sent after the dead one died, so its body is the newer one.
local nonce = tonumber(ARGV[2])
local now = now_ms()
-- renew_r, renew_t: the options a requeue with n = 0 sets anew (nil: kept).
local renew_r, renew_t
if tonumber(ARGV[3]) == 0 then
  local r, t = string.match(ARGV[4], '^(%d+),(%d+)$')
  renew_r, renew_t = tonumber(r), tonumber(t)
end

-- decode returns the envelope of a hash field, or nil when it is missing
-- or not an envelope (then nothing is written: validate before writing).
local function decode(hash, id)
  local raw = redis.call('HGET', hash, id)
  if not raw then return nil, true end
  local ok, e = pcall(env_decode, raw)
  if not ok then return nil, false end
  return e, true
end

local function requeue(id)
  if not redis.call('ZSCORE', KEYS[4], id) then
    local cur = decode(KEYS[3], id)
    if cur and cur.nonce == nonce then return 5 end
    return 0
  end
  local e, ok = decode(KEYS[5], id)
  if not ok then return 7 end
  if not e then
    redis.call('ZREM', KEYS[4], id)
    return 6
  end
  local w, wok = decode(KEYS[3], id)
  if not wok then return 7 end
  local time_based = e.typ ~= 2
  local score = e.orig
  if time_based then score = now end

  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  if renew_r then
    e.maxr = renew_r
    e.exp = nil
    if renew_t > 0 then e.exp = now + renew_t end
  end
  if expired(e, now) then return 8 end
  local waiting = redis.call('ZSCORE', KEYS[1], id)
  if not waiting and w then
    -- Waiting for its time in the delayed set: the requeued copy is due
    -- now, so the merged message waits in store.
    local d = redis.call('ZSCORE', KEYS[7], id)
    if d then
      redis.call('ZREM', KEYS[7], id)
      redis.call('ZADD', KEYS[1], w.score, id)
      wake_if_head(ARGV[1], KEYS[6], KEYS[1], time_based, id, w.score)
      waiting = w.score
    end
  end
  if waiting and w then
    local old = tonumber(waiting)
    local new = old
    if e.typ == 3 then
      new = math.min(old, score)
    elseif e.typ == 2 then
      new = math.max(old, score)
    end
    w.nonce = nonce
    if new ~= old then
      w.score, w.orig = new, new
      redis.call('HSET', KEYS[3], id, env_rewrite(w))
      redis.call('ZADD', KEYS[1], new, id)
      wake_if_head(ARGV[1], KEYS[6], KEYS[1], time_based, id, new)
      return 3
    end
    redis.call('HSET', KEYS[3], id, env_rewrite(w))
    return 2
  end

  local result = 1
  if w and redis.call('ZSCORE', KEYS[2], id) then result = 4 end
  e.fails, e.err, e.score, e.orig, e.nonce, e.snz = 0, '', score, score, nonce, 0
  redis.call('HSET', KEYS[3], id, env_rewrite(e))
  redis.call('ZADD', KEYS[1], score, id)
  wake_if_head(ARGV[1], KEYS[6], KEYS[1], time_based, id, score)
  return result
end

local n = tonumber(ARGV[3])
if n > 0 then
  local ids = redis.call('ZRANGE', KEYS[4], '-inf', ARGV[4], 'BYSCORE', 'LIMIT', 0, n)
  local requeued, left = 0, 0
  for _, id in ipairs(ids) do
    local r = requeue(id)
    if r >= 1 and r <= 5 then requeued = requeued + 1 end
    if r == 7 then left = left + 1 end
  end
  return { requeued, #ids, left }
end
local res = {}
for i = 5, #ARGV do
  res[#res + 1] = requeue(ARGV[i])
end
return res
