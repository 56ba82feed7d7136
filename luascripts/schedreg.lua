-- schedreg.lua: delete a schedule's registration once its copy was removed,
-- if the registration is still of the generation removed: a Set that came
-- meanwhile registered a new generation, which stays.
--
-- KEYS[1] -> registry HASH: name -> "topic\tdefinition\tgeneration"
-- ARGV[1] -> name
-- ARGV[2] -> generation removed
-- Returns: 1 deleted, 0 kept (no registration, or another generation)
local reg = redis.call('HGET', KEYS[1], ARGV[1])
if not reg then return 0 end
if string.match(reg, '[^\t]*$') ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
