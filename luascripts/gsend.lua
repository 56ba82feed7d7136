-- gsend.lua: store messages that carry a group (producer.WithGroup), of one
-- or more slots in one call, in their groups' queues, waking each slot at
-- most once.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[7g-6..7g] likewise
-- KEYS[3] -> msg HASH        | for group g (several groups on a single
-- KEYS[4] -> wake channel    | node only)
-- KEYS[5] -> delayed ZSET    |
-- KEYS[6] -> gq ZSET         | (flowlib.lua)
-- KEYS[7] -> gturn ZSET      |
-- KEYS[8] -> uniq ZSET       | these two only when the group's type
-- KEYS[9] -> uniqn HASH      | says so: unique sends (lib.lua's uniq_claim)
-- KEYS[10] -> events STREAM /  only when the group's type says so (KEYS[8]
--                              without the unique keys): the
--                              slot's event log (lifelib.lua)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- then per group g, its header: its type (1 range-merge, 2 priority,
--            3 fixed-time; plus 8 when some of its messages are unique
--            sends: the group has the two unique keys; plus 16 when its
--            topic keeps an event log: the group has the events key, and
--            its header one more argument), how many messages of it follow,
--            and with 16 about how many events the log keeps
-- then, per message, id, score (range in ms for range-merge), send nonce,
--            [unique window in ms, 0 for none, when the group's type says
--            so], options block (it names the message's group), body:
--            group 1's messages, then group 2's, ...
-- Returns: one result per message, in order, with sendbatch.lua's codes:
--   1 stored as new, 2 merged into the waiting message of its id
--   (range-merge), 3 replaced the waiting message of its id, 4 stored
--   while the id is in flight, 0 already stored by this send (same nonce),
--   -1 refused as a duplicate of a unique send (nothing written).
-- With an event log, each message stored (1 to 4) records "sent" (attempt
-- 0) in the same call; a rerun (0) or a refused send records nothing.
-- Where each message waits is flowlib.lua's gsend_one's to say. A slot is
-- woken when a group's turn came forward or a message heads its store.
-- The groups, where their keys start and their headers (lib.lua).
local G, kb, hdr, at = send_groups(7)
local now, _, now_up = now_ms()
local res = {}
for g = 1, G do
  local b = kb[g]
  local k = { store = KEYS[b + 1], prepare = KEYS[b + 2], msg = KEYS[b + 3], delayed = KEYS[b + 5], gq = KEYS[b + 6], gturn = KEYS[b + 7] }
  local typ, count = tonumber(ARGV[hdr[g]]), tonumber(ARGV[hdr[g] + 1])
  local u, lk, evmax
  if typ >= 16 then
    typ = typ - 16
    lk, evmax = { events = (typ >= 8 and KEYS[b + 10] or KEYS[b + 8]) }, tonumber(ARGV[hdr[g] + 2])
  end
  if typ >= 8 then
    typ = typ - 8
    u = { uniq = KEYS[b + 8], uniqn = KEYS[b + 9] }
  end
  -- A unique group's messages carry their window after the nonce.
  local x = u and 1 or 0
  local time_based = typ ~= 2
  local best, dbest
  for _ = 1, count do
    local r, w, d
    local ums = u and tonumber(ARGV[at + 3]) or 0
    if ums > 0 then
      r = uniq_claim(u, ARGV[at], ums, ARGV[at + 2], now)
      if r == 1 then r = nil end
    end
    if not r then
      r, w, d = gsend_one(k, typ, ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2]), ARGV[at + x + 4], now, now_up, ARGV[at + x + 3])
    end
    if lk and r >= 1 then life_event(lk, evmax, 'sent', ARGV[at], 0) end
    at = at + 5 + x
    res[#res + 1] = r
    if w and (not best or (time_based and w < best) or (not time_based and w > best)) then best = w end
    if d and (not dbest or d < dbest) then dbest = d end
  end
  if u then uniq_trim(u, now, UNIQ_TRIM * count) end
  if ARGV[1] ~= '' then
    if best then redis.call(ARGV[1], KEYS[b + 4], fmt_score(best)) end
    if dbest then
      local first = redis.call('ZRANGE', KEYS[b + 5], 0, 0, 'WITHSCORES')
      if tonumber(first[2]) == dbest then redis.call(ARGV[1], KEYS[b + 4], 'd' .. fmt_score(dbest)) end
    end
  end
end
return res
