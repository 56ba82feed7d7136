-- takeover.lua: start a slot owner's term (ZooKeeper mode): raise the slot's
-- owner epoch and return every delivery in prepare to store, at its original
-- position, without counting an attempt.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> owner epoch STRING
-- KEYS[5] -> delayed ZSET (a priority re-send with a not-before time, or a
--            retry's backoff, waits there; time-based topics have it empty)
-- ARGV[1] -> the new owner's epoch: the creation zxid of its ZooKeeper owner
--            node (a decimal integer; later owners have larger ones)
-- Returns: { restored, superseded } where restored deliveries are back in
-- store at the score their envelope carries (their due time or priority when
-- fetched) and superseded ones were dropped because a re-send of the same id
-- waits in store or in the delayed set (it goes next, as after an ack; one
-- waiting in delayed keeps its not-before time, so it must not also be put
-- in store, which would deliver it early and then again). An error reply RMQFENCED,
-- and nothing changed, when ARGV[1] is older than the stored epoch: a stale
-- owner cannot take a slot back. The same epoch again starts a new term of
-- the same owner (e.g. after its connection came back); running twice is safe.
local epoch = ARGV[1]
if not string.match(epoch, '^%d+$') then
  return redis.error_reply('ERR takeover: epoch must be a decimal integer, got ' .. epoch)
end
local cur = redis.call('GET', KEYS[4])
if cur and int_cmp(epoch, cur) < 0 then
  return redis.error_reply('RMQFENCED owner epoch ' .. epoch .. ' is older than the current one (' .. cur .. ')')
end
redis.call('SET', KEYS[4], epoch)
local restored, superseded = 0, 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  redis.call('ZREM', KEYS[2], id)
  local env = redis.call('HGET', KEYS[3], id)
  if env then
    if redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[5], id) then
      superseded = superseded + 1
    else
      redis.call('ZADD', KEYS[1], env_decode(env).score, id)
      restored = restored + 1
    end
  end
end
return { restored, superseded }
