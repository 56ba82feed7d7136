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
local before_id, before_score = head_of(KEYS[1], time_based)
local res = {}
local wake = false
for i = 3, #ARGV, 4 do
  local r = send_one(KEYS[1], KEYS[2], KEYS[3], typ, ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], now)
  if r == 1 or r == 3 or r == 4 then wake = true end
  res[#res + 1] = r
end
if wake then
  wake_if_new_head(ARGV[1], KEYS[4], KEYS[1], time_based, before_id, before_score)
end
return res
