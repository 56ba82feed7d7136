-- flowrec.lua: record the final outcome of one child in its parent's
-- record, and release the parent (or fail it) when that outcome decides
-- it. This is the only writer of a record's outcomes, and it writes each
-- child's at most once: the outcome is one hash field per child, set with
-- HSETNX, and the count of outcomes grows only when that field was new.
-- So a call made twice (a consumer that died between this call and the
-- child's ack re-runs the child; go-redis resends a call whose reply was
-- lost; the reconciler reports a child again) counts once, and only the
-- call that records the last outcome finds the parent still waiting and
-- moves it into store: the parent is released exactly once, never before
-- its last child's outcome.
--
-- A record (KEYS[1], keyspace.TreeRecordKey), in the parent's slot:
--   id     the parent's id          n      how many children
--   d      outcomes recorded        up     the parent's own parent's ref
--   k<i>   child i: "<F|C><slot>\n<topic>\n<id>" (F: its failure fails
--          the parent, C: the parent runs anyway)
--   o<i>   child i's outcome: "<seq> <state> <errLen> <err><result>",
--          seq its place in finishing order, state c completed, d dead,
--          x cancelled, r removed
--   env    the parent's envelope while it waits for its children
--   st     absent while it waits, r released, x failed (sent to dead)
--   fid, root, stg: its flow and, until activated, its staging
--
-- KEYS[1] -> the parent's record HASH
-- KEYS[2] -> store ZSET        \
-- KEYS[3] -> msg HASH           |
-- KEYS[4] -> wake channel       | of the parent's slot
-- KEYS[5] -> delayed ZSET       |
-- KEYS[6] -> dead ZSET          |
-- KEYS[7] -> deadmsg HASH       |
-- KEYS[8] -> events STREAM      |  (lifelib.lua)
-- KEYS[9] -> flup HASH          |  (flowcheck.lua): a released parent
--            that is a child itself is watched as a leaf from now on
-- KEYS[10] -> gq ZSET           |  the group keys (flowlib.lua): a
-- KEYS[11] -> gturn ZSET       /   released parent with a group waits
--             in its group's queue, as a grouped send does
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> the parent topic's event log length (0: no log)
-- ARGV[3] -> how long the record stays once the parent left it (ms)
-- ARGV[4] -> the child's index i
-- ARGV[5] -> its state: c, d, x or r
-- ARGV[6] -> its error text ('' for none)
-- ARGV[7] -> its result ('' for none)
-- Returns: { 0 } nothing recorded (this child's outcome is there
-- already, or there is no such record or child), { 3 } recorded, { 1 }
-- recorded and the parent released, { 2, up, err } recorded and the
-- parent failed: moved to its dead queue with err as its last error; up
-- is its own parent's ref ('' for a root), to which its caller reports
-- the failure next.
local rec = KEYS[1]
local i = ARGV[4]
local kid = redis.call('HGET', rec, 'k' .. i)
if not kid then return { 0 } end
local d = tonumber(redis.call('HGET', rec, 'd')) + 1
local state, err, result = ARGV[5], ARGV[6], ARGV[7]
if redis.call('HSETNX', rec, 'o' .. i, d .. ' ' .. state .. ' ' .. #err .. ' ' .. err .. result) == 0 then
  return { 0 }
end
redis.call('HSET', rec, 'd', d)
-- Most reports stop here: the parent left already, or others are still
-- to come (the envelope is read only when this report decides).
local sn = redis.call('HMGET', rec, 'st', 'n')
local fails = state ~= 'c' and string.sub(kid, 1, 1) == 'F'
if sn[1] or (not fails and d < tonumber(sn[2])) then return { 3 } end
local f = redis.call('HMGET', rec, 'id', 'env', 'up')
local pid, env, up = f[1], f[2], f[3] or ''
local cmd, evmax, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local e = env_decode(env)
if fails then
  -- The child failed its parent: the parent goes to its dead queue, with
  -- a last error that names the child.
  local names = { d = 'dead', x = 'cancelled', r = 'removed' }
  local _, _, ctopic, cid = string.find(kid, '^.%d+\n(.-)\n(.*)$')
  e.err = 'rmq: flow child ' .. tostring(ctopic) .. '/' .. tostring(cid) .. ' ' .. (names[state] or state)
  if err ~= '' then e.err = e.err .. ': ' .. err end
  redis.call('ZADD', KEYS[6], now, pid)
  redis.call('HSET', KEYS[7], pid, env_rewrite(e))
  redis.call('HSET', rec, 'st', 'x')
  redis.call('HDEL', rec, 'env')
  redis.call('PEXPIRE', rec, keep)
  if evmax > 0 then redis.call('XADD', KEYS[8], 'MAXLEN', '~', evmax, '*', 't', 'dead', 'id', pid, 'a', 0, 'd', e.err) end
  return { 2, up, e.err }
end
-- The last outcome: the parent becomes deliverable at its own time or
-- priority, as a send would store it (gsend.lua's gsend_one for one with a
-- group: a priority one not to compete before a later time waits in the
-- delayed set, and the fetch moves it to its group once due).
redis.call('HSET', KEYS[3], pid, env)
local wait = 0
if e.typ == 2 and e.nbf and e.nbf > now then
  redis.call('ZADD', KEYS[5], e.nbf, pid)
  wait = e.nbf - now
  local first = redis.call('ZRANGE', KEYS[5], 0, 0)
  if cmd ~= '' and first[1] == pid then redis.call(cmd, KEYS[4], 'd' .. fmt_score(e.nbf)) end
elseif e.grp then
  local w = genter({ gq = KEYS[10], gturn = KEYS[11] }, e.typ ~= 2, e.grp, e.orig, e.score, pid, now)
  if e.typ ~= 2 and e.score > now then wait = e.score - now end
  if w and cmd ~= '' then redis.call(cmd, KEYS[4], fmt_score(w)) end
else
  redis.call('ZADD', KEYS[2], e.score, pid)
  if e.typ ~= 2 and e.score > now then wait = e.score - now end
  wake_if_head(cmd, KEYS[4], KEYS[2], e.typ ~= 2, pid, e.score)
end
redis.call('HSET', rec, 'st', 'r')
local mine = redis.call('HGET', KEYS[9], pid)
if mine and string.sub(mine, 1, 1) == 'p' then redis.call('HSET', KEYS[9], pid, string.sub(mine, 2)) end
redis.call('HDEL', rec, 'env')
redis.call('PEXPIRE', rec, keep + wait)
if evmax > 0 then redis.call('XADD', KEYS[8], 'MAXLEN', '~', evmax, '*', 't', 'released', 'id', pid, 'a', 0) end
return { 1 }
