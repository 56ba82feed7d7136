-- lib.lua: helpers prepended to every script (scripts cannot call each other).
--
-- Envelope (value of the msg / deadmsg hashes), big-endian. Version 2,
-- written by every script:
--   u8 version(2) | u8 type + 4*flags | u16 failures | u48 firstSentMs |
--   u56 score | u56 sendNonce
--   [flags&1: u56 origScore]        absent: origScore = score
--   [flags&2: u16 errLen | err]     absent: no last error
--   [flags&4: u16 optLen | options] absent: no per-message options
--   body
-- Absent parts cost nothing: a fresh message without options has a 24-byte
-- header (version 1 had 38), which keeps a 128-byte body's hash value in a
-- smaller allocation class. Every score, time and nonce is a whole number
-- below 2^53, so 7 bytes hold it exactly.
-- options: u8 mask, then the fields whose bit is set, in this order:
--   1 u16 maxRetries | 2 u48 expiresAtMs | 4 u32 timeoutMs | 8 u8 snoozes |
--   16 u48 notBeforeMs | 32 u16 hdrLen, headers (opaque here: Go reads them) |
--   64 u8 groupLen, group (producer.WithGroup; flowlib.lua)
-- Version 1 (still read, never written):
--   u8 version(1) | u8 type | u16 failures | f64 firstSentMs | f64 score |
--   f64 origScore | f64 sendNonce | u16 errLen | err bytes | body bytes
-- Both versions keep u8 u8 u16 first, so a reader of the failures
-- (fetch.lua) needs no decode; in version 2 a second byte of 16 or more
-- says the envelope carries options.
-- score is the message's current store score, origScore the score it was
-- sent with (a priority survives retries there), sendNonce the id of the
-- producer call that wrote it last (a resent script recognises itself).
--
-- Prepare score: deadlineSeconds * 1e6 + token, token = salt * 1000 + attempt.
-- The token fences a delivery: ack, rollback and extend must name it.
-- Tokens from HELD_TOKEN up (salt 500 to 999) mark a message taken ahead of
-- its instant (fetch.lua mode 3) and held by its client, not handed to a
-- listener yet; confirm.lua hands it over with the token HELD_TOKEN lower.
-- A token is not unique to a delivery (two deliveries of an id with the
-- same salt and attempt share one): it fences a delivery against the
-- deliveries before and after it, but it is no proof of a script's own
-- earlier run (confirm.lua keeps a record per call for that).
-- Until then it counts as waiting in store: a send merges into it or
-- replaces it, a remove finds it waiting (remove.lua), and a lease that
-- runs out while it is held counts no attempt: the lookahead is an
-- optimisation no caller can see. Token 0 is a removed delivery's
-- tombstone (remove.lua).

local HDR = '>BBHI6I7I7'
local HDR1 = '>BBHddddH'
local TOKEN_MOD = 1000000
local HELD_TOKEN = 500000

-- now_ms returns Redis's clock in ms (rounded down), in µs as a second
-- value, and in ms rounded up as a third: a due time computed from now
-- (range-merge windows, retries, snoozes) starts from the rounded-up ms so
-- that it is never before the instant it stands for.
local function now_ms()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us, s * 1000 + math.ceil(us / 1000)
end

-- fmt_score prints a score exactly (tostring keeps only 14 digits).
local function fmt_score(x)
  return string.format('%.17g', x)
end

-- has_bit reports whether bit b (a power of two) is set in mask.
local function has_bit(mask, b)
  return math.floor(mask / b) % 2 == 1
end

-- opt_decode reads an options block into e (maxr, exp, timeout, snz, nbf,
-- hdrs, grp).
local function opt_decode(e, raw)
  local mask, pos = struct.unpack('>B', raw)
  if has_bit(mask, 1) then e.maxr, pos = struct.unpack('>H', raw, pos) end
  if has_bit(mask, 2) then e.exp, pos = struct.unpack('>I6', raw, pos) end
  if has_bit(mask, 4) then e.timeout, pos = struct.unpack('>I4', raw, pos) end
  if has_bit(mask, 8) then e.snz, pos = struct.unpack('>B', raw, pos) end
  if has_bit(mask, 16) then e.nbf, pos = struct.unpack('>I6', raw, pos) end
  if has_bit(mask, 32) then
    local n
    n, pos = struct.unpack('>H', raw, pos)
    e.hdrs = string.sub(raw, pos, pos + n - 1)
    pos = pos + n
  end
  if has_bit(mask, 64) then
    local n
    n, pos = struct.unpack('>B', raw, pos)
    e.grp = string.sub(raw, pos, pos + n - 1)
  end
end

-- opt_encode is the inverse of opt_decode; '' when e has no options.
local function opt_encode(e)
  local mask, parts = 0, {}
  if e.maxr then mask = mask + 1; parts[#parts + 1] = struct.pack('>H', e.maxr) end
  if e.exp then mask = mask + 2; parts[#parts + 1] = struct.pack('>I6', e.exp) end
  if e.timeout then mask = mask + 4; parts[#parts + 1] = struct.pack('>I4', e.timeout) end
  if e.snz and e.snz > 0 then mask = mask + 8; parts[#parts + 1] = struct.pack('>B', math.min(e.snz, 255)) end
  if e.nbf then mask = mask + 16; parts[#parts + 1] = struct.pack('>I6', e.nbf) end
  if e.hdrs and #e.hdrs > 0 then mask = mask + 32; parts[#parts + 1] = struct.pack('>H', #e.hdrs) .. e.hdrs end
  if e.grp and #e.grp > 0 then mask = mask + 64; parts[#parts + 1] = struct.pack('>B', #e.grp) .. e.grp end
  if mask == 0 then return '' end
  return struct.pack('>B', mask) .. table.concat(parts)
end

local function env_decode(env)
  if string.byte(env, 1) == 1 then
    local _, typ, fails, first, score, orig, nonce, elen, pos = struct.unpack(HDR1, env)
    return {
      typ = typ, fails = fails, first = first, score = score, orig = orig, nonce = nonce,
      err = string.sub(env, pos, pos + elen - 1), body_at = pos + elen, raw = env,
    }
  end
  local _, tf, fails, first, score, nonce, pos = struct.unpack(HDR, env)
  local typ = tf % 4
  local flags = (tf - typ) / 4
  local e = { typ = typ, fails = fails, first = first, score = score, orig = score, nonce = nonce, err = '', raw = env }
  if has_bit(flags, 1) then e.orig, pos = struct.unpack('>I7', env, pos) end
  if has_bit(flags, 2) then
    local n
    n, pos = struct.unpack('>H', env, pos)
    e.err = string.sub(env, pos, pos + n - 1)
    pos = pos + n
  end
  if has_bit(flags, 4) then
    local n
    n, pos = struct.unpack('>H', env, pos)
    opt_decode(e, string.sub(env, pos, pos + n - 1))
    pos = pos + n
  end
  e.body_at = pos
  return e
end

local function env_encode(e, body)
  local err = e.err or ''
  if #err > 4096 then err = string.sub(err, 1, 4096) end
  local opts = opt_encode(e)
  local flags, tail = 0, ''
  if e.orig ~= e.score then
    flags = 1
    tail = struct.pack('>I7', e.orig)
  end
  if #err > 0 then
    flags = flags + 2
    tail = tail .. struct.pack('>H', #err) .. err
  end
  if #opts > 0 then
    flags = flags + 4
    tail = tail .. struct.pack('>H', #opts) .. opts
  end
  return struct.pack(HDR, 2, e.typ + 4 * flags, math.min(e.fails, 65535), e.first, e.score, e.nonce) .. tail .. body
end

-- env_rewrite replaces the header of a stored envelope and keeps its body.
local function env_rewrite(e)
  return env_encode(e, string.sub(e.raw, e.body_at))
end

-- expired reports whether e carries an expiry that now (ms) has reached.
local function expired(e, now)
  return e.exp ~= nil and e.exp <= now
end

local function token_of(score)
  return math.fmod(tonumber(score), TOKEN_MOD)
end

-- is_held reports whether token is a held delivery's (see HELD_TOKEN).
local function is_held(token)
  return token >= HELD_TOKEN
end

-- new_token is a delivery's token (see the prepare score above): a salt
-- below 500 from the call's µs and how many it moved so far (salt), then
-- the attempt; held marks a message taken ahead of its instant. Every fetch
-- path takes its tokens here, so none can stray into the held range.
local function new_token(now_us, salt, attempt, held)
  return (held and HELD_TOKEN or 0) + ((now_us + salt) % 500) * 1000 + math.min(attempt, 999)
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

-- MAX_SNOOZES bounds the snoozes of one message (consumer.Snooze): past it
-- a snooze counts as a failed attempt, so a handler that snoozes forever
-- still ends in the dead queue.
local MAX_SNOOZES = 100

-- to_dead moves e (id's envelope, already out of prepare and store) to the
-- dead queue of slot k and applies the dead retention.
local function to_dead(k, id, e, now, dead_max, dead_age)
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
end

-- reschedule stores e (id's envelope) to wait again: time-based types in
-- store at `due`; priority at e.score in store, or, when it must wait
-- (later) and the slot has one (k.delayed), in the delayed set until due.
local function reschedule(k, id, e, due, later, cmd)
  local time_based = e.typ ~= 2
  if not time_based and k.delayed and later then
    redis.call('ZADD', k.delayed, due, id)
    redis.call('HSET', k.msg, id, env_rewrite(e))
    -- Fetchers sleep until the earliest delayed entry: tell them when it
    -- is this one (the payload starts with d: a delayed due time).
    if cmd ~= '' then
      local first = redis.call('ZRANGE', k.delayed, 0, 0)
      if first[1] == id then redis.call(cmd, k.wake, 'd' .. fmt_score(due)) end
    end
    return
  end
  if time_based then e.score = due end
  redis.call('ZADD', k.store, e.score, id)
  redis.call('HSET', k.msg, id, env_rewrite(e))
  wake_if_head(cmd, k.wake, k.store, time_based, id, e.score)
end

-- rollback_one ends delivery `token` of `id` as failed. It changes nothing
-- unless the prepare entry still carries that token (a stale or repeated
-- call is inert). how says what the handler asked for: '' a retry after
-- the backoff, 'd' dead now, 'r<ms>' a retry after ms, 's<ms>' a snooze of
-- ms (no attempt counted, up to MAX_SNOOZES). The message's own max
-- retries (an option in its envelope) win over max_retries. An expired
-- message is dropped with its body. now is Redis's ms, now_up rounded up.
-- Returns 0 stale, 2 superseded by a re-send that waits in store, 3 dead,
-- 4 waiting again for a retry, 5 expired and dropped, 6 snoozed, 7 held
-- and never handed over: back in store, no attempt counted.
local function rollback_one(k, id, token, err, now, max_retries, backoff, dead_max, dead_age, cmd, how, now_up)
  local s = redis.call('ZSCORE', k.prepare, id)
  if not s or token_of(s) ~= token then return 0 end
  redis.call('ZREM', k.prepare, id)
  if token == 0 then
    -- A tombstone of a removed delivery (remove.lua): gone, and a re-send
    -- that waited behind it may go now.
    local waiting = redis.call('ZSCORE', k.store, id)
    if waiting and cmd ~= '' then redis.call(cmd, k.wake, waiting) end
    return 0
  end
  local env = redis.call('HGET', k.msg, id)
  if not env then return 0 end
  local e = env_decode(env)
  if is_held(token) then
    -- Held for its instant and never handed over (its client died or
    -- stalled before it): it never ran, so it goes back to store at its
    -- score with no attempt counted, as if it had waited there.
    if not redis.call('ZSCORE', k.store, id) then
      redis.call('ZADD', k.store, e.score, id)
      wake_if_head(cmd, k.wake, k.store, true, id, e.score)
    end
    return 7
  end
  local attempt = token % 1000
  e.err = err
  local waiting = redis.call('ZSCORE', k.store, id)
  if waiting or (k.delayed and redis.call('ZSCORE', k.delayed, id)) then
    -- A send arrived while this delivery ran; that send is delivered next
    -- and keeps its own (fresh) attempt count. It was blocked until now:
    -- wake the slot as ack.lua does (a delayed one wakes when due).
    redis.call('HSET', k.msg, id, env_rewrite(e))
    if waiting and cmd ~= '' then redis.call(cmd, k.wake, waiting) end
    return 2
  end
  now_up = now_up or now
  if expired(e, now) then
    redis.call('HDEL', k.msg, id)
    return 5
  end
  how = how or ''
  local kind = string.sub(how, 1, 1)
  local delay = tonumber(string.sub(how, 2))
  if kind == 's' and (e.snz or 0) < MAX_SNOOZES then
    -- A snooze: the attempt does not count, the snooze does.
    e.snz = (e.snz or 0) + 1
    e.fails = attempt - 1
    reschedule(k, id, e, delay > 0 and now_up + delay or now, delay > 0, cmd)
    return 6
  end
  e.fails = attempt
  local maxr = e.maxr or max_retries
  if kind == 'd' or attempt > maxr then
    to_dead(k, id, e, now, dead_max, dead_age)
    return 3
  end
  if not delay then delay = backoff[math.min(attempt, #backoff)] end
  if e.typ == 2 then
    -- RMQ: a retried priority message scores its remaining retries (0..16),
    -- below every fresh priority (> 16).
    e.score = math.min(maxr - attempt, 16)
  end
  reschedule(k, id, e, delay > 0 and now_up + delay or now, delay > 0, cmd)
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
-- (sendbatch.lua lists the result codes). g holds the slot's keys (store,
-- prepare, msg, delayed), now is Redis's ms and now_up the same rounded
-- up, opts the message's options block ('' for none). A priority message
-- whose options say not before a later time waits in the delayed set. It
-- publishes nothing: callers wake the slot once, after all their sends.
-- Returns the result code, the store score, and the delayed due time when
-- the message went to the delayed set.
local function send_one(g, typ, id, score_arg, nonce, body, now, now_up, opts, fresh)
  -- An envelope exists only for a waiting, delayed or in-flight id, so a
  -- new id (the common case) costs no HGET. fresh: the caller read that no
  -- envelope exists, so the id is none of them and none of the three
  -- reads can change the outcome (a removed in-flight id's tombstone has no
  -- envelope and is stored over as new either way).
  local waiting, delayed, inflight
  if not fresh then
    waiting = redis.call('ZSCORE', g.store, id)
    delayed = not waiting and g.delayed and redis.call('ZSCORE', g.delayed, id)
    inflight = not waiting and not delayed and redis.call('ZSCORE', g.prepare, id)
  end
  local old
  if waiting or delayed or inflight then
    local env = redis.call('HGET', g.msg, id)
    if env then
      old = env_decode(env)
      if old.nonce == nonce then return 0 end
    end
  end
  if inflight and old and typ ~= 2 and is_held(token_of(inflight)) then
    -- Held for its instant (taken ahead by a lookahead fetch, not handed
    -- over): it counts as waiting in store, so the send merges into it or
    -- replaces it there, and the holder's confirm finds it gone.
    redis.call('ZREM', g.prepare, id)
    redis.call('ZADD', g.store, old.score, id)
    waiting, inflight = old.score, nil
  end
  local e = { typ = typ, fails = 0, first = now, nonce = nonce, err = '' }
  if opts and opts ~= '' then opt_decode(e, opts) end
  if typ == 1 then
    if waiting then
      e.score = tonumber(waiting)
    else
      local range = tonumber(score_arg)
      e.score = (range > 0 and now_up or now) + range
    end
  else
    e.score = tonumber(score_arg)
  end
  e.orig = e.score
  local result
  if (waiting or delayed) and old then
    -- Merge into the waiting message: keep its history, take the new body
    -- and options.
    e.first, e.fails, e.err, e.snz = old.first, old.fails, old.err, old.snz
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
  redis.call('HSET', g.msg, id, env_encode(e, body))
  if result == 2 then return result, e.score end
  if typ == 2 and g.delayed and e.nbf and e.nbf > now then
    if waiting then redis.call('ZREM', g.store, id) end
    redis.call('ZADD', g.delayed, e.nbf, id)
    return result, e.score, e.nbf
  end
  if delayed then redis.call('ZREM', g.delayed, id) end
  redis.call('ZADD', g.store, e.score, id)
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

-- remove_id deletes id wherever it is (remove.lua's header says how, and
-- what the sum it returns means); schedule.lua removes a pending tick with it.
local function remove_id(store, prepare, msg, delayed, id)
  local what = 0
  if redis.call('ZREM', store, id) == 1 then what = what + 1 end
  if redis.call('ZREM', delayed, id) == 1 then what = what + 2 end
  local s = redis.call('ZSCORE', prepare, id)
  local token = s and token_of(s)
  if token and is_held(token) then
    -- Held for its instant: it never ran, so it counts as waiting and
    -- leaves no tombstone; its holder's confirm finds it gone.
    redis.call('ZREM', prepare, id)
    if what % 2 == 0 then what = what + 1 end
  elseif token and token ~= 0 then
    local deadline = math.floor(tonumber(s) / TOKEN_MOD) * TOKEN_MOD
    redis.call('ZADD', prepare, deadline, id)
    what = what + 4
  end
  if what > 0 then redis.call('HDEL', msg, id) end
  return what
end

-- UNIQ_TRIM bounds the past entries one unique send clears from its slot's
-- unique set, per message of the call: each such send records one entry
-- and clears up to two past ones, so the set holds the live entries and
-- at most a few past ones, never a growing tail.
local UNIQ_TRIM = 2

-- send_groups reads the group headers of a send call (sendbatch.lua,
-- gsend.lua) whose groups take base keys each: a group of unique sends
-- (its type plus 8) has two keys more, one with an event log (plus 16)
-- one key and one header argument more. It returns G, kb (the index in
-- KEYS before group g's keys), hdr (the index in ARGV of group g's
-- header) and the index of the first message argument.
local function send_groups(base)
  local G, kb, hdr, at, n = 0, {}, {}, 2, 1
  while n <= #KEYS do
    G = G + 1
    kb[G], hdr[G] = n - 1, at
    local typ = tonumber(ARGV[at])
    n = n + base + (typ % 16 >= 8 and 2 or 0) + (has_bit(typ, 16) and 1 or 0)
    at = at + (has_bit(typ, 16) and 3 or 2)
  end
  return G, kb, hdr, at
end

-- uniq_claim is the check and the record of a unique send
-- (producer.WithUniqueFor): u holds the slot's uniq ZSET (id -> until ms)
-- and uniqn HASH (id -> send nonce of the send that recorded it). It
-- returns 1 when the send may go (the id is claimed until now + ms), -1
-- when a send of the id recorded a window that still lasts (whatever
-- became of that message), and 0 when that recorded send is this call's
-- own earlier run (go-redis sent the script again after a lost reply):
-- its work is done, nothing more is written.
local function uniq_claim(u, id, ms, nonce, now)
  local untl = redis.call('ZSCORE', u.uniq, id)
  if untl then
    if redis.call('HGET', u.uniqn, id) == nonce then return 0 end
    if tonumber(untl) > now then return -1 end
  end
  redis.call('ZADD', u.uniq, now + ms, id)
  redis.call('HSET', u.uniqn, id, nonce)
  return 1
end

-- uniq_trim clears up to n entries of u whose window has passed (see
-- UNIQ_TRIM).
local function uniq_trim(u, now, n)
  local old = redis.call('ZRANGE', u.uniq, '-inf', now, 'BYSCORE', 'LIMIT', 0, n)
  if #old > 0 then
    redis.call('ZREM', u.uniq, unpack(old))
    redis.call('HDEL', u.uniqn, unpack(old))
  end
end
