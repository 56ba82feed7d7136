-- flowact.lua: make the staged nodes of a flow in one topic slot live
-- (flowstage.lua staged them), or discard them. Activation runs once the
-- flow's root record is committed (its own activation is the commit), so
-- a leaf is deliverable only in a flow that is whole; a flow that was
-- never committed is discarded, and nothing of it was ever visible.
--
-- KEYS[1] -> stageq ZSET
-- KEYS[2] -> staged HASH
-- KEYS[3] -> flup HASH: child id -> its parent's ref, for the reconciler
-- KEYS[4] -> store ZSET
-- KEYS[5] -> prepare ZSET
-- KEYS[6] -> msg HASH
-- KEYS[7] -> wake channel ("T" after an activation: the slot's consumers
--            scan it for flow outcomes nobody reported from now on)
-- KEYS[8] -> delayed ZSET
-- KEYS[9] -> gq ZSET     \ the slot's group keys (flowlib.lua): a leaf
-- KEYS[10] -> gturn ZSET / with a group waits in its group's queue
-- KEYS[10+j] -> the record HASH of the j-th "r:" member below
-- ARGV[1] -> 'a' activate, 'x' discard
-- ARGV[2] -> the flow's nonce (fid): members of another flow are left alone
-- ARGV[3] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[4..] -> members: "l:<id>" a leaf, "r:<id>" a parent's record
-- Returns: how many members it activated or discarded. Running twice does
-- nothing more: an activated member is no longer staged.
local mode, fid, cmd = ARGV[1], ARGV[2], ARGV[3]
local g = { store = KEYS[4], prepare = KEYS[5], msg = KEYS[6], delayed = KEYS[8], gq = KEYS[9], gturn = KEYS[10] }
local now, _, now_up = now_ms()
local done, r = 0, 0
for i = 4, #ARGV do
  local m = ARGV[i]
  local kind, id = string.sub(m, 1, 2), string.sub(m, 3)
  local v = redis.call('HGET', KEYS[2], m)
  local rec
  if kind == 'r:' then
    r = r + 1
    rec = KEYS[10 + r]
  end
  if kind == 'r:' and v and string.sub(v, 1, #fid + 1) == fid .. '\n' then
    -- A record's staged entry: "<fid>\n<root ref>".
    if mode == 'a' then
      redis.call('HDEL', rec, 'stg')
      local up = redis.call('HGET', rec, 'up')
      if up and up ~= '' then redis.call('HSET', KEYS[3], id, 'p' .. up) end
    else
      redis.call('DEL', rec)
    end
    redis.call('HDEL', KEYS[2], m)
    redis.call('ZREM', KEYS[1], m)
    done = done + 1
  elseif v and kind == 'l:' then
    local parts, pos = {}, 1
    for k = 1, 6 do
      local n = struct.unpack('>I4', v, pos)
      parts[k] = string.sub(v, pos + 4, pos + 3 + n)
      pos = pos + 4 + n
    end
    if parts[1] == fid then
      if mode == 'a' then
        local typ = tonumber(parts[3])
        local score = parts[4]
        if typ == 3 and tonumber(score) == 0 then score = tostring(now) end
        local o = {}
        if parts[5] ~= '' then opt_decode(o, parts[5]) end
        local res, s, due, w
        if o.grp then
          -- A leaf with a group (producer.WithGroup) is placed as gsend.lua
          -- places a grouped send: in its group's queue.
          res, w, due = gsend_one(g, typ, id, score, tonumber(fid), string.sub(v, pos), now, now_up, parts[5])
        else
          -- No envelope: the id is none of waiting, delayed or in flight,
          -- and send_one may skip its three reads (its fresh path).
          local fresh = redis.call('HEXISTS', g.msg, id) == 0
          res, s, due = send_one(g, typ, id, score, tonumber(fid), string.sub(v, pos), now, now_up, parts[5], fresh)
        end
        if res > 0 and cmd ~= '' then
          if due then
            local first = redis.call('ZRANGE', g.delayed, 0, 0, 'WITHSCORES')
            if tonumber(first[2]) == due then redis.call(cmd, KEYS[7], 'd' .. fmt_score(due)) end
          elseif o.grp then
            if w then redis.call(cmd, KEYS[7], fmt_score(w)) end
          else
            wake_if_head(cmd, KEYS[7], g.store, typ ~= 2, id, s)
          end
        end
        if parts[6] ~= '' then redis.call('HSET', KEYS[3], id, parts[6]) end
      end
      redis.call('HDEL', KEYS[2], m)
      redis.call('ZREM', KEYS[1], m)
      done = done + 1
    end
  end
end
if mode == 'a' and done > 0 and cmd ~= '' then redis.call(cmd, KEYS[7], 'T') end
return done
