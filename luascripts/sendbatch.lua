-- sendbatch.lua: store messages of one or more slots in one call, waking
-- each slot at most once.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[4g-3..4g] likewise for
-- KEYS[3] -> msg HASH        | group g (several groups on a single node only)
-- KEYS[4] -> wake channel   /
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2g], ARGV[2g+1] -> group g's type (1 range-merge, 2 priority,
--            3 fixed-time) and how many messages of it follow
-- then quadruples of id, score (range in ms for range-merge), send nonce,
--            body: group 1's messages, then group 2's, ...
-- Returns: one result per message, in order:
--   1 stored as new
--   2 merged into the waiting message of its id (range-merge: due time,
--     first-send time and failures kept, body replaced)
--   3 replaced the waiting message of its id (priority, fixed-time: new
--     score and body, failures kept)
--   4 stored while the id is in flight: delivered after that delivery ends
--   0 already stored by this send (same nonce): a rerun changes nothing
local G = #KEYS / 4
local now = now_ms()
local res = {}
local at = 2 + 2 * G

-- send_group stores group g's count messages, from ARGV[at] on.
local function send_group(g, typ, count)
  local store = KEYS[4 * g - 3]
  local prepare = KEYS[4 * g - 2]
  local msg = KEYS[4 * g - 1]
  local time_based = typ ~= 2
  local head_id, head = head_of(store, time_based)
  head = head and tonumber(head)
  local first = at
  local ids = {}
  for k = 1, count do ids[k] = ARGV[first + 4 * (k - 1)] end
  at = at + 4 * count
  -- A new id (the common case) is written without send_one's reads, its
  -- HSET and ZADD gathered into one call each. An id that waits, is in
  -- flight or came earlier in this call goes through send_one; for an id
  -- that came earlier, what was gathered is written first, so it sees the
  -- state a call per message would.
  -- An envelope exists exactly for a waiting or in-flight id, so one HMGET
  -- tells the new ids.
  local known = mcall('HMGET', msg, ids)
  local seen = {}
  local hargs, zargs = {}, {}
  local function write(store, msg)
    if #hargs > 0 then
      mcall('HSET', msg, hargs, 2)
      mcall('ZADD', store, zargs, 2)
      hargs, zargs = {}, {}
    end
  end
  local best
  for k = 1, count do
    local i = first + 4 * (k - 1)
    local id = ids[k]
    local r, score
    if known[k] or seen[id] then
      -- What is gathered holds only other ids, unless this one came
      -- earlier in the call: only then must it be written first.
      if seen[id] then write(store, msg) end
      r, score = send_one(store, prepare, msg, typ, id, ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], now)
    else
      -- env_encode of a fresh message, inlined: this loop is most of the
      -- script's time in a large batch.
      local zscore = ARGV[i + 1]
      score = tonumber(zscore)
      if typ == 1 then
        score = now + score
        zscore = score
      end
      local n = #hargs
      hargs[n + 1] = id
      hargs[n + 2] = struct.pack(HDR, 1, typ, 0, now, score, score, tonumber(ARGV[i + 2]), 0) .. ARGV[i + 3]
      zargs[n + 1] = zscore
      zargs[n + 2] = id
      r = 1
    end
    seen[id] = true
    if r == 1 or r == 3 or r == 4 then
      if not best or (time_based and score < best) or (not time_based and score > best) then best = score end
    end
    res[#res + 1] = r
  end
  write(store, msg)
  -- Wake the slot when a message now comes before the old head (fetchers
  -- sleep until the head they know of), or when the old head is blocked
  -- behind its own delivery (fetchers then wait for a wake-up).
  if best and ARGV[1] ~= '' then
    local earlier = not head or (time_based and best < head) or (not time_based and best > head)
    if earlier or redis.call('ZSCORE', prepare, head_id) then
      redis.call(ARGV[1], KEYS[4 * g], fmt_score(best))
    end
  end
end

for g = 1, G do
  send_group(g, tonumber(ARGV[2 * g]), tonumber(ARGV[2 * g + 1]))
end
return res
