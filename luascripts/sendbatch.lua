-- sendbatch.lua: store messages of one or more slots in one call, waking
-- each slot at most once.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; the next group's keys
-- KEYS[3] -> msg HASH        | follow likewise (several groups on a
-- KEYS[4] -> wake channel    | single node only)
-- KEYS[5] -> delayed ZSET    | (priority messages that wait for a time)
-- KEYS[6] -> uniq ZSET       | these two only when the group's type
-- KEYS[7] -> uniqn HASH      | says so: unique sends (lib.lua's uniq_claim)
-- KEYS[8] -> events STREAM  /  only when the group's type says so (KEYS[6]
--                              without the unique keys): the
--                              slot's event log (lifelib.lua)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- then per group g, its header: its type (1 range-merge, 2 priority,
--            3 fixed-time; plus 4 when its messages carry options, plus 8
--            when some are unique sends: the group has the two unique keys,
--            plus 16 when its topic keeps an event log: the group has the
--            events key, and its header one more argument), how many
--            messages of it follow, and with 16 about how many events the
--            log keeps; plus 32 when the group's messages come packed
--            (not range-merge): each one's last argument is the envelope
--            a new message stores, its first-send ms the sender's
--            estimate of Redis's clock, instead of its body; plus 64 (any
--            group) to have Redis's clock (µs) returned after the results
-- then, per message, id, score (range in ms for range-merge), send nonce,
--            [unique window in ms, 0 for none, when the group's type says
--            so], [options block, when the group's type says so], body
--            (or envelope): group 1's messages, then group 2's, ...
-- Returns: one result per message, in order (then Redis's clock in µs when
-- a group asked with 64):
--   1 stored as new
--   2 merged into the waiting message of its id (range-merge: due time,
--     first-send time and failures kept, body and options replaced)
--   3 replaced the waiting message of its id (priority, fixed-time: new
--     score, body and options, failures kept)
--   4 stored while the id is in flight: delivered after that delivery ends
--   0 already stored by this send (same nonce): a rerun changes nothing
--  -1 refused: a unique send of the id recorded a window that still lasts
--     (nothing written)
-- With an event log, each message stored (1 to 4) records "sent" (attempt
-- 0) in the same call; a rerun (0) or a refused send records nothing.
-- Due times arrive rounded up to the ms and range-merge windows start from
-- Redis's ms rounded up, so no message comes due before its instant.
-- The groups, where their keys start and their headers (lib.lua).
local G, kb, hdr, at = send_groups(5)
local now, now_us, now_up = now_ms()
local res = {}
local want_clock = false

-- send_group stores group g's count messages, from ARGV[at] on.
local function send_group(g, typ, count)
  local b = kb[g]
  local keys = { store = KEYS[b + 1], prepare = KEYS[b + 2], msg = KEYS[b + 3], delayed = KEYS[b + 5] }
  local store = KEYS[b + 1]
  local msg = KEYS[b + 3]
  local u, lk, evmax
  if typ >= 64 then
    typ = typ - 64
    want_clock = true
  end
  local packed = typ >= 32
  if packed then typ = typ - 32 end
  if typ >= 16 then
    typ = typ - 16
    lk, evmax = { events = (typ >= 8 and KEYS[b + 8] or KEYS[b + 6]) }, tonumber(ARGV[hdr[g] + 2])
  end
  if typ >= 8 then
    typ = typ - 8
    u = { uniq = KEYS[b + 6], uniqn = KEYS[b + 7] }
  end
  local with_opts = typ >= 4
  if with_opts then typ = typ - 4 end
  -- Offsets from a message's first argument: its unique window, options
  -- and body (stride arguments in all).
  local uo = 3
  local oo = u and 4 or 3
  local stride = oo + (with_opts and 2 or 1)
  local time_based = typ ~= 2
  -- body_of returns the body of the message whose arguments start at i
  -- (a packed message's envelope holds it after its header and options).
  local function body_of(i, opts)
    local a = ARGV[i + stride - 1]
    if not packed then return a end
    return string.sub(a, 25 + (opts ~= '' and 2 + #opts or 0))
  end
  local head_id, head = head_of(store, time_based)
  head = head and tonumber(head)
  local first = at
  local ids = {}
  for k = 1, count do ids[k] = ARGV[first + stride * (k - 1)] end
  at = at + stride * count
  -- A new id (the common case) is written without send_one's reads, its
  -- HSET and ZADD gathered into one call each, its options block (already
  -- encoded by the caller) copied into the envelope as it is. An id that
  -- waits, is in flight or came earlier in this call, or a priority
  -- message whose options hold a not-before time (it may wait in the
  -- delayed set), goes through send_one; for an id that came earlier, what
  -- was gathered is written first, so it sees the state a call per message
  -- would.
  -- An envelope exists exactly for a waiting, delayed or in-flight id, so
  -- one HMGET tells the new ids. A group of one message (most groups of
  -- the producer's group commit, whose sends spread over the slots) asks
  -- with its write instead: an HSETNX that finds the id takes send_one.
  local known = count > 1 and mcall('HMGET', msg, ids)
  local seen = {}
  local hargs, zargs = {}, {}
  local function write(store, msg)
    if #hargs > 0 then
      mcall('HSET', msg, hargs, 2)
      mcall('ZADD', store, zargs, 2)
      hargs, zargs = {}, {}
    end
  end
  local best, dbest
  for k = 1, count do
    local i = first + stride * (k - 1)
    local id = ids[k]
    local opts = with_opts and ARGV[i + oo] or ''
    local r, score, due
    local ums = u and tonumber(ARGV[i + uo]) or 0
    if ums > 0 then
      r = uniq_claim(u, id, ums, ARGV[i + 2], now)
      if r == 1 then r = nil end
    end
    if r then
      -- Refused (-1) or this call's own earlier run (0): nothing written.
    elseif (known and known[k]) or seen[id] or (opts ~= '' and typ == 2 and has_bit(string.byte(opts, 1), 16)) then
      -- What is gathered holds only other ids, unless this one came
      -- earlier in the call: only then must it be written first. (Without
      -- the HMGET nothing is known: send_one reads.)
      if seen[id] then write(store, msg) end
      local fresh = known and not known[k] and not seen[id]
      r, score, due = send_one(keys, typ, id, ARGV[i + 1], tonumber(ARGV[i + 2]), body_of(i, opts), now, now_up, opts, fresh)
    else
      -- env_encode of a fresh message, inlined: this loop
      -- is most of the script's time in a large batch.
      local zscore = ARGV[i + 1]
      score = tonumber(zscore)
      if typ == 1 then
        -- A window starts from Redis's ms rounded up (a zero window from
        -- now: any later fetch is after the send).
        score = (score > 0 and now_up or now) + score
        zscore = score
      end
      local env
      if packed then
        env = ARGV[i + stride - 1]
      elseif opts == '' then
        env = struct.pack(HDR, 2, typ, 0, now, score, tonumber(ARGV[i + 2])) .. ARGV[i + stride - 1]
      else
        -- flags 4: an options block follows the header.
        env = struct.pack(HDR, 2, typ + 16, 0, now, score, tonumber(ARGV[i + 2])) .. struct.pack('>H', #opts) .. opts .. ARGV[i + stride - 1]
      end
      r = 1
      if known then
        local n = #hargs
        hargs[n + 1], hargs[n + 2] = id, env
        zargs[n + 1], zargs[n + 2] = zscore, id
      elseif redis.call('HSETNX', msg, id, env) == 1 then
        redis.call('ZADD', store, zscore, id)
      else
        r, score, due = send_one(keys, typ, id, ARGV[i + 1], tonumber(ARGV[i + 2]), body_of(i, opts), now, now_up, opts, false)
      end
    end
    if r >= 0 then seen[id] = true end
    if lk and r >= 1 then life_event(lk, evmax, 'sent', id, 0) end
    if due then
      if not dbest or due < dbest then dbest = due end
    elseif r >= 1 then
      -- A merge (2) into a message held for its instant puts it back in
      -- store (send_one): it may head the slot again.
      if not best or (time_based and score < best) or (not time_based and score > best) then best = score end
    end
    res[#res + 1] = r
  end
  write(store, msg)
  if u then uniq_trim(u, now, UNIQ_TRIM * count) end
  if ARGV[1] == '' then return end
  -- Wake the slot when a message now comes before the old head (fetchers
  -- sleep until the head they know of), or when the old head is blocked
  -- behind its own delivery (fetchers then wait for a wake-up).
  if best then
    local earlier = not head or (time_based and best < head) or (not time_based and best > head)
    if earlier or redis.call('ZSCORE', KEYS[b + 2], head_id) then
      redis.call(ARGV[1], KEYS[b + 4], fmt_score(best))
    end
  end
  -- A delayed message that is now the earliest: fetchers sleep until the
  -- earliest delayed due time ('d' marks a delayed due time).
  if dbest then
    local first_delayed = redis.call('ZRANGE', KEYS[b + 5], 0, 0, 'WITHSCORES')
    if tonumber(first_delayed[2]) == dbest then
      redis.call(ARGV[1], KEYS[b + 4], 'd' .. fmt_score(dbest))
    end
  end
end

-- A range-merge window starts from Redis's clock, which a packed
-- envelope cannot know: refused before anything is written.
for g = 1, G do
  local t = tonumber(ARGV[hdr[g]])
  if has_bit(t, 32) and t % 4 == 1 then
    return redis.error_reply('ERR sendbatch: a range-merge group cannot come packed')
  end
end
for g = 1, G do
  send_group(g, tonumber(ARGV[hdr[g]]), tonumber(ARGV[hdr[g] + 1]))
end
if want_clock then res[#res + 1] = now_us end
return res
