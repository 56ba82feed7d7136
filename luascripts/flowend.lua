-- flowend.lua: cancel (rmq.Inspector.Cancel) or remove (producer.Remove) a
-- flow parent that waits for its children. Its record ends: its envelope
-- goes and its state says how it ended, so no child's outcome releases it
-- any more (flowrec.lua finds it ended: it records the outcome and does
-- nothing else). Its children are not touched: they run on as ordinary
-- messages. The parent's own parent, if any, hears of it as of a child
-- cancelled or removed: its watch entry becomes a leaf's (flowcheck.lua
-- then reports it if the caller's report is lost), and the caller reports
-- it at once (flowtree.Reporter.Ended).
--
-- KEYS[1] -> the parent's record HASH (keyspace.TreeRecordKey)
-- KEYS[2] -> flup HASH of its slot
-- KEYS[3..8] -> the slot's life keys (lifelib.lua): done, doneq, events,
--            waiters, finish channel, progress
-- ARGV[1] -> 'x' cancel, 'r' remove
-- ARGV[2] -> wake command: PUBLISH, SPUBLISH or '' (the waiters' word)
-- ARGV[3] -> retention in ms (a cancel keeps a record; 0: none)
-- ARGV[4] -> the event log's length (0: no log)
-- ARGV[5] -> how long the ended record stays (ms)
-- Returns: 1 when it ended the parent; 0 when there is no record, or it is
-- staged, released, failed or ended already (then nothing is written).
local rec = KEYS[1]
local f = redis.call('HMGET', rec, 'id', 'env', 'st', 'stg')
if not f[1] or not f[2] or f[3] or f[4] then return 0 end
local id, env, mode, cmd = f[1], f[2], ARGV[1], ARGV[2]
redis.call('HSET', rec, 'st', mode == 'x' and 'c' or 'm')
redis.call('HDEL', rec, 'env')
redis.call('PEXPIRE', rec, tonumber(ARGV[5]))
local up = redis.call('HGET', KEYS[2], id)
if up and string.sub(up, 1, 1) == 'p' then redis.call('HSET', KEYS[2], id, string.sub(up, 2)) end
local lk = life_keys(3)
local now = now_ms()
local e = env_decode(env)
if mode == 'x' then
  life_event(lk, tonumber(ARGV[4]), 'cancelled', id, e.fails)
  life_keep(lk, { { id, LIFE_CANCELLED, '', env } }, now, tonumber(ARGV[3]))
  life_notify(lk, cmd, { { id, 'x' } })
else
  life_event(lk, tonumber(ARGV[4]), 'removed', id, e.fails)
  life_notify(lk, cmd, { { id, 'r' } })
end
return 1
