-- ack.lua: end deliveries as done, of one or more slots, of one or more
-- topics (a client's acks of all its topics share calls on a single node).
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[6g-5..6g] likewise
-- KEYS[3] -> msg HASH        | for group g (several groups on a single
-- KEYS[4] -> wake channel    | node only; groups may be of different topics)
-- KEYS[5] -> delayed ZSET    | (time-based topics, which have none, pass
--                            | their store key again: then no delayed set
--                            | is read)
-- KEYS[6] -> dead ZSET      /
-- KEYS[7] -> gq ZSET        \ a group of a topic under flow control (a
-- KEYS[8] -> gocc ZSET       | negative count below) has four more: its
-- KEYS[9] -> gturn ZSET      | slot's group keys (flowlib.lua), or store
-- KEYS[10] -> tflow HASH    /  again when it has no group places, and the
--                              topic's tflow (a single node with a topic
--                              concurrency; else the store key again)
-- KEYS[+1..+6] -> done HASH, doneq ZSET, events STREAM, waiters HASH,
--            finish channel, progress HASH: a life group's keys (lifelib.lua), after its
--            flow keys if it has them
-- KEYS[last] -> owner epoch STRING, ZooKeeper mode only, with exactly one
--            group (omit it for no fencing)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or '', for every group (it
--            depends on the client's Redis, not on a topic)
-- ARGV[2] ... ARGV[1+G] -> how many deliveries of each group follow; -c
--            for c deliveries of a group under flow control: an acked
--            message of a group frees its group's place (one at its place
--            limit comes back into the rotation, its slot woken), and an
--            ack wakes a topic found at its concurrency limit
--            A count ending in "L" ("3L", "-3L") marks a life group: its
--            keys include the six life keys, and its part of what follows
--            starts with its retention (ms; 0: keep no record) and its
--            event log's length (0: no log), and has a result after each
--            pair (empty: none)
-- then pairs of id, delivery token: group 1's, then group 2's, ...; a
--            token of -1 acks whatever delivery of the id is current
--            (the unfenced ack by id of pull callers)
-- ARGV[#ARGV] -> the caller's owner epoch, when KEYS[7] is given (after the pairs)
-- Returns: one integer per pair, in order: 1 acked, 0 refused (the delivery
-- is no longer the current one: lease lost and swept, possibly into dead,
-- or removed), 2 gone: refused, and the id is nowhere (not waiting in
-- store, delayed or its group, in flight, or dead), which is what a second
-- run of an ack that succeeded sees (go-redis resends a call whose reply
-- was lost), so the caller may count it as acked. A delivery removed by id (remove.lua)
-- leaves a tombstone in prepare for as long as its lease, so its late ack
-- is 0, not 2; one whose lease ran out and that the sweeper moved to dead
-- is 0 too. With the epoch key: an error reply RMQFENCED, and nothing
-- changed, when the epoch is not the slot's current owner epoch.
-- kb[g] is the index in KEYS before group g's keys; flowg[g] says it has
-- the flow keys, lifeg[g] the life keys, cnt[g] how many deliveries it acks.
local kb, flowg, lifeg, cnt = {}, {}, {}, {}
local G, used = 0, 0
while #KEYS - used >= 6 do
  G = G + 1
  local s = ARGV[1 + G]
  local life = string.sub(s, -1) == 'L'
  local c = tonumber(life and string.sub(s, 1, -2) or s)
  kb[G], flowg[G], lifeg[G], cnt[G] = used, c < 0, life, math.abs(c)
  used = used + (c < 0 and 10 or 6) + (life and LIFE_KEYS or 0)
end
if used < #KEYS then
  local refused = fence(KEYS[#KEYS], ARGV[#ARGV])
  if refused then return refused end
end
-- nowhere reports whether group g's id is neither waiting nor dead. For
-- an id this call acked (acked_here) a re-send of it can only wait in
-- store or the delayed set (one sent while it was in flight); for one not
-- in prepare it may also wait in its message group's queue (gq, a fresh
-- grouped send, which the call may not name), and an envelope exists
-- exactly for a waiting id then.
local function nowhere(g, id, acked_here)
  if redis.call('ZSCORE', KEYS[kb[g] + 6], id) then return false end
  if acked_here then
    return not redis.call('ZSCORE', KEYS[kb[g] + 1], id) and not redis.call('ZSCORE', KEYS[kb[g] + 5], id)
  end
  return redis.call('HEXISTS', KEYS[kb[g] + 3], id) == 0
end
local now
local res = {}
local at = 2 + G
for g = 1, G do
  local b = kb[g]
  local ids, tokens, results = {}, {}, {}
  local retention, evmax = 0, 0
  if lifeg[g] then
    retention, evmax = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
    at = at + 2
  end
  for _ = 1, cnt[g] do
    ids[#ids + 1] = ARGV[at]
    tokens[#tokens + 1] = tonumber(ARGV[at + 1])
    at = at + 2
    if lifeg[g] then
      results[#ids] = ARGV[at]
      at = at + 1
    end
  end
  if #ids > 0 then
    local cur = mcall('ZMSCORE', KEYS[b + 2], ids)
    -- For a life group: each acked delivery's result and attempt.
    local acked, seen, ares, aatt = {}, {}, {}, {}
    for j = 1, #ids do
      -- An id named twice is acked once, as two calls in a row would.
      local tok = cur[j] and token_of(cur[j])
      -- An ack by id (-1) acks no held message (lib.lua): it waits for its
      -- instant and never ran.
      if tok and not seen[ids[j]] and tok ~= 0 and (tok == tokens[j] or (tokens[j] == -1 and not is_held(tok))) then
        seen[ids[j]] = true
        acked[#acked + 1] = ids[j]
        res[#res + 1] = 1
        if lifeg[g] then
          ares[#acked], aatt[#acked] = results[j], math.fmod(tok, 1000)
        end
      elseif seen[ids[j]] then
        -- Named again after this call acked it: as a second call would
        -- see it, gone unless a re-send of it waits.
        res[#res + 1] = nowhere(g, ids[j], true) and 2 or 0
      elseif not cur[j] then
        -- Refused; tell "gone" apart (rare, so its reads cost nothing on
        -- the common path). An envelope exists exactly for a waiting,
        -- delayed or in-flight id, so the sets tell. A dead id is not
        -- gone: the sweeper dead-lettered this delivery after its lease
        -- ran out, so the ack is refused, not counted as done.
        res[#res + 1] = nowhere(g, ids[j], false) and 2 or 0
      else
        res[#res + 1] = 0
      end
    end
    if #acked > 0 then
      mcall('ZREM', KEYS[b + 2], acked)
      local waiting = mcall('ZMSCORE', KEYS[b + 1], acked)
      local gone = {}
      -- One ZCARD per group of a priority topic (time-based topics name
      -- no delayed set): it is mostly empty.
      local has_delayed = KEYS[b + 5] ~= KEYS[b + 1] and redis.call('ZCARD', KEYS[b + 5]) > 0
      if flowg[g] and KEYS[b + 8] ~= KEYS[b + 1] then
        -- Before the bodies go: the acked messages' groups free a place.
        now = now or now_ms()
        local fk = { gq = KEYS[b + 7], gocc = KEYS[b + 8], gturn = KEYS[b + 9] }
        local envs = mcall('HMGET', KEYS[b + 3], acked)
        local frees = {}
        for j = 1, #acked do
          local env = envs[j]
          if env and string.byte(env, 1) == 2 and string.byte(env, 2) >= 16 then
            local e = env_decode(env)
            if e.grp then frees[#frees + 1] = { e.grp, acked[j] } end
          end
        end
        -- One ZREM for every place, one look at each group (gfree_all).
        for _, w in ipairs(gfree_all(fk, KEYS[b + 5] == KEYS[b + 1], frees, now)) do
          if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[b + 4], fmt_score(w)) end
        end
      end
      if flowg[g] and KEYS[b + 10] ~= KEYS[b + 1] then topic_wake(KEYS[b + 10], ARGV[1], KEYS[b + 4]) end
      if lifeg[g] then
        -- The record, the event and the waiters' word, before the bodies go.
        now = now or now_ms()
        local lk = life_keys(b + (flowg[g] and 11 or 7))
        local envs = retention > 0 and mcall('HMGET', KEYS[b + 3], acked) or {}
        local keep, fins = {}, {}
        for j = 1, #acked do
          if envs[j] then keep[#keep + 1] = { acked[j], LIFE_COMPLETED, ares[j], envs[j] } end
          life_event(lk, evmax, 'completed', acked[j], aatt[j], ares[j])
          fins[j] = { acked[j], 'c', ares[j] }
        end
        life_keep(lk, keep, now, retention)
        life_notify(lk, ARGV[1], fins)
        life_ended(lk, acked)
      end
      for j = 1, #acked do
        if waiting[j] then
          -- A send arrived during the delivery: keep its body, let it go next.
          if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[b + 4], waiting[j]) end
        elseif has_delayed and redis.call('ZSCORE', KEYS[b + 5], acked[j]) then
          -- A priority re-send that waits for its time: keep its body.
        else
          gone[#gone + 1] = acked[j]
        end
      end
      if #gone > 0 then mcall('HDEL', KEYS[b + 3], gone) end
    end
  end
end
return res
