-- flowlib.lua: helpers of flow control (message groups, group and topic
-- limits), prepended like lib.lua's to the scripts that use them (after
-- lib.lua's definitions, so they may call those; lib.lua's never call
-- these).
--
-- Per topic slot, in the slot's hash tag (docs/flow-control.md):
--   gq    lex ZSET (every score 0) of the messages that wait in a group:
--         'group\0KEY\0id', KEY 16 digits: the due ms (time-based types)
--         or 2^53 - priority, so a group's messages sort in the topic's
--         order and a group's head is one ZRANGE BYLEX away
--   gocc  lex ZSET of 'group\0id': the messages that hold one of their
--         group's places (WithGroupConcurrency): a delivery in flight, or
--         a retry waiting for its backoff (it keeps its place); the script
--         that ends that state (ack, death, expiry, removal) frees it
--   gturn ZSET: group -> ms from which it may be served next (its head's
--         due time, its rate's next start, or GBLOCKED + ms while at its
--         place limit); the member '' is the turn of the slot's store
--   grate HASH: group -> GCRA theoretical arrival time (µs)
-- Per topic (single node only: a cluster asks permit.lua instead):
--   tflow HASH: 'tat' the topic rate's GCRA state (µs), 'blocked' set
--         while a fetch found the topic at its concurrency limit (the next
--         end of a delivery wakes the slot)

-- GBLOCKED: gturn scores from here on mark a group at its place limit
-- (GBLOCKED + the ms it was found so); below every due time plus it, and
-- exact in a double.
local GBLOCKED = 4503599627370496

-- gkey is a message's sort key in its group: 16 digits.
local function gkey(time_based, orig)
  if time_based then return string.format('%016d', orig) end
  return string.format('%016d', 9007199254740992 - orig)
end

local function gmember(grp, time_based, orig, id)
  return grp .. '\0' .. gkey(time_based, orig) .. '\0' .. id
end

-- gparse splits a gq member into group, key (a number) and id.
local function gparse(m)
  local i = string.find(m, '\0', 1, true)
  return string.sub(m, 1, i - 1), tonumber(string.sub(m, i + 1, i + 16)), string.sub(m, i + 18)
end

-- ghead returns the first gq member of group grp (nil when none).
local function ghead(gq, grp, n)
  return redis.call('ZRANGE', gq, '[' .. grp .. '\0', '(' .. grp .. '\1', 'BYLEX', 'LIMIT', '0', n or '1')
end

-- gready is when a group whose head has key key may be served: its due
-- time for time-based types (now when past), now for priority.
local function gready(time_based, key, now)
  if time_based and key > now then return key end
  return now
end

-- gturn_offer tells the rotation that group grp has a message ready at
-- ready (ms): the group enters it, or comes forward when it waited for a
-- later head; a group ready already keeps its turn, one at its place
-- limit stays blocked (an ack frees it). Returns ready when the group's
-- turn moved (the slot is to be woken), else nil.
local function gturn_offer(gturn, grp, ready, now)
  local cur = redis.call('ZSCORE', gturn, grp)
  if cur then
    cur = tonumber(cur)
    if cur >= GBLOCKED or cur <= now or cur <= ready then return nil end
  end
  -- Ready now: half a ms before it, so a group served in this ms (its turn
  -- is now) comes after this one (ties go by name).
  redis.call('ZADD', gturn, ready > now and ready or now - 0.5, grp)
  return ready
end

-- gfree releases the place id held in group grp (an ack, a death, a drop)
-- and, when the group waited at its place limit, puts it back in the
-- rotation at its head's time (held: the place is gone already, only the
-- group is looked at: gfree_all). Returns the score to wake the slot with
-- (the head's due ms, or its priority), or nil.
local function gfree(k, time_based, grp, id, now, held)
  if not held then redis.call('ZREM', k.gocc, grp .. '\0' .. id) end
  local cur = redis.call('ZSCORE', k.gturn, grp)
  if not cur or tonumber(cur) < GBLOCKED then return nil end
  local h = ghead(k.gq, grp)
  if not h[1] then
    redis.call('ZREM', k.gturn, grp)
    return nil
  end
  local _, key = gparse(h[1])
  local ready = gready(time_based, key, now)
  redis.call('ZADD', k.gturn, ready > now and ready or now - 0.5, grp)
  if time_based then return ready end
  return 9007199254740992 - key
end

-- gfree_id frees the place id holds in group grp, if it holds one, for a
-- script that ended the state holding it (remove.lua: a delivery removed
-- while in flight, a retry removed while it waited), and returns the
-- score to wake the slot with (gfree), or nil.
local function gfree_id(k, time_based, grp, id, now)
  if redis.call('ZREM', k.gocc, grp .. '\0' .. id) == 0 then return nil end
  return gfree(k, time_based, grp, id, now, true)
end

-- gturn_head offers group grp a turn at its head's time (gturn_offer) and
-- returns the score to wake the slot with, or nil: for a group whose head
-- waited behind a removed delivery of its id, once that delivery's
-- tombstone is gone (sweep.lua).
local function gturn_head(k, time_based, grp, now)
  local h = ghead(k.gq, grp)
  if not h[1] then return nil end
  local _, key = gparse(h[1])
  local ready = gturn_offer(k.gturn, grp, gready(time_based, key, now), now)
  if not ready then return nil end
  if time_based then return ready end
  return 9007199254740992 - key
end

-- gfree_all frees the places of several ended deliveries at once: frees
-- is a list of { group, id }. One ZREM takes every place, then each group
-- at its place limit is looked at once, as gfree would for its last place
-- (a group put back in the rotation by its first freed place is not
-- blocked for the next).
-- Returns the scores to wake the slot with (see gfree).
local function gfree_all(k, time_based, frees, now)
  if #frees == 0 then return {} end
  local members, groups, seen = {}, {}, {}
  for i = 1, #frees do
    local grp = frees[i][1]
    members[i] = grp .. '\0' .. frees[i][2]
    if not seen[grp] then
      seen[grp] = true
      groups[#groups + 1] = grp
    end
  end
  mcall('ZREM', k.gocc, members)
  -- One ZMSCORE finds the groups at their place limit: only those are
  -- looked at further (most acks end a delivery of a group below it).
  local cur = mcall('ZMSCORE', k.gturn, groups)
  local wakes = {}
  for i, grp in ipairs(groups) do
    if cur[i] and tonumber(cur[i]) >= GBLOCKED then
      local w = gfree(k, time_based, grp, nil, now, true)
      if w then wakes[#wakes + 1] = w end
    end
  end
  return wakes
end

-- topic_wake wakes the fetchers of a topic found at its concurrency limit
-- (tflow's 'blocked') once a delivery ended: one publish on the slot's
-- channel, whose payload 'f' makes them look.
local function topic_wake(tflow, cmd, channel)
  if redis.call('HDEL', tflow, 'blocked') == 1 and cmd ~= '' then
    redis.call(cmd, channel, 'f')
  end
end

-- gcra_room returns how many starts a GCRA of interval iv and tolerance
-- tol (µs) allows at now_us given its state tat (nil: none), and the µs
-- from which the next start is allowed when it allows none.
local function gcra_room(tat, now_us, iv, tol)
  local base = math.max(tonumber(tat) or 0, now_us)
  if base > now_us + tol then return 0, base - tol end
  return math.floor((now_us + tol - base) / iv) + 1, 0
end

-- gcra_take returns the state after k starts at now_us.
local function gcra_take(tat, now_us, iv, k)
  return math.max(tonumber(tat) or 0, now_us) + k * iv
end

-- flow_parse reads a fetch section's flow descriptor: '' for none, else
-- space-separated numbers: grouped (0/1), group places (0: none), group
-- rate interval and tolerance (µs; 0: none), topic rate interval and
-- tolerance (µs; 0: none), topic concurrency (0: none) and the number of
-- prepare keys that follow the tflow key (every slot of the topic).
local function flow_parse(s)
  if s == '' then return nil end
  local v = {}
  for x in string.gmatch(s, '%S+') do v[#v + 1] = tonumber(x) end
  return { grouped = v[1] == 1, gconc = v[2], giv = v[3], gtol = v[4], tiv = v[5], ttol = v[6], tconc = v[7], nprep = v[8] }
end

-- genter puts id, of group grp, in its group's queue (k.gq) at its sort
-- key (orig: its first due ms or priority) and offers the group a turn
-- (k.gturn): where a new grouped message waits (gsend_one) and where a
-- grouped flow parent goes once its children finished (flowrec.lua).
-- Returns the score to wake the slot with (the group's turn came
-- forward: its ready ms, or score for priority), or nil.
local function genter(k, time_based, grp, orig, score, id, now)
  local key = gkey(time_based, orig)
  redis.call('ZADD', k.gq, 0, grp .. '\0' .. key .. '\0' .. id)
  local ready = gturn_offer(k.gturn, grp, gready(time_based, tonumber(key), now), now)
  if not ready then return nil end
  if time_based then return ready end
  return score
end

-- gsend_one stores one message that carries a group (its options block
-- names it) or merges it into the waiting message of its id, as send_one
-- does for others (sendbatch.lua's result codes). k holds the slot's
-- store, prepare, msg, delayed, gq and gturn keys; now is Redis's ms and
-- now_up the same rounded up. A new message waits in its group's queue
-- (gq) and offers its group a turn; one whose id waits in store stays
-- there (a fetch moves it to its group once due: it may be a retry that
-- must not go early), one whose id waits in the delayed set goes to store
-- (it may be a retry holding its group's place), one whose id is in flight
-- waits in store behind that delivery (where ack.lua and rollback.lua look
-- for a re-send), and a priority message not to compete before a later
-- time waits in the delayed set. Returns the result code, the score to
-- wake the slot with (nil: none), and the delayed due time when it went to
-- the delayed set.
local function gsend_one(k, typ, id, score_arg, nonce, body, now, now_up, opts)
  local time_based = typ ~= 2
  local old, where, waiting
  local raw = redis.call('HGET', k.msg, id)
  if raw then
    old = env_decode(raw)
    if old.nonce == nonce then return 0 end
    waiting = redis.call('ZSCORE', k.store, id)
    if waiting then
      where = 's'
    elseif not time_based and redis.call('ZSCORE', k.delayed, id) then
      where = 'd'
    elseif old.grp and redis.call('ZREM', k.gq, gmember(old.grp, time_based, old.orig, id)) == 1 then
      where = 'g'
    elseif redis.call('ZSCORE', k.prepare, id) then
      where = 'p'
    end
  end
  local e = { typ = typ, fails = 0, first = now, nonce = nonce, err = '' }
  opt_decode(e, opts)
  if typ == 1 then
    if where == 's' then
      e.score = tonumber(waiting)
    elseif where == 'g' then
      e.score = old.score
    else
      local range = tonumber(score_arg)
      e.score = (range > 0 and now_up or now) + range
    end
  else
    e.score = tonumber(score_arg)
  end
  e.orig = e.score
  local result = 1
  if where == 's' or where == 'd' or where == 'g' then
    -- Merge into the waiting message: keep its history, take the new body
    -- and options (its group with them).
    e.first, e.fails, e.err, e.snz = old.first, old.fails, old.err, old.snz
    if typ == 1 then
      e.orig, result = old.orig, 2
    else
      result = 3
    end
  elseif where == 'p' then
    result = 4
  end
  redis.call('HSET', k.msg, id, env_encode(e, body))
  if typ == 2 and e.nbf and e.nbf > now then
    if where == 's' then redis.call('ZREM', k.store, id) end
    redis.call('ZADD', k.delayed, e.nbf, id)
    return result, nil, e.nbf
  end
  if where == 'd' then redis.call('ZREM', k.delayed, id) end
  -- A message merged into one that waited in the delayed set goes to
  -- store, as a send without a group does, not straight to its group: it
  -- may be a retry holding its group's place, which it keeps there (the
  -- fetch delivers it as it is, or moves one that holds none to its group).
  if where == 's' or where == 'p' or where == 'd' then
    if not (where == 's' and typ == 1) then redis.call('ZADD', k.store, e.score, id) end
    if where ~= 'p' and head_of(k.store, time_based) == id then return result, e.score end
    return result
  end
  return result, genter(k, time_based, e.grp, e.orig, e.score, id, now)
end

-- flow_group returns the group of the message whose envelope msg holds
-- for id (nil: none, or no envelope), and whether its type is time-based.
local function flow_group(msg, id)
  local env = redis.call('HGET', msg, id)
  if env and string.byte(env, 1) == 2 and string.byte(env, 2) >= 16 then
    local e = env_decode(env)
    return e.grp, e.typ ~= 2
  end
  return nil
end

-- flow_ended is told that a delivery of id (of group grp, nil for none)
-- ended with rollback_one's result r: a message that left its group (dead
-- 3, expired 5, superseded by a re-send 2) frees its place, and tflow
-- (the store key again: none) wakes a topic at its concurrency limit.
-- time_based: the message's type is.
local function flow_ended(fk, tflow, store, cmd, channel, time_based, grp, id, r, now)
  if grp and (r == 2 or r == 3 or r == 5) then
    local w = gfree(fk, time_based, grp, id, now)
    if w and cmd ~= '' then redis.call(cmd, channel, fmt_score(w)) end
  end
  if tflow ~= store then topic_wake(tflow, cmd, channel) end
end
