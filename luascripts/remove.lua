-- remove.lua: delete a message wherever it is (waiting in store, waiting in
-- the delayed set, or being handled), body with it.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> delayed ZSET
-- KEYS[5] -> gq ZSET        \ the slot's group keys (flowlib.lua) and wake
-- KEYS[6] -> gocc ZSET       | channel, optional: with them a removed
-- KEYS[7] -> gturn ZSET      | message that held its group's place (in
-- KEYS[8] -> wake channel   /  flight, or a retry waiting for its backoff)
--                              frees it, and a group that waited at its
--                              place limit comes back, its slot woken
-- KEYS[9..14] -> the slot's life keys (lifelib.lua), optional, after the
--            group keys: done, doneq, events, waiters, finish channel,
--            progress; with them a removal records "removed" in the
--            slot's event log and tells the id's waiters ("r")
-- ARGV[1] -> id
-- ARGV[2] -> wake command, with KEYS[5..8]: PUBLISH, SPUBLISH or ''
-- ARGV[3] -> with the life keys: the event log's length (0: no log)
-- Returns: what was removed, a sum of 1 (waiting in store), 2 (waiting in
-- the delayed set) and 4 (in flight); 0 when the id is in none of them
-- (unknown, acked or dead). A removed in-flight delivery's prepare entry
-- becomes a tombstone: token 0 (never a delivery's) with the delivery's own
-- lease deadline, so it lasts as long as the running delivery may still
-- ack. Its ack, rollback and extend are refused (ack.lua tells this
-- refusal from a resent ack by the tombstone), and the sweeper clears it
-- once that lease has run out, without redelivering anything: there is no
-- envelope left. A re-send of
-- the id meanwhile waits behind it, as behind a delivery. A message held
-- for its instant (a held token, lib.lua) never ran: it counts as waiting
-- (1), its prepare entry goes with no tombstone, and its holder's confirm
-- finds it gone. Running twice removes nothing more.
local id = ARGV[1]
local grp, tb
if #KEYS >= 8 then grp, tb = flow_group(KEYS[3], id) end
-- The attempt the removed event names: the running delivery's, else how
-- many failed (cancel.lua's rule); read before the envelope goes.
local lk, attempt
if #KEYS >= 14 then
  lk = life_keys(9)
  local s = redis.call('ZSCORE', KEYS[2], id)
  local env = redis.call('HGET', KEYS[3], id)
  attempt = 0
  if s and token_of(s) ~= 0 then
    attempt = token_of(s) % 1000
  elseif env then
    attempt = env_decode(env).fails
  end
end
local what = remove_id(KEYS[1], KEYS[2], KEYS[3], KEYS[4], id)
if grp and what > 0 then
  local w = gfree_id({ gq = KEYS[5], gocc = KEYS[6], gturn = KEYS[7] }, tb, grp, id, now_ms())
  if w and ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[8], fmt_score(w)) end
end
if lk and what > 0 then
  life_event(lk, tonumber(ARGV[3]), 'removed', id, attempt)
  life_notify(lk, ARGV[2], { { id, 'r' } })
  life_ended(lk, { id })
end
return what
