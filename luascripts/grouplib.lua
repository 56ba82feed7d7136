-- grouplib.lua: the fetch of a topic whose messages carry groups
-- (fetch.lua's grouped sections), prepended after lib.lua's and
-- flowlib.lua's definitions, which it uses.
--
-- Every slot of such a section is a set of lanes: one per group whose turn
-- has come (gturn score <= now) and one for the slot's store (the
-- messages without a group, and grouped ones that came back to store: a
-- retry, a requeue, a re-send while in flight). Lanes are served in turn,
-- one message each, oldest turn first: a lane served goes behind every
-- lane that was ready when the call began, so a group with a long backlog
-- delays another group's message by at most one turn. Within a group its
-- messages go in the topic's order (gq's keys). A group at its place limit
-- (WithGroupConcurrency) or rate (WithGroupRateLimit) leaves the rotation
-- until a place frees (gfree, from the end of a delivery) or its rate
-- allows the next start (its gturn score says when).

-- GBUSY_RECHECK (ms): a group whose head's id is still in flight (a
-- re-send behind a removed delivery) is looked at again after it.
local GBUSY_RECHECK = 5000
-- GBLOCK_RECHECK (ms): a group at its place limit comes back when the end
-- of a delivery frees a place (gfree). A place no end frees (an ack that
-- named no flow keys, one while the topic had no group places) is found
-- by gvalidate: a group blocked this long is looked at again, as every
-- blocked group is once the topic no longer limits places. (The fetcher
-- looks at a slot whose work is all blocked again after as long: engine's
-- blockedRecheck.)
local GBLOCK_RECHECK = 5000

-- lane_less orders lanes by turn, then slot group, then name.
local function lane_less(a, b)
  if a.key ~= b.key then return a.key < b.key end
  if a.g ~= b.g then return a.g < b.g end
  return a.grp < b.grp
end

-- lheap_push and lheap_pop keep h (h.n entries) a binary heap of lanes.
local function lheap_push(h, l)
  h.n = h.n + 1
  local i = h.n
  h[i] = l
  while i > 1 do
    local p = math.floor(i / 2)
    if not lane_less(h[i], h[p]) then return end
    h[i], h[p] = h[p], h[i]
    i = p
  end
end

local function lheap_pop(h)
  local top = h[1]
  h[1] = h[h.n]
  h[h.n] = nil
  h.n = h.n - 1
  local i = 1
  while true do
    local l, m = 2 * i, i
    if l <= h.n and lane_less(h[l], h[m]) then m = l end
    if l + 1 <= h.n and lane_less(h[l + 1], h[m]) then m = l + 1 end
    if m == i then return top end
    h[i], h[m] = h[m], h[i]
    i = m
  end
end

-- A slot group's keys are KEYS[b + 1] (store), + 2 (prepare), + 3 (msg),
-- + 5 (gq), + 6 (gocc), + 7 (gturn) and + 8 (grate), b = x.kb[g]
-- (fetch.lua's key bases).

-- gvalidate drops group grp's places that no message holds and returns how
-- many are held. A place is held by a delivery in flight (in prepare with a
-- delivery's token: a removed delivery's tombstone, token 0, holds none)
-- or by a retry waiting for its backoff (in store, or a priority one in
-- the delayed set), of a message of group grp. Every script that ends such
-- a state frees the place in the same call (ack, death, expiry, removal);
-- this finds the ones ended by a caller that named no flow keys (an ack
-- while the topic had no group places, a process with older limits). A
-- message whose body exists is not enough: a removed or acked id may have
-- been sent again and wait in its group, holding nothing.
local function gvalidate(x, b, grp, limit)
  local held = redis.call('ZRANGE', KEYS[b + 6], '[' .. grp .. '\0', '(' .. grp .. '\1', 'BYLEX', 'LIMIT', '0', string.format('%d', limit + 64))
  if #held == 0 then return 0 end
  local ids = {}
  for i, m in ipairs(held) do ids[i] = string.sub(m, #grp + 2) end
  local pre = mcall('ZMSCORE', KEYS[b + 2], ids)
  local envs = mcall('HMGET', KEYS[b + 3], ids)
  local live, drop = 0, {}
  for i, id in ipairs(ids) do
    local env, holds = envs[i], false
    if env and string.byte(env, 1) == 2 and string.byte(env, 2) >= 16 and env_decode(env).grp == grp then
      if pre[i] then
        holds = token_of(pre[i]) ~= 0
      else
        holds = redis.call('ZSCORE', KEYS[b + 1], id) ~= false
          or (not x.time_based and redis.call('ZSCORE', KEYS[b + 4], id) ~= false)
      end
    end
    if holds then live = live + 1 else drop[#drop + 1] = held[i] end
  end
  if #drop > 0 then mcall('ZREM', KEYS[b + 6], drop) end
  if #held == limit + 64 then
    return redis.call('ZLEXCOUNT', KEYS[b + 6], '[' .. grp .. '\0', '(' .. grp .. '\1')
  end
  return live
end

-- glimits works out once how many more starts group lane L may make.
local function glimits(x, L)
  local f, b = x.flow, x.kb[L.g]
  L.croom, L.rroom = 1e18, 1e18
  if f.gconc > 0 and not x.roomy[L.g] then
    local live = redis.call('ZLEXCOUNT', KEYS[b + 6], '[' .. L.grp .. '\0', '(' .. L.grp .. '\1')
    if live >= f.gconc then live = gvalidate(x, b, L.grp, f.gconc) end
    L.croom = f.gconc - live
  end
  if f.giv > 0 then
    L.tat = redis.call('HGET', KEYS[b + 8], L.grp)
    L.tat0 = L.tat
    L.rroom = gcra_room(L.tat, x.now_us, f.giv, f.gtol)
  end
end

-- pick_group picks the next message of group lane L, reading only (commit
-- writes); false when the lane can give none now (L.stop says why).
local function pick_group(x, L)
  local b, grp = x.kb[L.g], L.grp
  if not L.croom then glimits(x, L) end
  if L.croom <= 0 then L.stop = 'b'; return false end
  if L.rroom <= 0 then L.stop = 'r'; return false end
  if not L.buf or L.pos > #L.buf then
    if L.ended then L.stop = 'e'; return false end
    local from = L.last and ('(' .. L.last) or ('[' .. grp .. '\0')
    local w = math.min(math.max(x.window, 2), MCHUNK)
    L.buf = redis.call('ZRANGE', KEYS[b + 5], from, '(' .. grp .. '\1', 'BYLEX', 'LIMIT', '0', string.format('%d', w))
    L.pos = 1
    L.ended = #L.buf < w
    if #L.buf == 0 then L.stop = 'e'; return false end
    L.last = L.buf[#L.buf]
  end
  local m = L.buf[L.pos]
  local _, key, id = gparse(m)
  if x.time_based and key > x.now then L.stop = 'due'; L.next = key; return false end
  L.pos = L.pos + 1
  L.croom, L.rroom = L.croom - 1, L.rroom - 1
  x.picks[#x.picks + 1] = { L = L, m = m, id = id, at = L.pos - 1 }
  return true
end

-- pick_store picks the next due message of the store lane L (whose id is
-- not in flight), reading only; false when it has none.
local function pick_store(x, L)
  local b = x.kb[L.g]
  if L.pos and L.pos <= #L.buf then
    L.pos = L.pos + 1
    x.picks[#x.picks + 1] = { L = L, id = L.buf[L.pos - 1], score = L.sc[L.pos - 1] }
    return true
  end
  while not L.ended do
    local w = math.min(math.max(x.window, 2), MCHUNK)
    local skip, ws = string.format('%d', L.skip), string.format('%d', w)
    local due
    if x.time_based then
      due = redis.call('ZRANGE', KEYS[b + 1], '-inf', string.format('%d', x.now), 'BYSCORE', 'LIMIT', skip, ws, 'WITHSCORES')
    else
      due = redis.call('ZRANGE', KEYS[b + 1], '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', skip, ws, 'WITHSCORES')
    end
    L.ended = #due < 2 * w
    L.buf, L.sc, L.pos = {}, {}, 1
    if #due == 0 then break end
    local ids = {}
    for j = 1, #due, 2 do ids[#ids + 1] = due[j] end
    local busy = redis.call('ZMSCORE', KEYS[b + 2], unpack(ids))
    -- Picked entries stay in store until commit: the next window reads on
    -- after all of this one.
    L.skip = L.skip + #ids
    for j = 1, #ids do
      if not busy[j] then L.buf[#L.buf + 1], L.sc[#L.sc + 1] = ids[j], due[2 * j] end
    end
    if #L.buf > 0 then
      L.pos = 2
      x.picks[#x.picks + 1] = { L = L, id = L.buf[1], score = L.sc[1] }
      return true
    end
  end
  L.stop = 'e'
  return false
end

-- commit moves the picks of slot group g (in pick order): reads their
-- envelopes and whether their ids are in flight, one call each, then
-- decides each (deliver, drop as stale or expired, route a grouped one
-- found in store to its group) and writes with one call per command.
-- Delivered picks get p.deliver (emitted by gfetch in pick order); each
-- pick dropped as expired is told to x.on_expired(g, id, envelope) when the
-- caller gives one (fetch.lua's event log).
local function commit(x, g, picks)
  local b, tb, now = x.kb[g], x.time_based, x.now
  local f = x.flow
  -- A group's pick whose id is in flight (a re-send behind a removed
  -- delivery) stops its lane there: its later picks wait too (order).
  local gids, gp = {}, {}
  for _, p in ipairs(picks) do
    if p.m then gids[#gids + 1], gp[#gp + 1] = p.id, p end
  end
  if #gids > 0 then
    local busy = mcall('ZMSCORE', KEYS[b + 2], gids)
    for i, p in ipairs(gp) do
      if busy[i] and not p.L.busy_at then
        p.L.busy_at, p.L.stop, p.L.pos, p.L.ended = p.at, 'busy', p.at, false
      end
    end
  end
  local live, ids = {}, {}
  for _, p in ipairs(picks) do
    if not (p.m and p.L.busy_at and p.at >= p.L.busy_at) then
      live[#live + 1], ids[#ids + 1] = p, p.id
    end
  end
  if #live == 0 then return end
  local envs = mcall('HMGET', KEYS[b + 3], ids)
  local zrem_q, zrem_s, hdel, zadd_occ = {}, {}, {}, {}
  for i, p in ipairs(live) do
    local env = envs[i]
    if p.m then
      -- From a group's queue: its entry leaves it, whatever it was.
      zrem_q[#zrem_q + 1] = p.m
      local e = env and env_decode(env)
      local grp = p.L.grp
      if e and e.grp == grp and gkey(tb, e.orig) == string.sub(p.m, #grp + 2, #grp + 17) then
        if expired(e, now) then
          hdel[#hdel + 1] = p.id
          x.expired = x.expired + 1
          if x.on_expired then x.on_expired(g, p.id, e) end
        else
          p.deliver, p.env, p.score = true, env, e.score
          if f.gconc > 0 then
            zadd_occ[#zadd_occ + 1] = 0
            zadd_occ[#zadd_occ + 1] = grp .. '\0' .. p.id
          end
          p.L.took = (p.L.took or 0) + 1
        end
      end
      -- Otherwise stale: its message was sent again into another place,
      -- or is gone.
    else
      zrem_s[#zrem_s + 1] = p.id
      local e
      if env and string.byte(env, 1) == 2 and string.byte(env, 2) >= 16 then e = env_decode(env) end
      if e and expired(e, now) then
        hdel[#hdel + 1] = p.id
        x.expired = x.expired + 1
        if x.on_expired then x.on_expired(g, p.id, e) end
        -- A retry that kept its group's place expired while it waited:
        -- the place frees with it (gfetch, after the turns are written).
        if e.grp then x.frees[#x.frees + 1] = { g = g, grp = e.grp, id = p.id } end
      elseif e and e.grp and not (f.gconc > 0 and redis.call('ZSCORE', KEYS[b + 6], e.grp .. '\0' .. p.id)) then
        -- A grouped message back in store waits in its group again (a
        -- retry that kept its group's place is delivered as it is).
        local m = gmember(e.grp, tb, e.orig, p.id)
        redis.call('ZADD', KEYS[b + 5], 0, m)
        local _, key = gparse(m)
        gturn_offer(KEYS[b + 7], e.grp, gready(tb, key, now), now)
      elseif env then
        p.deliver, p.env = true, env
        p.L.took = (p.L.took or 0) + 1
      end
    end
  end
  if #zrem_q > 0 then mcall('ZREM', KEYS[b + 5], zrem_q) end
  if #zrem_s > 0 then mcall('ZREM', KEYS[b + 1], zrem_s) end
  if #hdel > 0 then mcall('HDEL', KEYS[b + 3], hdel) end
  if #zadd_occ > 0 then mcall('ZADD', KEYS[b + 6], zadd_occ, 2) end
end

-- ghead_of returns slot k's head for the fetcher: the earliest time
-- something may be fetched (time-based) or the best priority ready, -1
-- when nothing waits, -2 when all that waits is blocked (then gwait, a
-- group's next rate start in ms, when one is known, else nil).
local function ghead_of(x, g)
  local b, tb, now = x.kb[g], x.time_based, x.now
  local best
  local look
  if tb then
    look = redis.call('ZRANGE', KEYS[b + 1], '0', '63', 'WITHSCORES')
  else
    look = redis.call('ZRANGE', KEYS[b + 1], '0', '63', 'REV', 'WITHSCORES')
  end
  if #look > 0 then
    local ids = {}
    for j = 1, #look, 2 do ids[#ids + 1] = look[j] end
    local busy = redis.call('ZMSCORE', KEYS[b + 2], unpack(ids))
    for j = 1, #ids do
      if not busy[j] then best = tonumber(look[2 * j]); break end
    end
  end
  local blocked = #look > 0 and not best
  local turns = redis.call('ZRANGE', KEYS[b + 7], '-inf', '+inf', 'BYSCORE', 'LIMIT', '0', '3', 'WITHSCORES')
  local gwait
  for j = 1, #turns, 2 do
    local grp, sc = turns[j], tonumber(turns[j + 1])
    if grp ~= '' then
      if sc >= GBLOCKED then
        blocked = true
      elseif tb then
        if not best or sc < best then best = sc end
        break
      elseif sc <= now then
        local h = ghead(KEYS[b + 5], grp)
        if h[1] then
          local _, key = gparse(h[1])
          local p = 9007199254740992 - key
          if not best or p > best then best = p end
        end
        break
      else
        blocked, gwait = true, sc
        break
      end
    end
  end
  if best then return best end
  if blocked then return -2, gwait end
  return -1
end

-- gfetch moves up to x.n messages of the grouped section's slot groups
-- x.g1..x.g2 (keys from x.kb; at most x.max[g] of group g) to prepare
-- through x.emit, in turn, and fills x.heads[g]. Lanes are served one pick
-- a turn with reads only, then each slot group's picks are committed with
-- one call per command (commit), so a message costs about one read of its
-- group's queue. It returns how many it moved and the earliest group rate
-- start (ms) a blocked slot waits for (nil: none).
local function gfetch(x)
  local now = x.now
  local nowi = string.format('%d', now)
  local h = { n = 0 }
  local lanes = {}
  x.expired, x.picks, x.frees, x.roomy = 0, {}, {}, {}
  for g = x.g1, x.g2 do
    local b = x.kb[g]
    -- A group holds at most the slot's places and takes at most x.max[g]
    -- now: when they add up to no more than the limit, no group can reach
    -- it in this call, and one ZCARD saves a count per group (glimits).
    if x.flow.gconc > x.max[g] and redis.call('ZCARD', KEYS[b + 6]) + x.max[g] <= x.flow.gconc then
      x.roomy[g] = true
    end
    local ready = redis.call('ZRANGE', KEYS[b + 7], '-inf', nowi, 'BYSCORE', 'LIMIT', '0', string.format('%d', x.n + 1), 'WITHSCORES')
    local sturn = 0
    for j = 1, #ready, 2 do
      if ready[j] == '' then
        sturn = tonumber(ready[j + 1])
      else
        lanes[#lanes + 1] = { g = g, grp = ready[j], key = tonumber(ready[j + 1]) }
      end
    end
    lanes[#lanes + 1] = { g = g, grp = '', key = sturn, store = true, skip = 0 }
    local upto_b, nb = string.format('%d', GBLOCKED + now - GBLOCK_RECHECK), '8'
    if x.flow.gconc == 0 then upto_b, nb = '+inf', string.format('%d', x.n + 1) end
    local blocked = redis.call('ZRANGE', KEYS[b + 7], string.format('%d', GBLOCKED), upto_b, 'BYSCORE', 'LIMIT', '0', nb, 'WITHSCORES')
    for j = 1, #blocked, 2 do
      lanes[#lanes + 1] = { g = g, grp = blocked[j], key = tonumber(blocked[j + 1]) - GBLOCKED }
    end
  end
  for _, l in ipairs(lanes) do lheap_push(h, l) end
  local picked, seq = 0, 0
  local per = {}
  while picked < x.n and h.n > 0 do
    local L = lheap_pop(h)
    local ok = false
    -- A slot group gives at most its own maximum (x.max).
    if (per[L.g] or 0) < x.max[L.g] then
      if L.store then ok = pick_store(x, L) else ok = pick_group(x, L) end
    end
    if ok then
      per[L.g] = (per[L.g] or 0) + 1
      picked = picked + 1
      seq = seq + 1
      L.served = true
      L.key = now + seq
      lheap_push(h, L)
    end
  end
  -- Commit each slot group's picks, then emit the delivered ones in pick
  -- order (prepare's entries, one ZADD per slot group).
  local by = {}
  for _, p in ipairs(x.picks) do
    local g = p.L.g
    by[g] = by[g] or {}
    by[g][#by[g] + 1] = p
  end
  for g, ps in pairs(by) do commit(x, g, ps) end
  local zargs, moved = {}, 0
  for _, p in ipairs(x.picks) do
    if p.deliver then
      local g = p.L.g
      zargs[g] = zargs[g] or {}
      local z = zargs[g]
      z[#z + 1] = x.emit(g, p.id, p.env, p.score)
      z[#z + 1] = p.id
      moved = moved + 1
    end
  end
  for g, z in pairs(zargs) do mcall('ZADD', KEYS[x.kb[g] + 2], z, 2) end
  -- The lanes' turns: served ones go behind, blocked ones wait. Per slot
  -- group one ZADD and one ZREM of gturn, one HSET of grate.
  local gadd, grem, gtat = {}, {}, {}
  local function add(t, g, ...)
    t[g] = t[g] or {}
    for _, v in ipairs({ ... }) do t[g][#t[g] + 1] = v end
  end
  for _, L in ipairs(lanes) do
    local g = L.g
    if L.store then
      if L.took then add(gadd, g, nowi, '') end
    else
      local sc
      if L.stop == 'b' then
        sc = GBLOCKED + now
      elseif L.stop == 'r' then
        local _, nx = gcra_room(gcra_take(L.tat0, x.now_us, x.flow.giv, L.took or 0), x.now_us, x.flow.giv, x.flow.gtol)
        sc = math.ceil(nx / 1000)
      elseif L.stop == 'busy' then
        sc = now + GBUSY_RECHECK
      elseif L.stop == 'due' then
        sc = L.next
      elseif L.stop == 'e' and not L.took then
        add(grem, g, L.grp)
      elseif L.served then
        local m = L.buf and L.buf[L.pos]
        if not m then m = ghead(KEYS[x.kb[g] + 5], L.grp)[1] end
        if m then
          local _, key = gparse(m)
          sc = math.max(gready(x.time_based, key, now), now)
        else
          add(grem, g, L.grp)
        end
      end
      if sc then add(gadd, g, string.format('%d', sc), L.grp) end
      if x.flow.giv > 0 and L.took then
        add(gtat, g, L.grp, string.format('%d', math.ceil(gcra_take(L.tat0, x.now_us, x.flow.giv, L.took))))
      end
    end
  end
  for g, t in pairs(gadd) do mcall('ZADD', KEYS[x.kb[g] + 7], t, 2) end
  for g, t in pairs(grem) do mcall('ZREM', KEYS[x.kb[g] + 7], t) end
  for g, t in pairs(gtat) do mcall('HSET', KEYS[x.kb[g] + 8], t, 2) end
  -- Places freed by commit (expired retries): after the lanes' turns, so
  -- a group blocked by the place comes back into the rotation (gfree)
  -- rather than being written back as blocked.
  for _, fr in ipairs(x.frees) do
    local b = x.kb[fr.g]
    if redis.call('ZREM', KEYS[b + 6], fr.grp .. '\0' .. fr.id) == 1 then
      gfree({ gq = KEYS[b + 5], gocc = KEYS[b + 6], gturn = KEYS[b + 7] }, x.time_based, fr.grp, fr.id, now, true)
    end
  end
  local gwait
  for g = x.g1, x.g2 do
    local hd, gw = ghead_of(x, g)
    x.heads[g] = hd
    if gw and (not gwait or gw < gwait) then gwait = gw end
  end
  return moved, gwait
end
