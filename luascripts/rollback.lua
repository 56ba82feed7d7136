-- rollback.lua: end deliveries as failed: retry later, or move to dead.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> dead ZSET
-- KEYS[5] -> deadmsg HASH
-- KEYS[6] -> wake channel
-- KEYS[7] -> delayed ZSET (priority retries wait there for their backoff)
-- KEYS[8] -> gq ZSET        \ for a topic under flow control (omit them
-- KEYS[9] -> gocc ZSET       | otherwise): the slot's group keys
-- KEYS[10] -> gturn ZSET     | (flowlib.lua), or store again when it has
-- KEYS[11] -> tflow HASH    /  no group places, and the topic's tflow (a
--                              single node; else the store key again)
-- KEYS[+1..+6] -> done HASH, doneq ZSET, events STREAM, waiters HASH,
--            finish channel, progress HASH: the slot's life keys (lifelib.lua), when
--            ARGV[2] ends in "L" (after the flow keys if given)
-- KEYS[last] -> owner epoch STRING, ZooKeeper mode only (omit it for no
--            fencing)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> max retries: attempt max+1 failing goes to dead (a message's
--            own max retries, a per-message option, wins); ending in "L"
--            ("16L"): the call names the life keys, and the event log's
--            length (0: no log) follows the backoffs
-- ARGV[3] -> dead retention count per slot (0 = unbounded)
-- ARGV[4] -> dead retention age in ms (0 = unbounded)
-- ARGV[5] -> B, then ARGV[6..5+B] -> backoff ms for attempt 1..B (the last repeats)
-- ARGV[6+B] ... -> quadruples of id, delivery token, error text, and what the
--            handler asked for: '' retry after the backoff, 'd' dead now,
--            'r<ms>' retry after ms, 's<ms>' snooze ms (no attempt counted);
--            a token of -1 ends whatever delivery of the id is current
--            (the unfenced nack by id of pull callers)
-- ARGV[#ARGV] -> the caller's owner epoch, when fenced (after the quadruples)
-- Returns: one integer per quadruple: 0 refused (stale token; for token -1:
-- no delivery of the id is in flight), 2 superseded
-- by a waiting re-send, 3 moved to dead, 4 waiting for a retry, 5 expired
-- (dropped with its body), 6 snoozed, 7 held for its instant and never
-- handed over (back in store, no attempt counted). With KEYS[8]: an error reply
-- RMQFENCED, and nothing changed, when the epoch is not the slot's current
-- owner epoch. Under flow control a message that leaves its group (dead,
-- expired, superseded by a re-send) frees its group's place, and a
-- rollback wakes a topic found at its concurrency limit; a retry or a
-- snooze keeps its place (the group's order is kept).
local last = #ARGV
local life = string.sub(ARGV[2], -1) == 'L'
local nk = #KEYS - (life and LIFE_KEYS or 0)
local flow = nk >= 11
if nk == 8 or nk == 12 then
  local refused = fence(KEYS[#KEYS], ARGV[last])
  if refused then return refused end
  last = last - 1
end
local k = { store = KEYS[1], prepare = KEYS[2], msg = KEYS[3], dead = KEYS[4], deadmsg = KEYS[5], wake = KEYS[6], delayed = KEYS[7] }
local fk = { gq = KEYS[8], gocc = KEYS[9], gturn = KEYS[10] }
local max_retries = tonumber(life and string.sub(ARGV[2], 1, -2) or ARGV[2])
local dead_max, dead_age = tonumber(ARGV[3]), tonumber(ARGV[4])
local backoff, at = parse_backoff(ARGV, 5)
local lk, evmax
if life then
  lk, evmax = life_keys(flow and 12 or 8), tonumber(ARGV[at])
  at = at + 1
end
local now, _, now_up = now_ms()
local res = {}
for i = at, last, 4 do
  local token = tonumber(ARGV[i + 1])
  if token == -1 then
    -- Read the current delivery's token here, in the script, so no other
    -- delivery can begin between the read and the rollback. A tombstone
    -- (token 0, remove.lua) is no delivery: it is left to its sweeper.
    local s = redis.call('ZSCORE', k.prepare, ARGV[i])
    token = s and token_of(s) or nil
    -- A held message (lib.lua) waits for its instant: not in flight.
    if token == 0 or (token and is_held(token)) then token = nil end
  end
  if not token then
    res[#res + 1] = 0
  else
    local grp, tb
    if flow and KEYS[9] ~= KEYS[1] then grp, tb = flow_group(k.msg, ARGV[i]) end
    local r = rollback_one(k, ARGV[i], token, ARGV[i + 2], now, max_retries, backoff, dead_max, dead_age, ARGV[1], ARGV[i + 3], now_up)
    res[#res + 1] = r
    if life then life_rolled(lk, evmax, ARGV[1], ARGV[i], token % 1000, r, ARGV[i + 2]) end
    if flow and r ~= 0 then
      flow_ended(fk, KEYS[11], KEYS[1], ARGV[1], k.wake, tb, grp, ARGV[i], r, now)
    end
  end
end
return res
