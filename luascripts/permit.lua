-- permit.lua: the topic-wide limits of a topic whose slots lie on several
-- nodes (a Redis Cluster): its rate and its concurrency live here, on the
-- node of the topic's own hash tag, and an engine takes permits before it
-- fetches from a slot (fetch.lua keeps them itself on a single node).
--
-- A place of the concurrency is a member of the places ZSET, scored with
-- the Redis ms (of this node) at which it lapses: first a reservation
-- ('r:' call id ':' i) granted by a call, then, once the fetch leased
-- messages, the delivery that took it ('slot:id', its delivery token in
-- the tokens HASH) under that delivery's lease. Ending a delivery, by any
-- process, removes its member (only while the token is the one bound:
-- a later delivery of the id is not touched); a delivery leased before any
-- limit has no member, so its end frees nothing. Members whose time passed
-- are dropped by every call. Every effect is keyed by members or by the
-- call id, so a call go-redis sends again after a lost reply changes
-- nothing twice: the first run's reply is kept for a minute and returned.
--
-- KEYS[1] -> tflow HASH: 'tat' the rate's GCRA state (µs), 'blocked' set
--            while a client found no place free
-- KEYS[2] -> calls ZSET: call id -> Redis ms its kept reply may go
-- KEYS[3] -> replies HASH: call id -> its reply ('g w woke expiry now')
-- KEYS[4] -> places ZSET: member -> Redis ms at which it lapses
-- KEYS[5] -> tokens HASH: delivery member -> its delivery token
-- ARGV[1] -> call id (unique per call; a resend carries the same)
-- ARGV[2] -> want: permits to take (each a start, and with a concurrency
--            a reservation of a place)
-- ARGV[3] -> refund: rate starts taken but not used
-- ARGV[4] -> a reservation's lease in ms (until a delivery is bound to it)
-- ARGV[5] -> rate interval in µs, 0 for none; ARGV[6] -> its tolerance (µs)
-- ARGV[7] -> concurrency limit, 0 for none
-- ARGV[8] -> R, reservations given back unused; ARGV[9] -> B, bindings;
-- ARGV[10] -> E, ends; ARGV[11] -> N, renewals; then
--   R x reservation member,
--   B x (reservation member or '', delivery member, token, lease ms),
--   E x (delivery member, token or '' for whichever is bound),
--   N x (delivery member, lease ms from now).
-- Returns: { granted, wait, woke, expiry, now }: wait is 0, the Redis ms
-- from which the rate allows the next start (it allowed none), or -1 when
-- no place is free (an end wakes the topic); woke is 1 when places came
-- free while some client waited for one (the caller wakes the topic's
-- slots); expiry, with wait -1, is the Redis ms at which the first place
-- lapses (a killed client's, with nobody to say so: the caller looks again
-- then); now is this node's Redis ms (the caller reads wait and expiry as
-- durations from it, never against another node's clock). With a
-- concurrency the reservations granted are 'r:' call id ':' 1..granted.
local id = ARGV[1]
local kept = redis.call('HGET', KEYS[3], id)
if kept then
  local r = {}
  for x in string.gmatch(kept, '%S+') do r[#r + 1] = tonumber(x) end
  return r
end
local now, now_us = now_ms()
local want, refund, rlease = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local iv, tol, conc = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local nrel, nbind, nend, nrenew = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local nowf = string.format('%d', now)

-- Kept replies whose time passed go.
local old = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. nowf, 'BYSCORE', 'LIMIT', '0', '100')
if #old > 0 then
  redis.call('HDEL', KEYS[3], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
end

-- freed counts places that came free in this call.
local freed = 0
local gone = redis.call('ZRANGE', KEYS[4], '-inf', '(' .. nowf, 'BYSCORE', 'LIMIT', '0', '100')
if #gone > 0 then
  redis.call('ZREM', KEYS[4], unpack(gone))
  redis.call('HDEL', KEYS[5], unpack(gone))
  freed = freed + #gone
end
local a = 12
for _ = 1, nrel do
  freed = freed + redis.call('ZREM', KEYS[4], ARGV[a])
  a = a + 1
end
for _ = 1, nbind do
  if ARGV[a] ~= '' then redis.call('ZREM', KEYS[4], ARGV[a]) end
  redis.call('ZADD', KEYS[4], string.format('%d', now + tonumber(ARGV[a + 3])), ARGV[a + 1])
  redis.call('HSET', KEYS[5], ARGV[a + 1], ARGV[a + 2])
  a = a + 4
end
for _ = 1, nend do
  local m, tok = ARGV[a], ARGV[a + 1]
  if tok == '' or redis.call('HGET', KEYS[5], m) == tok then
    freed = freed + redis.call('ZREM', KEYS[4], m)
    redis.call('HDEL', KEYS[5], m)
  end
  a = a + 2
end
for _ = 1, nrenew do
  redis.call('ZADD', KEYS[4], 'XX', string.format('%d', now + tonumber(ARGV[a + 1])), ARGV[a])
  a = a + 2
end

local woke = 0
if freed > 0 and redis.call('HDEL', KEYS[1], 'blocked') == 1 then woke = 1 end
local tat = redis.call('HGET', KEYS[1], 'tat')
if iv > 0 and refund > 0 and tat then tat = math.max(tonumber(tat) - refund * iv, now_us) end
local granted, wait, expiry = want, 0, 0
if iv > 0 then
  local room, nx = gcra_room(tat, now_us, iv, tol)
  if room < granted then granted = room end
  if room == 0 and want > 0 then wait = math.ceil(nx / 1000) end
end
if conc > 0 then
  local free = math.max(conc - redis.call('ZCARD', KEYS[4]), 0)
  if free < granted then granted = free end
  if free == 0 and want > 0 then
    redis.call('HSET', KEYS[1], 'blocked', '1')
    wait = -1
    local first = redis.call('ZRANGE', KEYS[4], '0', '0', 'WITHSCORES')
    if first[2] then expiry = tonumber(first[2]) end
  end
  local until_s = string.format('%d', now + rlease)
  for i = 1, granted do redis.call('ZADD', KEYS[4], until_s, 'r:' .. id .. ':' .. i) end
end
if iv > 0 and (granted > 0 or refund > 0) then
  redis.call('HSET', KEYS[1], 'tat', string.format('%d', math.ceil(gcra_take(tat, now_us, iv, granted))))
end
local reply = { granted, wait, woke, expiry, now }
-- Only grants and refunds need their reply kept: every other effect is a
-- member added or removed by name, the same when done twice.
if want > 0 or refund > 0 then
  redis.call('HSET', KEYS[3], id, string.format('%d %d %d %d %d', granted, wait, woke, expiry, now))
  redis.call('ZADD', KEYS[2], string.format('%d', now + 60000), id)
end
return reply
