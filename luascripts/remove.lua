-- remove.lua: delete a message wherever it is (waiting in store, waiting in
-- the delayed set, or being handled), body with it.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> delayed ZSET
-- ARGV[1] -> id
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
local what = 0
if redis.call('ZREM', KEYS[1], id) == 1 then what = what + 1 end
if redis.call('ZREM', KEYS[4], id) == 1 then what = what + 2 end
local s = redis.call('ZSCORE', KEYS[2], id)
local token = s and token_of(s)
if token and is_held(token) then
  redis.call('ZREM', KEYS[2], id)
  if what % 2 == 0 then what = what + 1 end
elseif token and token ~= 0 then
  local deadline = math.floor(tonumber(s) / TOKEN_MOD) * TOKEN_MOD
  redis.call('ZADD', KEYS[2], deadline, id)
  what = what + 4
end
if what > 0 then redis.call('HDEL', KEYS[3], id) end
return what
