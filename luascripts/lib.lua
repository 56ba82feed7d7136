-- lib.lua: helpers prepended to every script (scripts cannot call each other).
--
-- Envelope (value of the msg / deadmsg hashes), big-endian:
--   u8 version(1) | u8 type | u16 failures | f64 firstSentMs | f64 score |
--   f64 origScore | f64 sendNonce | u16 errLen | err bytes | body bytes
-- score is the message's current store score, origScore the score it was
-- sent with (a priority survives retries there), sendNonce the id of the
-- producer call that wrote it last (a resent script recognises itself).
--
-- Prepare score: deadlineSeconds * 1e6 + token, token = salt * 1000 + attempt.
-- The token fences a delivery: ack, rollback and extend must name it.

local HDR = '>BBHddddH'
local TOKEN_MOD = 1000000

-- now_ms returns Redis's clock in ms, and in µs as a second value.
local function now_ms()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- fmt_score prints a score exactly (tostring keeps only 14 digits).
local function fmt_score(x)
  return string.format('%.17g', x)
end

local function env_decode(env)
  local _, typ, fails, first, score, orig, nonce, elen, pos = struct.unpack(HDR, env)
  return {
    typ = typ, fails = fails, first = first, score = score, orig = orig, nonce = nonce,
    err = string.sub(env, pos, pos + elen - 1), body_at = pos + elen, raw = env,
  }
end

local function env_encode(e, body)
  local err = e.err or ''
  if #err > 4096 then err = string.sub(err, 1, 4096) end
  return struct.pack(HDR, 1, e.typ, math.min(e.fails, 65535), e.first, e.score, e.orig, e.nonce, #err) .. err .. body
end

-- env_rewrite replaces the header of a stored envelope and keeps its body.
local function env_rewrite(e)
  return env_encode(e, string.sub(e.raw, e.body_at))
end

local function token_of(score)
  return math.fmod(tonumber(score), TOKEN_MOD)
end

-- head_of returns the store's first id and score in consume order.
local function head_of(store, time_based)
  local h
  if time_based then
    h = redis.call('ZRANGE', store, 0, 0, 'WITHSCORES')
  else
    h = redis.call('ZRANGE', store, -1, -1, 'WITHSCORES')
  end
  return h[1], h[2]
end

-- wake_if_head publishes on the slot channel when id is now the first
-- message a fetcher would take, so sleeping fetchers re-plan.
local function wake_if_head(cmd, channel, store, time_based, id, score)
  if cmd ~= '' and head_of(store, time_based) == id then
    redis.call(cmd, channel, fmt_score(score))
  end
end

-- MCHUNK bounds the arguments one variadic call takes: unpack pushes them
-- all on Lua's C stack, which holds about 8,000.
local MCHUNK = 512

-- mcall runs a variadic command (ZMSCORE, HMGET, ZREM, HDEL, ZADD, HSET)
-- on key over args, step arguments per element (2 for ZADD and HSET), in
-- chunks. One call per chunk instead of one per element is most of what a
-- script spends per message. Array replies come back concatenated, integer
-- replies summed.
local function mcall(cmd, key, args, step)
  step = step or 1
  local out, sum = {}, 0
  local i, n = 1, #args
  while i <= n do
    local j = math.min(i + MCHUNK * step - 1, n)
    local r = redis.call(cmd, key, unpack(args, i, j))
    if type(r) == 'table' then
      for k = 1, #r do out[#out + 1] = r[k] end
    else
      sum = sum + r
    end
    i = j + 1
  end
  return out, sum
end

-- dead_trim deletes the given dead ids of slot k, bodies with them.
local function dead_trim(k, old)
  if #old > 0 then
    mcall('ZREM', k.dead, old)
    mcall('HDEL', k.deadmsg, old)
  end
end

-- rollback_one ends delivery `token` of `id` as failed. It changes nothing
-- unless the prepare entry still carries that token (a stale or repeated
-- call is inert). Returns 0 stale, 2 superseded by a re-send that waits in
-- store, 3 dead, 4 back in store.
local function rollback_one(k, id, token, err, now, max_retries, backoff, dead_max, dead_age, cmd)
  local s = redis.call('ZSCORE', k.prepare, id)
  if not s or token_of(s) ~= token then return 0 end
  redis.call('ZREM', k.prepare, id)
  local env = redis.call('HGET', k.msg, id)
  if not env then return 0 end
  local e = env_decode(env)
  local attempt = token % 1000
  e.err = err
  local waiting = redis.call('ZSCORE', k.store, id)
  if waiting then
    -- A send arrived while this delivery ran; that send is delivered next
    -- and keeps its own (fresh) attempt count. It was blocked until now:
    -- wake the slot as ack.lua does.
    redis.call('HSET', k.msg, id, env_rewrite(e))
    if cmd ~= '' then redis.call(cmd, k.wake, waiting) end
    return 2
  end
  e.fails = attempt
  local time_based = e.typ ~= 2
  if attempt > max_retries then
    redis.call('ZADD', k.dead, now, id)
    redis.call('HSET', k.deadmsg, id, env_rewrite(e))
    redis.call('HDEL', k.msg, id)
    -- Retention: oldest first, body with it.
    if dead_age > 0 then
      dead_trim(k, redis.call('ZRANGE', k.dead, '-inf', '(' .. (now - dead_age), 'BYSCORE'))
    end
    if dead_max > 0 then
      local n = redis.call('ZCARD', k.dead)
      if n > dead_max then dead_trim(k, redis.call('ZRANGE', k.dead, 0, n - dead_max - 1)) end
    end
    return 3
  end
  local score
  if time_based then
    score = now + backoff[math.min(attempt, #backoff)]
  else
    -- RMQ: a retried priority message scores its remaining retries (0..16),
    -- below every fresh priority (> 16).
    score = math.min(max_retries - attempt, 16)
  end
  e.score = score
  redis.call('ZADD', k.store, score, id)
  redis.call('HSET', k.msg, id, env_rewrite(e))
  wake_if_head(cmd, k.wake, k.store, time_based, id, score)
  return 4
end

local function parse_backoff(argv, at)
  local n = tonumber(argv[at])
  local b = {}
  for i = 1, n do b[i] = tonumber(argv[at + i]) end
  if n == 0 then b[1] = 0 end
  return b, at + n + 1
end

-- send_one stores one message or merges it into the one with the same id
-- (sendbatch.lua lists the result codes). now is Redis's ms.
-- It publishes nothing: callers wake the slot once, after all their sends.
local function send_one(store, prepare, msg, typ, id, score_arg, nonce, body, now)
  -- An envelope exists only for a waiting or in-flight id, so a new id
  -- (the common case) costs no HGET.
  local waiting = redis.call('ZSCORE', store, id)
  local inflight = not waiting and redis.call('ZSCORE', prepare, id)
  local old
  if waiting or inflight then
    local env = redis.call('HGET', msg, id)
    if env then
      old = env_decode(env)
      if old.nonce == nonce then return 0 end
    end
  end
  local e = { typ = typ, fails = 0, first = now, nonce = nonce, err = '' }
  if typ == 1 then
    if waiting then
      e.score = tonumber(waiting)
    else
      e.score = now + tonumber(score_arg)
    end
  else
    e.score = tonumber(score_arg)
  end
  e.orig = e.score
  local result
  if waiting and old then
    -- Merge into the waiting message: keep its history, take the new body.
    e.first, e.fails, e.err = old.first, old.fails, old.err
    if typ == 1 then
      e.orig = old.orig
      result = 2
    else
      result = 3
    end
  elseif old and inflight then
    result = 4
  else
    result = 1
  end
  redis.call('HSET', msg, id, env_encode(e, body))
  if result ~= 2 then
    redis.call('ZADD', store, e.score, id)
  end
  return result, e.score
end



-- fence returns an RMQFENCED error reply when epoch (the caller's owner
-- epoch, a decimal string) is not the one stored at key, nil when the call
-- may go on. ZooKeeper mode only: the owner epoch of a slot is the creation
-- zxid of its owner's ZooKeeper node, raised by takeover.lua.
local function fence(key, epoch)
  local cur = redis.call('GET', key)
  if cur ~= epoch then
    return redis.error_reply('RMQFENCED owner epoch ' .. tostring(epoch) .. ' is not the current one (' .. tostring(cur) .. ')')
  end
end

-- int_cmp compares two non-negative decimal integers given as strings, without
-- the loss of precision of Lua's doubles: -1, 0 or 1.
local function int_cmp(a, b)
  a = string.gsub(a, '^0+(%d)', '%1')
  b = string.gsub(b, '^0+(%d)', '%1')
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a == b then return 0 end
  return a < b and -1 or 1
end
