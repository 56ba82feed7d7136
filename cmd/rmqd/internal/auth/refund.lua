-- Gives back units that redis_rate's GCRA (allowN) took from one limiter
-- key: a request that ended without a 200/201 must not use up the token's
-- allowance (LMSTFY-API.md §7). redis_rate's own allowN cannot do it: with
-- a negative cost it skips the write when the give-back empties the key.
-- It stores the theoretical arrival time (TAT) as seconds since
-- 2017-01-01 UTC, a float; limits_test.go checks this stays true.
--
-- KEYS[1] -> the limiter key ("rate:" + the key given to redis_rate)
-- ARGV[1] -> emission interval in seconds (period / rate)
-- ARGV[2] -> how many units to give back
-- Returns: 1 when the key was lowered or removed, 0 when it had expired.
local tat = redis.call("GET", KEYS[1])
if not tat then
  return 0
end
local t = redis.call("TIME")
local now = (t[1] - 1483228800) + (t[2] / 1000000)
local new_tat = tonumber(tat) - tonumber(ARGV[1]) * tonumber(ARGV[2])
if new_tat <= now then
  redis.call("DEL", KEYS[1])
else
  redis.call("SET", KEYS[1], tostring(new_tat), "KEEPTTL")
end
return 1
