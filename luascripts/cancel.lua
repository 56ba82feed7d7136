-- cancel.lua: cancel a message wherever it is, waiting or being handled.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> delayed ZSET (a time-based topic's store again)
-- KEYS[5] -> wake channel
-- KEYS[6..11] -> the slot's life keys (lifelib.lua): done, doneq, events,
--            waiters, finish channel, progress
-- KEYS[12] -> gq ZSET       \ the slot's group keys (flowlib.lua),
-- KEYS[13] -> gocc ZSET      | optional: a cancelled message that held its
-- KEYS[14] -> gturn ZSET    /  group's place frees it (as remove.lua),
--                              and one waiting in its group's queue is
--                              found there (as gremove.lua finds it)
-- ARGV[1] -> id
-- ARGV[2] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[3] -> retention in ms (0: keep no record)
-- ARGV[4] -> the event log's length (0: no log)
-- Returns: what was cancelled, as remove.lua counts it: 1 waiting in store,
-- 2 waiting in the delayed set, 4 in flight (sums); 0 when the id is in
-- none of them (unknown, finished or dead), and then nothing is written.
-- A cancelled message is removed as remove.lua removes it: an in-flight
-- delivery leaves a tombstone, so its ack, rollback and extend are
-- refused (a handler that ignores its context cannot complete it, nor can
-- a pulled delivery's ack). Then the cancelled event, the record (with
-- retention: state cancelled, the envelope, no result), the waiters' word
-- ("x"), and for an in-flight delivery a word on the slot's wake channel,
-- "x<token>:<id>", that tells the process running it to cancel its
-- handler's context (the tombstone holds without it; the word only makes
-- it prompt). Running twice cancels nothing more.
local id = ARGV[1]
local cmd = ARGV[2]
local lk = life_keys(6)
local env = redis.call('HGET', KEYS[3], id)
local s = redis.call('ZSCORE', KEYS[2], id)
local token = s and token_of(s)
local grp, tb
if #KEYS >= 14 then grp, tb = flow_group(KEYS[3], id) end
local what = remove_id(KEYS[1], KEYS[2], KEYS[3], KEYS[4], id)
if what == 0 and grp and env then
  -- Not in store, delayed or prepare: it may wait in its group's queue
  -- (as gremove.lua finds it).
  local e = env_decode(env)
  if redis.call('ZREM', KEYS[12], gmember(grp, e.typ ~= 2, e.orig, id)) == 1 then
    redis.call('HDEL', KEYS[3], id)
    what = 1
  end
end
if what == 0 then return 0 end
local now = now_ms()
if grp then
  local w = gfree_id({ gq = KEYS[12], gocc = KEYS[13], gturn = KEYS[14] }, tb, grp, id, now)
  if w and cmd ~= '' then redis.call(cmd, KEYS[5], fmt_score(w)) end
end
local running = what >= 4
local attempt = 0
local e = env and env_decode(env)
if running then
  attempt = token % 1000
elseif e then
  attempt = e.fails
end
life_event(lk, tonumber(ARGV[4]), 'cancelled', id, attempt)
if env then life_keep(lk, { { id, LIFE_CANCELLED, '', env } }, now, tonumber(ARGV[3])) end
life_notify(lk, cmd, { { id, 'x' } })
life_ended(lk, { id })
if running and cmd ~= '' then redis.call(cmd, KEYS[5], 'x' .. token .. ':' .. id) end
return what
