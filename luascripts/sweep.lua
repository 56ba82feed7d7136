-- sweep.lua: roll back deliveries whose lease has run out (a failed attempt).
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
-- ARGV[2] -> max retries (a message's own, a per-message option, wins);
--            ending in "L" ("16L"): the call names the life keys, and the
--            event log's length (0: no log) follows the backoffs
-- ARGV[3] -> dead retention count per slot (0 = unbounded)
-- ARGV[4] -> dead retention age in ms (0 = unbounded)
-- ARGV[5] -> most leases to roll back in this call
-- ARGV[6] -> B, then ARGV[7..6+B] -> backoff ms for attempt 1..B
-- ARGV[#ARGV] -> the caller's owner epoch, when fenced
-- Returns: { rolled back, of them moved to dead (D), expired, then D pairs
-- of a dead id and its attempts, then the ids retried ... } where expired
-- counts messages dropped because their expiry (a per-message option)
-- passed; the dead pairs let the caller log each dead-lettered message. A lease is expired when its deadline second
-- is before Redis's clock, so a consumer with a fast clock cannot take a
-- live lease. With KEYS[8]: an error reply RMQFENCED, and nothing changed,
-- when the epoch is not the slot's current owner epoch (only a slot's owner
-- sweeps it in ZooKeeper mode). Under flow control a message that leaves
-- its group frees its place (rollback.lua), a sweep that ended leases
-- wakes a topic found at its concurrency limit, and a removed delivery's
-- tombstone that goes frees a place the removal left and lets a re-send of
-- its id at its group's head go (its group comes back into the rotation,
-- its slot woken).
local life = string.sub(ARGV[2], -1) == 'L'
local nk = #KEYS - (life and LIFE_KEYS or 0)
if nk == 8 or nk == 12 then
  local refused = fence(KEYS[#KEYS], ARGV[#ARGV])
  if refused then return refused end
end
local flow = nk >= 11
local k = { store = KEYS[1], prepare = KEYS[2], msg = KEYS[3], dead = KEYS[4], deadmsg = KEYS[5], wake = KEYS[6], delayed = KEYS[7] }
local fk = { gq = KEYS[8], gocc = KEYS[9], gturn = KEYS[10] }
local max_retries = tonumber(life and string.sub(ARGV[2], 1, -2) or ARGV[2])
local dead_max, dead_age = tonumber(ARGV[3]), tonumber(ARGV[4])
local backoff, at = parse_backoff(ARGV, 6)
local lk, evmax
if life then lk, evmax = life_keys(flow and 12 or 8), tonumber(ARGV[at]) end
local now, _, now_up = now_ms()
local limit = math.floor(now / 1000) * TOKEN_MOD
local leases = redis.call('ZRANGE', k.prepare, '-inf', '(' .. limit, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[5]), 'WITHSCORES')
local out, dead, retried = { 0, 0, 0 }, {}, {}
for i = 1, #leases, 2 do
  local id = leases[i]
  local token = token_of(leases[i + 1])
  local grp, tb
  if flow and KEYS[9] ~= KEYS[1] then grp, tb = flow_group(k.msg, id) end
  local r = rollback_one(k, id, token, 'rmq: lease expired', now, max_retries, backoff, dead_max, dead_age, ARGV[1], '', now_up)
  if flow then flow_ended(fk, KEYS[11], KEYS[1], ARGV[1], k.wake, tb, grp, id, r, now) end
  if life then life_rolled(lk, evmax, ARGV[1], id, token % 1000, r, 'rmq: lease expired') end
  if grp and token == 0 then
    -- A removed delivery's tombstone is gone (grp is a re-send's: the
    -- removal deleted the envelope). A place of the id is the removed
    -- delivery's (a removal that named no group keys left it): it frees.
    -- A re-send of the id that waits at its group's head (which the
    -- tombstone held back) may go now.
    local w = gfree_id(fk, tb, grp, id, now) or gturn_head(fk, tb, grp, now)
    if w and ARGV[1] ~= '' then redis.call(ARGV[1], k.wake, fmt_score(w)) end
  end
  if r == 5 then
    out[3] = out[3] + 1
  elseif r ~= 0 then
    out[1] = out[1] + 1
    if r == 3 then
      out[2] = out[2] + 1
      dead[#dead + 1] = id
      dead[#dead + 1] = token % 1000
    else
      retried[#retried + 1] = id
    end
  end
end
for _, v in ipairs(dead) do out[#out + 1] = v end
for _, v in ipairs(retried) do out[#out + 1] = v end
return out
