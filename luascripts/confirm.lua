-- confirm.lua: hand over deliveries held since a lookahead fetch (fetch.lua
-- mode 3 moves time-based messages to prepare shortly before they are due,
-- with a held token: lib.lua; the client holds them) at their instant: each
-- is checked to be still the client's and due by Redis's clock before its
-- listener is called, and gets a delivery token below HELD_TOKEN, the mark
-- of a delivery handed to a listener. While held, a message counts as
-- waiting in store: a send merges into it or replaces it and a remove
-- finds it waiting (both take its prepare entry away), and a lease that
-- runs out counts no attempt, so what happened meanwhile is what would
-- have happened in store.
--
-- What a call hands over it records under its record key (named by a
-- nonce the client draws for the call) for RECORD_MS: each delivery's
-- prepare key, id and the prepare score it left. A delivery is this
-- client's to hand over again only when a record the call names says so
-- and its score is still that one: a second run of the same call (go-redis
-- resends one whose reply was lost), or a later call of the client after
-- one that failed (the client names the failed call's record). Nothing
-- else can make a call believe the delivery is its own: tokens are not
-- unique per delivery (a salt of 500 values and the attempt), so the token
-- another delivery of the id got from a fetch, or from another client's
-- confirm, may be the very one this call would have given.
--
-- KEYS[g] -> prepare ZSET of slot group g, g = 1..G (a single node: groups
--            may be of different topics)
-- KEYS[G+1] -> the call's record STRING (in group 1's hash tag)
-- KEYS[G+2...] -> the records of earlier calls of the client that failed
-- KEYS[last E] -> the events STREAM (lifelib.lua) of each group with an
--            event log, in group order
-- ARGV[1] -> G, the number of groups, or "G E": E of them log events; then
--            per group: k, or "k max" for a group whose slot logs events
--            (keeping about max), then k triples of id, held delivery
--            token, store score (the due ms the fetch took)
-- Returns: { nowUs, { code, ... }, { token, ... } }: one code per held
-- delivery, in order, and per code 1 the token it is delivered with, in
-- order:
--   0 gone: the prepare entry is not this delivery's any more (a send or a
--     remove took it back to store, or its lease ran out and the sweeper
--     gave it back; whatever holds the id there now is another delivery's,
--     left as it is); nothing is to be delivered
--   1 deliver it, with the token that follows: the held token less
--     HELD_TOKEN (or the one a record names)
--   2 not due yet by Redis's clock: hold it on (never delivered early)
-- A delivery handed over here is "delivered" in its slot's event log (its
-- attempt), by the run that hands it over: a run that finds it in a record
-- logs nothing, so a resent call logs it once.
local RECORD_MS = 60000
local G, E = tonumber(ARGV[1]), 0
if not G then
  local gs, es = string.match(ARGV[1], '^(%d+) (%d+)$')
  G, E = tonumber(gs), tonumber(es)
end
local now, now_us = now_ms()
local record = KEYS[G + 1]
-- handed[#prepare .. ':' .. prepare .. id]: the prepare score a record
-- left it with.
local handed = {}
for j = G + 1, #KEYS - E do
  local v = redis.call('GET', KEYS[j])
  if v then
    local pos = 1
    while pos <= #v do
      local np, ni, ns, at = struct.unpack('>I4I4I4', v, pos)
      handed[np .. ':' .. string.sub(v, at, at + np + ni - 1)] = string.sub(v, at + np + ni, at + np + ni + ns - 1)
      pos = at + np + ni + ns
    end
  end
end
local recorded = next(handed) ~= nil
local codes, tokens, rec = {}, {}, {}
local a = 2
-- ev: the next events key (of the groups that log, in order).
local ev = #KEYS - E + 1
for g = 1, G do
  local prepare = KEYS[g]
  local k, lk, evmax = tonumber(ARGV[a]), nil, 0
  if not k then
    local ks, ms = string.match(ARGV[a], '^(%d+) (%d+)$')
    k, lk, evmax = tonumber(ks), { events = KEYS[ev] }, tonumber(ms)
    ev = ev + 1
  end
  a = a + 1
  for _ = 1, k do
    local id, token, score = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    local s = redis.call('ZSCORE', prepare, id)
    local cur = s and token_of(s)
    local was = recorded and s and handed[#prepare .. ':' .. prepare .. id]
    local code = 0
    if was and tonumber(was) == tonumber(s) then
      -- This client handed it over, and it is still that delivery.
      code = 1
    elseif cur ~= token or not is_held(token) then
      -- Not this held delivery (a token that is no held one names none).
      code = 0
    elseif score > now then
      code = 2
    else
      -- The lease deadline stays; the token says it was handed over.
      cur = token - HELD_TOKEN
      s = string.format('%d', math.floor(tonumber(s) / TOKEN_MOD)) .. string.format('%06d', cur)
      redis.call('ZADD', prepare, s, id)
      code = 1
      if evmax > 0 then life_event(lk, evmax, 'delivered', id, cur % 1000) end
    end
    codes[#codes + 1] = code
    if code == 1 then
      tokens[#tokens + 1] = cur
      -- Parts, not one string each: table.concat joins them once.
      local n = #rec
      rec[n + 1], rec[n + 2], rec[n + 3], rec[n + 4] = struct.pack('>I4I4I4', #prepare, #id, #s), prepare, id, s
    end
  end
end
if #rec > 0 then
  redis.call('SET', record, table.concat(rec), 'PX', RECORD_MS)
end
return { now_us, codes, tokens }
