-- permit.lua: the topic-wide limits of a topic whose slots lie on several
-- nodes (a Redis Cluster): its rate and its concurrency live here, on the
-- node of the topic's own hash tag, and an engine takes permits before it
-- fetches from a slot and gives back what it did not use (fetch.lua keeps
-- them itself on a single node). Concurrency permits are held per client
-- and leased: a client that stops calling (killed) loses them when its
-- lease runs out.
--
-- KEYS[1] -> tflow HASH: 'tat' the rate's GCRA state (µs), 'held' the
--            concurrency permits held in all, 'blocked' set while a client
--            found none free
-- KEYS[2] -> holders ZSET: client -> lease expiry (ms)
-- KEYS[3] -> counts HASH: client -> concurrency permits it holds
-- ARGV[1] -> client id
-- ARGV[2] -> want: permits to take (each a start, and with a concurrency
--            a place until given back)
-- ARGV[3] -> give: concurrency places given back (deliveries that ended,
--            and places taken but not used)
-- ARGV[4] -> refund: rate starts taken but not used
-- ARGV[5] -> lease of the client's places in ms (renewed by every call)
-- ARGV[6] -> rate interval in µs, 0 for none; ARGV[7] -> its tolerance (µs)
-- ARGV[8] -> concurrency limit, 0 for none
-- Returns: { granted, wait, woke, expiry }: wait is 0, the Redis ms from
-- which the rate allows the next start (it allowed none), or -1 when no
-- place is free (a give back wakes the topic); woke is 1 when places came
-- free while some client waited for one (the caller wakes the topic's
-- slots); expiry, with wait -1, is the Redis ms at which the first lease
-- of the places held runs out (a killed client's places free then, with
-- no give back to wake anyone: the caller looks again at that time); now
-- is Redis's ms here: the caller's fetches use the starts granted only
-- shortly after it (fetch.lua's permit deadline), so a client that stalls
-- between the two calls cannot bunch its starts up.
local now, now_us = now_ms()
local me = ARGV[1]
local want, give, refund = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lease, iv, tol, conc = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local woke = 0
local held = tonumber(redis.call('HGET', KEYS[1], 'held') or '0')
local waited = redis.call('HEXISTS', KEYS[1], 'blocked') == 1
-- Clients whose lease ran out lose their places.
local gone = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. string.format('%d', now), 'BYSCORE', 'LIMIT', '0', '100')
for _, c in ipairs(gone) do
  held = held - tonumber(redis.call('HGET', KEYS[3], c) or '0')
  redis.call('HDEL', KEYS[3], c)
  redis.call('ZREM', KEYS[2], c)
end
local mine = tonumber(redis.call('HGET', KEYS[3], me) or '0')
give = math.min(give, mine)
mine, held = mine - give, math.max(held - give, 0)
if waited and (give > 0 or #gone > 0) then
  redis.call('HDEL', KEYS[1], 'blocked')
  waited, woke = false, 1
end
local tat = redis.call('HGET', KEYS[1], 'tat')
if iv > 0 and refund > 0 and tat then tat = math.max(tonumber(tat) - refund * iv, now_us) end
local granted, wait, expiry = want, 0, 0
if iv > 0 then
  local room, nx = gcra_room(tat, now_us, iv, tol)
  if room < granted then granted = room end
  if room == 0 and want > 0 then wait = math.ceil(nx / 1000) end
end
if conc > 0 then
  local free = math.max(conc - held, 0)
  if free < granted then granted = free end
  if free == 0 and want > 0 then
    redis.call('HSET', KEYS[1], 'blocked', '1')
    wait = -1
    local first = redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')
    if first[2] then expiry = tonumber(first[2]) end
  end
  mine, held = mine + granted, held + granted
  redis.call('HSET', KEYS[1], 'held', string.format('%d', held))
  if mine > 0 then
    redis.call('HSET', KEYS[3], me, string.format('%d', mine))
    redis.call('ZADD', KEYS[2], string.format('%d', now + lease), me)
  else
    redis.call('HDEL', KEYS[3], me)
    redis.call('ZREM', KEYS[2], me)
  end
end
if iv > 0 and (granted > 0 or refund > 0) then
  redis.call('HSET', KEYS[1], 'tat', string.format('%d', math.ceil(gcra_take(tat, now_us, iv, granted))))
end
return { granted, wait, woke, expiry, now }
