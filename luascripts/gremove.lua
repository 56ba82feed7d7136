-- gremove.lua: delete a message that waits in its group's queue (gq), body
-- with it: what remove.lua, which looks in store, delayed and prepare,
-- does not find of a grouped message.
--
-- KEYS[1] -> msg HASH
-- KEYS[2] -> gq ZSET (flowlib.lua)
-- KEYS[3..8] -> the slot's life keys (lifelib.lua), optional: done,
--            doneq, events, waiters, finish channel, progress; with them a
--            removal records "removed" and tells the id's waiters ("r")
-- ARGV[1] -> id
-- ARGV[2] -> with the life keys: wake command (PUBLISH, SPUBLISH or '')
-- ARGV[3] -> with the life keys: the event log's length (0: no log)
-- Returns: 1 removed (it waited in its group), 0 not there. Running twice
-- removes nothing more.
local id = ARGV[1]
local env = redis.call('HGET', KEYS[1], id)
if not env or string.byte(env, 1) ~= 2 or string.byte(env, 2) < 16 then return 0 end
local e = env_decode(env)
if not e.grp then return 0 end
if redis.call('ZREM', KEYS[2], gmember(e.grp, e.typ ~= 2, e.orig, id)) == 0 then return 0 end
redis.call('HDEL', KEYS[1], id)
if #KEYS >= 8 then
  local lk = life_keys(3)
  life_event(lk, tonumber(ARGV[3]), 'removed', id, e.fails)
  life_notify(lk, ARGV[2], { { id, 'r' } })
end
return 1
