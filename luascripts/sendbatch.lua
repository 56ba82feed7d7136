-- sendbatch.lua: store many messages of one slot in one call (send.lua's
-- rules for each), waking the slot at most once.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> wake channel
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> type: 1 range-merge, 2 priority, 3 fixed-time
-- ARGV[3], ARGV[4], ARGV[5], ARGV[6] ... -> quadruples of id, score (range in
--            ms for range-merge), send nonce, body
-- Returns: one result per message, as send.lua returns them.
local typ = tonumber(ARGV[2])
local time_based = typ ~= 2
local now = now_ms()
local head_id, head = head_of(KEYS[1], time_based)
head = head and tonumber(head)
local res = {}
local best
for i = 3, #ARGV, 4 do
  local r, score = send_one(KEYS[1], KEYS[2], KEYS[3], typ, ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], now)
  if r == 1 or r == 3 or r == 4 then
    if not best or (time_based and score < best) or (not time_based and score > best) then best = score end
  end
  res[#res + 1] = r
end
-- Wake the slot when a message now comes before the old head (fetchers
-- sleep until the head they know of), or when the old head is blocked
-- behind its own delivery (fetchers then wait for a wake-up).
if best and ARGV[1] ~= '' then
  local earlier = not head or (time_based and best < head) or (not time_based and best > head)
  if earlier or redis.call('ZSCORE', KEYS[2], head_id) then
    redis.call(ARGV[1], KEYS[4], fmt_score(best))
  end
end
return res
