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
-- KEYS[7] -> owner epoch STRING, ZooKeeper mode only, with exactly one group
--            (omit it for no fencing)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or '', for every group (it
--            depends on the client's Redis, not on a topic)
-- ARGV[2] ... ARGV[1+G] -> how many deliveries of each group follow
-- then pairs of id, delivery token: group 1's, then group 2's, ...; a
--            token of -1 acks whatever delivery of the id is current
--            (the unfenced ack by id of pull callers)
-- ARGV[#ARGV] -> the caller's owner epoch, when KEYS[7] is given (after the pairs)
-- Returns: one integer per pair, in order: 1 acked, 0 refused (the delivery
-- is no longer the current one: lease lost and swept, possibly into dead,
-- or removed), 2 gone: refused, and the id is nowhere (not waiting, in
-- flight, stored or dead), which is what a second run of an ack that
-- succeeded sees (go-redis resends a call whose reply was lost), so the
-- caller may count it as acked. A delivery removed by id (remove.lua)
-- leaves a tombstone in prepare for as long as its lease, so its late ack
-- is 0, not 2; one whose lease ran out and that the sweeper moved to dead
-- is 0 too. With KEYS[7]: an error reply RMQFENCED, and nothing changed,
-- when the epoch is not the slot's current owner epoch.
local fenced = #KEYS == 7
local G = fenced and 1 or #KEYS / 6
if fenced then
  local refused = fence(KEYS[7], ARGV[#ARGV])
  if refused then return refused end
end
-- nowhere reports whether group g's id is neither waiting (store, delayed)
-- nor dead.
local function nowhere(g, id)
  return not redis.call('ZSCORE', KEYS[6 * g - 5], id) and not redis.call('ZSCORE', KEYS[6 * g - 1], id)
    and not redis.call('ZSCORE', KEYS[6 * g], id)
end
local res = {}
local at = 2 + G
for g = 1, G do
  local ids, tokens = {}, {}
  for _ = 1, tonumber(ARGV[1 + g]) do
    ids[#ids + 1] = ARGV[at]
    tokens[#tokens + 1] = tonumber(ARGV[at + 1])
    at = at + 2
  end
  if #ids > 0 then
    local cur = mcall('ZMSCORE', KEYS[6 * g - 4], ids)
    local acked, seen = {}, {}
    for j = 1, #ids do
      -- An id named twice is acked once, as two calls in a row would.
      local tok = cur[j] and token_of(cur[j])
      -- An ack by id (-1) acks no held message (lib.lua): it waits for its
      -- instant and never ran.
      if tok and not seen[ids[j]] and tok ~= 0 and (tok == tokens[j] or (tokens[j] == -1 and not is_held(tok))) then
        seen[ids[j]] = true
        acked[#acked + 1] = ids[j]
        res[#res + 1] = 1
      elseif seen[ids[j]] then
        -- Named again after this call acked it: as a second call would
        -- see it, gone unless a re-send of it waits.
        res[#res + 1] = nowhere(g, ids[j]) and 2 or 0
      elseif not cur[j] then
        -- Refused; tell "gone" apart (rare, so its reads cost nothing on
        -- the common path). An envelope exists exactly for a waiting,
        -- delayed or in-flight id, so the sets tell. A dead id is not
        -- gone: the sweeper dead-lettered this delivery after its lease
        -- ran out, so the ack is refused, not counted as done.
        res[#res + 1] = nowhere(g, ids[j]) and 2 or 0
      else
        res[#res + 1] = 0
      end
    end
    if #acked > 0 then
      mcall('ZREM', KEYS[6 * g - 4], acked)
      local waiting = mcall('ZMSCORE', KEYS[6 * g - 5], acked)
      local gone = {}
      -- One ZCARD per group of a priority topic (time-based topics name
      -- no delayed set): it is mostly empty.
      local has_delayed = KEYS[6 * g - 1] ~= KEYS[6 * g - 5] and redis.call('ZCARD', KEYS[6 * g - 1]) > 0
      for j = 1, #acked do
        if waiting[j] then
          -- A send arrived during the delivery: keep its body, let it go next.
          if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[6 * g - 2], waiting[j]) end
        elseif has_delayed and redis.call('ZSCORE', KEYS[6 * g - 1], acked[j]) then
          -- A priority re-send that waits for its time: keep its body.
        else
          gone[#gone + 1] = acked[j]
        end
      end
      if #gone > 0 then mcall('HDEL', KEYS[6 * g - 3], gone) end
    end
  end
end
return res
