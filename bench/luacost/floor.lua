-- floor.lua: the least a send script can do per message: HSET + ZADD.
-- ARGV as sendbatch.lua with one slot group: wake command, type, count, then
-- id, score, nonce, body ...
for i = 4, #ARGV, 4 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 3])
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
end
return 1
