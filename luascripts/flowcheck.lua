-- flowcheck.lua: find the flow children of one topic slot whose final
-- outcome has not reached their parent yet, and the flow nodes staged
-- here long ago. A child's outcome is reported by the process that ends
-- it (flowrec.lua, before an ack); this is the reconciler's read for the
-- outcomes no process reported: a child that went dead in a rollback or
-- a sweep, one removed, cancelled or expired, or one whose reporter died.
-- Each child stays in flup until its outcome is recorded, so a report
-- lost to a crash is found here again.
--
-- KEYS[1] -> flup HASH child id -> "[p]<parent ref>" (p: it is a parent)
-- KEYS[2] -> msg HASH
-- KEYS[3] -> dead ZSET
-- KEYS[4] -> deadmsg HASH
-- KEYS[5] -> done HASH (lifelib.lua: a retained record says cancelled)
-- KEYS[6] -> stageq ZSET
-- KEYS[7] -> staged HASH
-- ARGV[1] -> 'i': the ids ARGV[2..] only; 's': a scan from cursor
--            ARGV[2], about ARGV[3] entries, and the nodes staged before
--            ms ARGV[4] (Redis's clock), at most ARGV[3]
-- Returns: { next cursor (scan; else 0), N, then N quadruples of child
-- id, its flup entry, its state (d dead, x cancelled, r removed) and its
-- error text, then pairs of a staged member and its staged entry (the
-- flow's nonce first) }. A child that still waits, runs or is a parent
-- waiting for its own children is left out, as is one finished with its
-- outcome recorded already (its report comes first), whose entry the
-- caller clears once it reported again (a repeated report counts once).
local mode = ARGV[1]
local ids, cursor = {}, '0'
if mode == 'i' then
  for j = 2, #ARGV do ids[#ids + 1] = ARGV[j] end
else
  local r = redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', tonumber(ARGV[3]))
  cursor = r[1]
  for j = 1, #r[2], 2 do ids[#ids + 1] = r[2][j] end
end
local out = {}
for _, id in ipairs(ids) do
  local up = redis.call('HGET', KEYS[1], id)
  if up and redis.call('HEXISTS', KEYS[2], id) == 0 then
    local state, err
    if redis.call('ZSCORE', KEYS[3], id) then
      state = 'd'
      local env = redis.call('HGET', KEYS[4], id)
      err = env and env_decode(env).err or ''
    elseif string.sub(up, 1, 1) ~= 'p' then
      -- Gone without a trace of its end: removed or expired, or
      -- cancelled (a retained record says so), or completed, whose
      -- outcome was recorded before its ack, so this one counts for
      -- nothing there.
      state, err = 'r', ''
      local rec = redis.call('HGET', KEYS[5], id)
      if rec and string.byte(rec, 2) == 2 then state = 'x' end
    end
    if state then
      out[#out + 1] = id
      out[#out + 1] = up
      out[#out + 1] = state
      out[#out + 1] = err
    end
  end
end
local res = { cursor, #out / 4 }
for _, v in ipairs(out) do res[#res + 1] = v end
if mode == 's' then
  local old = redis.call('ZRANGE', KEYS[6], '-inf', '(' .. ARGV[4], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
  for _, m in ipairs(old) do
    local v = redis.call('HGET', KEYS[7], m)
    if v then
      if string.sub(m, 1, 2) == 'l:' then
        -- A leaf's entry starts with its flow's nonce and root, each
        -- with its length (flowstage.lua).
        local n = struct.unpack('>I4', v)
        local fid = string.sub(v, 5, 4 + n)
        local rn = struct.unpack('>I4', v, 5 + n)
        v = fid .. '\n' .. string.sub(v, 9 + n, 8 + n + rn)
      end
      res[#res + 1] = m
      res[#res + 1] = v
    else
      redis.call('ZREM', KEYS[6], m)
    end
  end
end
return res
