-- fetch.lua: move up to n due messages from store to prepare (one delivery
-- each), taking them in consume order across one or more slots; on a single
-- node, one call may carry several such fetches (sections), of different
-- topics, each taken as if called alone.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1 (of the first section);
-- KEYS[3] -> msg HASH        | each slot group of each section likewise
-- KEYS[4] -> delayed ZSET   /  (read with mode 2), in the slot's hash tag
-- When the section's flow descriptor says grouped, each slot group has four
-- more keys after these (read by grouplib.lua): its gq ZSET, gocc ZSET,
-- gturn ZSET and grate HASH (flowlib.lua). When the section's mode names
-- an event log (below), each slot group's last key is the slot's events
-- STREAM (lifelib.lua); else the next group follows.
-- After a section's groups, when its descriptor names a topic limit (a
-- single node only), the
--   topic's tflow HASH and, for a topic concurrency, the prepare ZSET of
--   every slot of the topic (its in-flight count);
-- then (one section, one slot group, no topic keys) the owner epoch STRING
--   in ZooKeeper mode (omit it for no fencing).
-- One section (a single fetch):
-- ARGV[1] -> mode: 1 for time-based topics (due = score <= now, lowest
--            first), 0 for priority (highest first), 2 for priority with
--            delayed sets, 3 for time-based with a lookahead: the bound
--            (required) is taken even when it lies after now, so messages
--            due up to it are moved too; the caller holds those not yet due
--            (score > now) and hands them over at their instant through
--            confirm.lua, or returns them through release.lua; the mode
--            followed by a space and a number ("1 1000"): the section
--            logs events (lifelib.lua), keeping about that many, and each
--            slot group names its events key: a message handed over is
--            "delivered" (its attempt), one dropped because its expiry
--            passed "expired" (the attempts it had); one held (mode 3, not
--            yet due) is not delivered yet: confirm.lua logs it when it
--            hands it over. A topic without an event log passes the mode
--            alone and pays nothing for the log.
-- ARGV[2] -> n, the most messages to move in all (free handler capacity)
-- ARGV[3] -> lease in seconds
-- ARGV[4] -> how many store entries of a group to read at a time; more are
--            read while a group's window runs out before n is reached
-- ARGV[5] -> bound, or '' for none: take only scores <= bound (time-based) or
--            >= bound (priority); a caller that fetches slot by slot passes
--            the head of the next-best slot so messages leave in order
-- ARGV[6] -> the flow descriptor, '' for none (flowlib.lua's flow_parse):
--            grouped, group places, group rate, topic rate, topic
--            concurrency; a grouped section ignores the bound
-- ARGV[6+g] -> the most messages to move from group g (0: only read its head)
-- ARGV[6+G+g] -> with mode 2: 1 to move group g's due delayed entries
--            into store first (and report its delayed head), 0 to skip them
-- ARGV[last] -> the caller's owner epoch, when the epoch key is given
-- Several sections (single node, no epoch key):
-- ARGV[1] -> 'M'
-- ARGV[2] -> S, the number of sections; then per section, in KEYS order of
--            its groups: G (its groups), then the ARGV of a single section
--            above (mode, n, lease, window, bound, flow, G maxima, with
--            mode 2 G checks)
-- Returns: for one section { nowUs, G, D, head1, ..., headG, dhead1, ...,
--            dheadD, expired, twait, gwait, g, id, envelope, token,
--            storeScore, g, id, ... }
--   headg -> the score of group g's first remaining message in consume order
--            (lowest for time-based, highest for priority) that is not
--            blocked; -1 if its store is empty, -2 if all it looked at are
--            blocked (by their id in flight, or by a group limit)
--   D is G with mode 2, else 0; dheadg -> the due time (ms) of group
--            g's earliest delayed entry, -1 if none, -3 if not looked at
--   expired -> how many messages this call dropped because their expiry
--            (a per-message option) had passed: never delivered, body deleted
--   twait -> 0, or the Redis ms from which the topic's rate allows the
--            next start (it allowed none now), or -1 when the topic is at
--            its concurrency limit (the end of a delivery wakes its slots)
--   gwait -> 0, or the earliest Redis ms at which a group held back by its
--            rate may start again (for slots reported -2)
--   then one quintuple per message moved, in consume order: its group
--            (within the section), id, envelope, delivery token and store
--            score (a grouped message's: its due time or priority).
--   For several sections: { reply1, ..., replyS }, each the reply of one
--   section as above, or an error reply when that section failed (a key of
--   the wrong type, say): the other sections stand.
-- A message whose id is in prepare stays in store until that delivery ends
-- (its ack or rollback wakes the slot), so one id is never handled twice at
-- once. Across groups, a message is taken only when every message with a
-- better score is taken too (or blocked, or in a group at its limit).
-- Equal scores in different groups have no order between them: at a tie
-- any group may give first. (Tied by group, a fetch across slots that
-- hold many equal scores, all priority messages of one priority say, would
-- drain one slot a window at a time and cost about 25 % more per message.)
-- A grouped section serves the slots' message groups in turn instead
-- (grouplib.lua). A topic limit caps n: the topic's rate (GCRA in tflow)
-- and its concurrency (what all its prepare sets hold).
-- With the epoch key: an error reply RMQFENCED, and nothing moved, when the
-- epoch is not the slot's current owner epoch.
-- Due times are stored rounded up to the ms and a message is due when its
-- score is at most Redis's ms rounded down: never before its instant.
local multi = ARGV[1] == 'M'

-- mode_of splits a section's mode argument into its mode and the most
-- events its slots' logs keep (0: no log).
local function mode_of(s)
  if #s == 1 then return s, 0 end
  return string.sub(s, 1, 1), tonumber(string.sub(s, 3))
end
-- kb[g] is the index in KEYS before group g's keys.
local kb = {}
-- single: the one section's flow descriptor, its keys per group and its
-- topic keys; fenced when one more key (the epoch) follows one group.
local single_flow, single_kpg, single_tk, fenced
if not multi then
  single_flow = flow_parse(ARGV[6])
  single_kpg = (single_flow and single_flow.grouped) and 8 or 4
  local _, ev = mode_of(ARGV[1])
  if ev > 0 then single_kpg = single_kpg + 1 end
  single_tk = 0
  if single_flow and (single_flow.tiv > 0 or single_flow.tconc > 0) then single_tk = 1 + single_flow.nprep end
  fenced = (#KEYS - single_tk) % single_kpg == 1
  if fenced then
    local refused = fence(KEYS[#KEYS], ARGV[#ARGV])
    if refused then return refused end
  end
end
local now, now_us = now_ms()
-- Messages moved by this call so far: the salt of their delivery tokens.
local salt = 0

-- State per group g (over the whole call: a section owns a range of g), in
-- arrays indexed by g (no table per entry: the interpreter, not the
-- commands, is most of this script's cost).
-- bid/bsc/bnum[g] hold the unblocked due entries of the last window (id,
-- score as Redis wrote it, score as a number), not yet taken from ptr[g]
-- on. blocked[g] counts the entries left in front of the next window
-- (blocked ones stay in store, taken ones leave it). last[g] is the score
-- the last window reached when it was full of due entries (full[g]): the
-- group may hold unread entries after it, so nothing after it may be taken
-- elsewhere. after[g] is the first unblocked entry not yet due that a
-- time-based window met: the group's head once its buffer is taken.
-- npick[g]: entries of group g picked in a round (from ptr[g] on).
-- Group g's keys are KEYS[kb[g]+1] (store), +2 (prepare), +3 (msg), +4
-- (delayed), and in a grouped section +5..+8 (gq, gocc, gturn, grate);
-- in a section with an event log, lkg[g] holds its events key (as
-- lifelib.lua's life keys, for life_event).
local gmax, taken, blocked, full, last, after = {}, {}, {}, {}, {}, {}
local bid, bsc, bnum, ptr, npick = {}, {}, {}, {}, {}
-- ended[g]: group g's last window reached the end of what it reads (the
-- store, or a priority bound); seen_busy[g]: some entry it read was blocked.
local ended, seen_busy = {}, {}
local lkg = {}

-- The section being fetched (set by section).
local time_based, window, window_s, upto, upto_n, from

local function better(a, b)
  if time_based then return a < b end
  return a > b
end

local function read(g)
  local due
  if time_based then
    -- Read by rank, not up to now: the entries after the due ones tell
    -- the head without another read.
    due = redis.call('ZRANGE', KEYS[kb[g] + 1], '-inf', '+inf', 'BYSCORE', 'LIMIT', string.format('%d', blocked[g]), window_s, 'WITHSCORES')
  else
    due = redis.call('ZRANGE', KEYS[kb[g] + 1], '+inf', from, 'BYSCORE', 'REV', 'LIMIT', string.format('%d', blocked[g]), window_s, 'WITHSCORES')
  end
  local cnt = #due / 2
  local ids, scs, nums = {}, {}, {}
  bid[g], bsc[g], bnum[g], ptr[g] = ids, scs, nums, 1
  full[g] = cnt == window and blocked[g] < 1024
  ended[g] = cnt < window
  if cnt == 0 then return end
  local all = {}
  for j = 1, cnt do all[j] = due[2 * j - 1] end
  local busy = redis.call('ZMSCORE', KEYS[kb[g] + 2], unpack(all))
  for j = 1, cnt do
    local num = tonumber(due[2 * j])
    if busy[j] then seen_busy[g] = true end
    if time_based and num > upto_n then
      -- Not due (or past the bound): neither this entry nor any after it.
      full[g] = false
      if not busy[j] and not after[g] then after[g] = due[2 * j] end
    elseif busy[j] then
      blocked[g] = blocked[g] + 1
    else
      local k = #ids + 1
      ids[k], scs[k], nums[k] = all[j], due[2 * j], num
    end
    if full[g] then last[g] = num end
  end
end

-- A binary heap of the groups that may give the next message, ordered by
-- their next candidate (score, then group): picking costs log(G) each.
local heap, hn = {}, 0
local cut
local key = {}
local function cand(g)
  if taken[g] + npick[g] >= gmax[g] then return nil end
  local num = bnum[g][ptr[g] + npick[g]]
  if num and (not cut or not better(cut, num)) then return num end
  return nil
end
local function less(a, b)
  local ka, kb = key[a], key[b]
  if ka ~= kb then return better(ka, kb) end
  return a < b
end
local function sift_down(i)
  while true do
    local l, m = 2 * i, i
    if l <= hn and less(heap[l], heap[m]) then m = l end
    if l + 1 <= hn and less(heap[l + 1], heap[m]) then m = l + 1 end
    if m == i then return end
    heap[i], heap[m] = heap[m], heap[i]
    i = m
  end
end
local function push(g)
  hn = hn + 1
  heap[hn] = g
  local i = hn
  while i > 1 do
    local p = math.floor(i / 2)
    if not less(heap[i], heap[p]) then return end
    heap[i], heap[p] = heap[p], heap[i]
    i = p
  end
end

-- Heads: the first unblocked entry left, from what was read when possible.
-- (upto_i is a string: Redis formats a Lua number argument slowly.)
local function range(g, upto_i)
  if time_based then
    return redis.call('ZRANGE', KEYS[kb[g] + 1], '0', upto_i, 'WITHSCORES')
  end
  return redis.call('ZRANGE', KEYS[kb[g] + 1], '0', upto_i, 'REV', 'WITHSCORES')
end

-- section_keys returns how many keys a section of G groups with flow
-- descriptor fl and events max ev takes: in all, per group, and for the
-- topic's limits.
local function section_keys(G, fl, ev)
  local e = ev > 0 and 1 or 0
  if not fl then return (4 + e) * G, 4 + e, 0 end
  local kpg = (fl.grouped and 8 or 4) + e
  local tk = 0
  if fl.tiv > 0 or fl.tconc > 0 then tk = 1 + fl.nprep end
  return kpg * G + tk, kpg, tk
end

-- section fetches groups g1..g2 as one fetch whose arguments start at
-- ARGV[a] (mode, n, lease, window, bound, flow, then the groups' maxima
-- and, with mode 2, their checks) and whose keys follow KEYS[kbase], and
-- returns its reply.
local function section(g1, g2, a, kbase)
  local G = g2 - g1 + 1
  local mode, evmax = mode_of(ARGV[a])
  local with_delayed = mode == '2'
  local ahead = mode == '3'
  time_based = mode == '1' or ahead
  local n = tonumber(ARGV[a + 1])
  local fl = flow_parse(ARGV[a + 5])
  local nkeys, kpg = section_keys(G, fl, evmax)
  for g = g1, g2 do kb[g] = kbase + kpg * (g - g1) end
  if evmax > 0 then
    for g = g1, g2 do lkg[g] = { events = KEYS[kb[g] + kpg] } end
  end
  local tk = kbase + kpg * G -- topic keys follow: tflow, then prepare sets
  local lease = tonumber(ARGV[a + 2])
  window = math.min(math.max(tonumber(ARGV[a + 3]), 1), MCHUNK)
  local bound = ARGV[a + 4]
  -- Numbers go to Redis as strings made here with integer formatting: Redis
  -- 7.0 formats a Lua number argument with printf's %.17g, whose cost for
  -- 13- to 16-digit values shows in profiles of this script.
  local deadline = string.format('%d', math.floor(now / 1000) + lease)
  upto, from = string.format('%d', now), '-inf'
  if bound ~= '' then
    if not time_based then
      from = bound
    elseif ahead or tonumber(bound) < now then
      upto = bound
    end
  end
  window_s = string.format('%d', window)
  upto_n = tonumber(upto)
  for g = g1, g2 do
    gmax[g], taken[g], blocked[g], full[g], ptr[g] = tonumber(ARGV[a + 5 + g - g1 + 1]), 0, 0, true, 1
    ended[g], seen_busy[g] = false, false
    bid[g], bsc[g], bnum[g] = {}, {}, {}
  end

  -- Delayed priority messages whose time has come enter store at the score
  -- their envelope keeps (the priority, or a retry's rank), so they compete
  -- by priority from then on. dhead[g] is the earliest one left. Only due
  -- entries are read (by score), so a large delayed set costs nothing here.
  local dhead = {}
  if with_delayed then
    for g = g1, g2 do
      dhead[g] = -3
      if ARGV[a + 5 + G + g - g1 + 1] == '1' then
        for _ = 1, 16 do
          local ids = redis.call('ZRANGE', KEYS[kb[g] + 4], '-inf', upto, 'BYSCORE', 'LIMIT', '0', '256')
          if #ids > 0 then
            local envs = redis.call('HMGET', KEYS[kb[g] + 3], unpack(ids))
            local zargs = {}
            for j = 1, #ids do
              -- Without an envelope the entry is only dropped.
              if envs[j] then
                zargs[#zargs + 1] = fmt_score(env_decode(envs[j]).score)
                zargs[#zargs + 1] = ids[j]
              end
            end
            redis.call('ZREM', KEYS[kb[g] + 4], unpack(ids))
            if #zargs > 0 then redis.call('ZADD', KEYS[kb[g] + 1], unpack(zargs)) end
          end
          if #ids < 256 then break end
        end
        local first = redis.call('ZRANGE', KEYS[kb[g] + 4], '0', '0', 'WITHSCORES')
        dhead[g] = first[2] or -1
      end
    end
  end
  local expired_n = 0

  -- out holds nowUs, G, D, the heads, the delayed heads and the expired
  -- count (filled in at the end), then the moved messages. o is the
  -- offset of group g's head in out: 3 + g - g1 + 1.
  local o = 4 - g1
  local D = with_delayed and G or 0
  local out = { now_us, G, D }
  for g = 1, G do out[3 + g] = -1 end
  for g = 1, D do out[3 + G + g] = -3 end
  local NOUT = 4 + G + D
  out[NOUT], out[NOUT + 1], out[NOUT + 2] = 0, 0, 0
  local moved = 0

  -- The topic's limits cap n (a single node: tflow is this node's).
  local tat
  if fl and fl.tiv > 0 then
    tat = redis.call('HGET', KEYS[tk + 1], 'tat')
    local room, nx = gcra_room(tat, now_us, fl.tiv, fl.ttol)
    if room < n then n = room end
    if room == 0 then out[NOUT + 1] = math.ceil(nx / 1000) end
  end
  if fl and fl.tconc > 0 then
    local inflight = 0
    for i = 1, fl.nprep do inflight = inflight + redis.call('ZCARD', KEYS[tk + 1 + i]) end
    local room = math.max(fl.tconc - inflight, 0)
    if room < n then n = room end
    if room == 0 then
      redis.call('HSET', KEYS[tk + 1], 'blocked', '1')
      out[NOUT + 1] = -1
    end
  end

  if fl and fl.grouped then
    -- emit puts one message of group g into the reply and returns its
    -- prepare score (grouplib.lua adds them to prepare, per slot group).
    local function emit(g, id, env, score)
      local _, _, fails = struct.unpack('>BBH', env)
      local token = new_token(now_us, salt, fails + 1, false)
      if evmax > 0 then life_event(lkg[g], evmax, 'delivered', id, token % 1000) end
      out[#out + 1] = g - g1 + 1
      out[#out + 1] = id
      out[#out + 1] = env
      out[#out + 1] = token
      out[#out + 1] = type(score) == 'number' and fmt_score(score) or score
      salt = salt + 1
      return deadline .. string.format('%06d', token)
    end
    local heads = {}
    local x = { g1 = g1, g2 = g2, n = n, now = now, now_us = now_us, time_based = time_based, flow = fl,
      window = window, heads = heads, emit = emit, kb = kb, max = gmax }
    if evmax > 0 then
      -- grouplib.lua's commit tells of each message it drops as expired.
      x.on_expired = function(g, id, e) life_event(lkg[g], evmax, 'expired', id, e.fails) end
    end
    local gwait
    moved, gwait = gfetch(x)
    for g = g1, g2 do out[o + g] = heads[g] end
    out[NOUT] = x.expired
    if gwait then out[NOUT + 2] = gwait end
    if fl.tiv > 0 and moved > 0 then
      redis.call('HSET', KEYS[tk + 1], 'tat', string.format('%d', math.ceil(gcra_take(tat, now_us, fl.tiv, moved))))
    end
    for g = g1, g1 + D - 1 do out[o + G + g] = dhead[g] end
    return out, nkeys
  end

  for _ = 1, 64 do
    if moved >= n then break end
    for g = g1, g2 do
      if full[g] and taken[g] < gmax[g] and ptr[g] > #bid[g] then read(g) end
    end
    -- The cut: the earliest score up to which some group may hold entries
    -- not read yet, so nothing after it may be taken; entries tied with it
    -- may.
    cut = nil
    for g = g1, g2 do
      if full[g] and taken[g] < gmax[g] and (not cut or better(last[g], cut)) then cut = last[g] end
    end
    hn = 0
    for g = g1, g2 do
      npick[g] = 0
      local k = cand(g)
      if k then
        key[g] = k
        push(g)
      end
    end
    -- Pick in consume order; a group's picks are a run from its ptr.
    local order = {}
    while hn > 0 and moved + #order < n do
      local g = heap[1]
      order[#order + 1] = g
      npick[g] = npick[g] + 1
      local k = cand(g)
      if k then
        key[g] = k
      else
        heap[1] = heap[hn]
        hn = hn - 1
      end
      sift_down(1)
    end
    -- Move the picks: per group one ZREM, one HMGET and one ZADD.
    local envs, used, zargs = {}, {}, {}
    for g = g1, g2 do
      if npick[g] > 0 then
        local from_i, to_i = ptr[g], ptr[g] + npick[g] - 1
        redis.call('ZREM', KEYS[kb[g] + 1], unpack(bid[g], from_i, to_i))
        envs[g] = redis.call('HMGET', KEYS[kb[g] + 3], unpack(bid[g], from_i, to_i))
        used[g], zargs[g] = 0, {}
      end
    end
    for _, g in ipairs(order) do
      local j = used[g] + 1
      used[g] = j
      local i = ptr[g] + j - 1
      -- Without an envelope (never so under the invariants) the entry is
      -- only dropped from store.
      local env = envs[g][j]
      local _, tf, fails
      if env then
        _, tf, fails = struct.unpack('>BBH', env)
        -- A version 2 envelope with options (tf >= 16) may carry an expiry:
        -- an expired message is dropped, never delivered.
        -- A message taken ahead of its instant is judged at that instant
        -- (it is handed over then, or not at all).
        if tf >= 16 and string.byte(env, 1) == 2 and expired(env_decode(env), ahead and math.max(now, bnum[g][i]) or now) then
          redis.call('HDEL', KEYS[kb[g] + 3], bid[g][i])
          expired_n = expired_n + 1
          if evmax > 0 then life_event(lkg[g], evmax, 'expired', bid[g][i], fails) end
          env = nil
        end
      end
      if env then
        -- A message not due yet (a lookahead fetch) gets a held token
        -- (lib.lua): until confirm.lua hands it over it counts as waiting.
        local held = ahead and bnum[g][i] > now
        local token = new_token(now_us, salt, fails + 1, held)
        if evmax > 0 and not held then life_event(lkg[g], evmax, 'delivered', bid[g][i], token % 1000) end
        local z = zargs[g]
        z[#z + 1] = deadline .. string.format('%06d', token)
        z[#z + 1] = bid[g][i]
        out[#out + 1] = g - g1 + 1
        out[#out + 1] = bid[g][i]
        out[#out + 1] = env
        out[#out + 1] = token
        out[#out + 1] = bsc[g][i]
        moved = moved + 1
        salt = salt + 1
      end
    end
    for g = g1, g2 do
      if npick[g] > 0 then
        if #zargs[g] > 0 then redis.call('ZADD', KEYS[kb[g] + 2], unpack(zargs[g])) end
        ptr[g] = ptr[g] + npick[g]
        taken[g] = taken[g] + npick[g]
      end
    end
    if #order == 0 then
      -- Nothing more to take unless a group whose window held only blocked
      -- entries reads on.
      local more = false
      for g = g1, g2 do
        if full[g] and taken[g] < gmax[g] and ptr[g] > #bid[g] then more = true end
      end
      if not more then break end
    end
  end

  for g = g1, g2 do
    if ptr[g] <= #bid[g] then
      out[o + g] = bsc[g][ptr[g]]
    elseif after[g] then
      out[o + g] = after[g]
    elseif ended[g] and not seen_busy[g] and from == '-inf' then
      -- Every entry there was is taken: the store is empty (-1), known
      -- without another read.
    else
      local look = range(g, '0')
      local busy = look[1] and redis.call('ZMSCORE', KEYS[kb[g] + 2], look[1])
      if busy and busy[1] then
        look = range(g, '63')
        local ids = {}
        for i = 1, #look, 2 do ids[#ids + 1] = look[i] end
        busy = redis.call('ZMSCORE', KEYS[kb[g] + 2], unpack(ids))
      end
      for i = 1, #look, 2 do
        if not busy[(i + 1) / 2] then
          out[o + g] = look[i + 1]
          break
        end
      end
      if out[o + g] == -1 and #look > 0 then out[o + g] = -2 end
    end
  end
  out[NOUT] = expired_n
  if fl and fl.tiv > 0 and moved > 0 then
    redis.call('HSET', KEYS[tk + 1], 'tat', string.format('%d', math.ceil(gcra_take(tat, now_us, fl.tiv, moved))))
  end
  for g = g1, g1 + D - 1 do out[o + G + g] = dhead[g] end
  return out, nkeys
end

if not multi then
  local G = fenced and 1 or (#KEYS - single_tk) / single_kpg
  return (section(1, G, 1, 0))
end
local replies = {}
local g, a, kbase = 0, 3, 0
for s = 1, tonumber(ARGV[2]) do
  local G = tonumber(ARGV[a])
  local nargs = 7 + G
  local mode, ev = mode_of(ARGV[a + 1])
  if mode == '2' then nargs = nargs + G end
  local nkeys = section_keys(G, flow_parse(ARGV[a + 6]), ev)
  -- A failing section (a key of the wrong type) fails alone.
  local ok, res = pcall(section, g + 1, g + G, a + 1, kbase)
  if not ok then
    if type(res) == 'table' and res.err then
      res = { err = res.err }
    else
      res = { err = 'ERR fetch section ' .. s .. ': ' .. tostring(res) }
    end
  end
  replies[s] = res
  g, a, kbase = g + G, a + nargs, kbase + nkeys
end
return replies
