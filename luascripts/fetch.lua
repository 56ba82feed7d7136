-- fetch.lua: move up to n due messages from store to prepare (one delivery
-- each), taking them in consume order across one or more slots.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    > of slot group 1; KEYS[3g-2..3g] likewise for
-- KEYS[3] -> msg HASH       /  group g (several groups on a single node only)
-- KEYS[4] -> owner epoch STRING, ZooKeeper mode only, with exactly one group
--            (omit it for no fencing)
-- ARGV[1] -> 1 for time-based topics (due = score <= now, lowest first),
--            0 for priority (highest first)
-- ARGV[2] -> n, the most messages to move in all (free handler capacity)
-- ARGV[3] -> lease in seconds
-- ARGV[4] -> how many store entries of a group to read at a time; more are
--            read while a group's window runs out before n is reached
-- ARGV[5] -> bound, or '' for none: take only scores <= bound (time-based) or
--            >= bound (priority); a caller that fetches slot by slot passes
--            the head of the next-best slot so messages leave in order
-- ARGV[5+g] -> the most messages to move from group g (0: only read its head)
-- ARGV[6+G] -> the caller's owner epoch, when KEYS[4] is given (G = 1)
-- Returns: { nowUs, G, head1, ..., headG, g, id, envelope, token, storeScore, g, id, ... }
--   headg -> the score of group g's first remaining message in consume order
--            (lowest for time-based, highest for priority) that is not
--            blocked; -1 if its store is empty, -2 if all it looked at are blocked
--   then one quintuple per message moved, in consume order: its group,
--   id, envelope, delivery token and store score.
-- A message whose id is in prepare stays in store until that delivery ends
-- (its ack or rollback wakes the slot), so one id is never handled twice at
-- once. Across groups, a message is taken only when every message before it
-- in consume order is taken too (or blocked, or in a group at its limit).
-- With KEYS[4]: an error reply RMQFENCED, and nothing moved, when the epoch
-- is not the slot's current owner epoch.
local fenced = #KEYS == 4
local G = fenced and 1 or #KEYS / 3
if fenced then
  local refused = fence(KEYS[4], ARGV[6 + G])
  if refused then return refused end
end
local time_based = ARGV[1] == '1'
local n = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local window = math.min(math.max(tonumber(ARGV[4]), 1), MCHUNK)
local now, now_us = now_ms()
-- Numbers go to Redis as strings made here with integer formatting: Redis
-- 7.0 formats a Lua number argument with printf's %.17g, whose cost for
-- 13- to 16-digit values shows in profiles of this script.
local deadline = string.format('%d', math.floor(now / 1000) + lease)
local upto, from = string.format('%d', now), '-inf'
if ARGV[5] ~= '' then
  if not time_based then
    from = ARGV[5]
  elseif tonumber(ARGV[5]) < now then
    upto = ARGV[5]
  end
end
local window_s = string.format('%d', window)

local function better(a, b)
  if time_based then return a < b end
  return a > b
end

-- One state per group. buf holds the unblocked due entries of the last
-- window not yet taken (from ptr on); blocked counts the entries left in
-- front of the next window (blocked ones stay in store, taken ones leave
-- it); last is the score the last window reached when it was full of due
-- entries: the group may hold unread entries after it, so nothing after it
-- may be taken elsewhere. after is the first unblocked entry not yet due
-- that a time-based window met: the group's head once buf is taken.
-- Group g's keys are KEYS[3g-2] (store), KEYS[3g-1] (prepare), KEYS[3g] (msg).
local gs = {}
for g = 1, G do
  gs[g] = { max = tonumber(ARGV[5 + g]), taken = 0, blocked = 0, buf = {}, ptr = 1, full = true }
end
local upto_n = tonumber(upto)

local function read(g)
  local s = gs[g]
  local due
  if time_based then
    -- Read by rank, not up to now: the entries after the due ones tell
    -- the head without another read.
    due = redis.call('ZRANGE', KEYS[3 * g - 2], '-inf', '+inf', 'BYSCORE', 'LIMIT', string.format('%d', s.blocked), window_s, 'WITHSCORES')
  else
    due = redis.call('ZRANGE', KEYS[3 * g - 2], '+inf', from, 'BYSCORE', 'REV', 'LIMIT', string.format('%d', s.blocked), window_s, 'WITHSCORES')
  end
  local cnt = #due / 2
  s.buf, s.ptr = {}, 1
  s.full = cnt == window and s.blocked < 1024
  if cnt == 0 then return end
  local ids = {}
  for i = 1, #due, 2 do ids[#ids + 1] = due[i] end
  local busy = redis.call('ZMSCORE', KEYS[3 * g - 1], unpack(ids))
  for j = 1, cnt do
    local num = tonumber(due[2 * j])
    if time_based and num > upto_n then
      -- Not due (or past the bound): neither this entry nor any after it.
      s.full = false
      if not busy[j] and not s.after then s.after = due[2 * j] end
    elseif busy[j] then
      s.blocked = s.blocked + 1
    else
      s.buf[#s.buf + 1] = { id = ids[j], sc = due[2 * j], num = num }
    end
    if s.full then s.last = num end
  end
end

local out = { now_us, G }
for g = 1, G do out[2 + g] = -1 end
local moved = 0
for _ = 1, 64 do
  if moved >= n then break end
  for g, s in ipairs(gs) do
    if s.full and s.taken < s.max and s.ptr > #s.buf then read(g) end
  end
  -- The cut: the earliest score up to which some group may hold entries
  -- not read yet. Equal scores go by group, so at the cut only groups up
  -- to the first one that reached it may be taken from.
  local cut, cutg
  for g, s in ipairs(gs) do
    if s.full and s.taken < s.max and (not cut or better(s.last, cut)) then cut, cutg = s.last, g end
  end
  local cands = {}
  for g, s in ipairs(gs) do
    if s.taken < s.max then
      for j = s.ptr, #s.buf do
        local e = s.buf[j]
        if cut and (better(cut, e.num) or (e.num == cut and g > cutg)) then break end
        cands[#cands + 1] = { g = g, j = j, e = e }
      end
    end
  end
  if #cands > 1 then
    table.sort(cands, function(a, b)
      if a.e.num ~= b.e.num then return better(a.e.num, b.e.num) end
      if a.g ~= b.g then return a.g < b.g end
      return a.j < b.j
    end)
  end
  -- Pick in consume order; a group's picks are a run from its ptr.
  local picks, byg = {}, {}
  for _, c in ipairs(cands) do
    if moved + #picks >= n then break end
    local s = gs[c.g]
    local ids = byg[c.g]
    if not ids then
      ids = {}
      byg[c.g] = ids
    end
    if s.taken + #ids < s.max then
      ids[#ids + 1] = c.e.id
      picks[#picks + 1] = c
    end
  end
  local envs = {}
  for g, ids in pairs(byg) do
    if #ids > 0 then
      local s = gs[g]
      redis.call('ZREM', KEYS[3 * g - 2], unpack(ids))
      local got = redis.call('HMGET', KEYS[3 * g], unpack(ids))
      for j = 1, #ids do envs[ids[j]] = got[j] end
      s.ptr = s.ptr + #ids
      -- Without an envelope (never so under the invariants) the entry is
      -- only dropped from store.
      s.taken = s.taken + #ids
    end
  end
  local zargs = {}
  for _, c in ipairs(picks) do
    local env = envs[c.e.id]
    if env then
      local _, _, fails = struct.unpack('>BBH', env)
      local attempt = math.min(fails + 1, 999)
      local token = ((now_us + moved) % 1000) * 1000 + attempt
      local z = zargs[c.g]
      if not z then
        z = {}
        zargs[c.g] = z
      end
      z[#z + 1] = deadline .. string.format('%06d', token)
      z[#z + 1] = c.e.id
      out[#out + 1] = c.g
      out[#out + 1] = c.e.id
      out[#out + 1] = env
      out[#out + 1] = token
      out[#out + 1] = c.e.sc
      moved = moved + 1
    end
  end
  for g, z in pairs(zargs) do redis.call('ZADD', KEYS[3 * g - 1], unpack(z)) end
  if #picks == 0 then
    -- Nothing more to take unless a group whose window held only blocked
    -- entries reads on.
    local more = false
    for _, s in ipairs(gs) do
      if s.full and s.taken < s.max and s.ptr > #s.buf then more = true end
    end
    if not more then break end
  end
end

-- Heads: the first unblocked entry left, from what was read when possible.
local function range(g, upto_i)
  if time_based then
    return redis.call('ZRANGE', KEYS[3 * g - 2], 0, upto_i, 'WITHSCORES')
  end
  return redis.call('ZRANGE', KEYS[3 * g - 2], 0, upto_i, 'REV', 'WITHSCORES')
end
for g, s in ipairs(gs) do
  if s.ptr <= #s.buf then
    out[2 + g] = s.buf[s.ptr].sc
  elseif s.after then
    out[2 + g] = s.after
  else
    local look = range(g, 0)
    local busy = look[1] and redis.call('ZMSCORE', KEYS[3 * g - 1], look[1])
    if busy and busy[1] then
      look = range(g, 63)
      local ids = {}
      for i = 1, #look, 2 do ids[#ids + 1] = look[i] end
      busy = redis.call('ZMSCORE', KEYS[3 * g - 1], unpack(ids))
    end
    for i = 1, #look, 2 do
      if not busy[(i + 1) / 2] then
        out[2 + g] = look[i + 1]
        break
      end
    end
    if out[2 + g] == -1 and #look > 0 then out[2 + g] = -2 end
  end
end
return out
