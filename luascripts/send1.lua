-- send1.lua: send one message without options, the common single send,
-- at a fraction of sendbatch.lua's cost. A new id (the common case) takes
-- one HSETNX and one ZADD, before any lib.lua definition is made (each
-- costs Redis time on every call): that path writes what sendbatch.lua's
-- path for a new id writes, with its own few lines. The producer packs
-- the envelope itself, with its estimate of Redis's clock as the first-
-- send time, so that path reads no clock and builds no string: Redis
-- stores the argument as it came. The producer asks for Redis's clock
-- (type + 8) when its estimate is older than a few seconds, and a
-- range-merge window starts from it; the script then writes its own ms
-- into the header and returns its clock, from which the producer
-- estimates it again. An id that exists (waiting, delayed, in flight, or
-- held for its instant) goes through send_one, as in sendbatch.lua, so
-- the results are the same.
--
-- KEYS[1] -> store ZSET
-- KEYS[2] -> prepare ZSET
-- KEYS[3] -> msg HASH
-- KEYS[4] -> wake channel
-- KEYS[5] -> delayed ZSET (priority messages that wait for a time)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> type: 1 range-merge, 2 priority, 3 fixed-time; plus 8 to
--            stamp Redis's clock (always so for range-merge)
-- ARGV[3] -> id
-- ARGV[4] -> score: the due ms (fixed-time), the priority, or the window
--            in ms (range-merge)
-- ARGV[5] -> envelope: lib.lua's version 2 header without options (the
--            type, no failures, the first-send ms, the score, the send
--            nonce), then the body
-- Returns: { result } or, when the script read Redis's clock, { result,
-- Redis's µs }; result as sendbatch.lua's: 1 stored as new, 2 merged, 3
-- replaced, 4 stored while the id is in flight, 0 already stored by this
-- send (a rerun changes nothing).
local cmd, typ, id, env = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[5]
local stamp = typ >= 8
if stamp then typ = typ - 8 end
local time_based = typ ~= 2
-- The head before this send, in consume order (lib.lua's head_of).
local h = time_based and redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES') or redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local score = tonumber(ARGV[4])
-- Redis's ms, down and up, and its µs (lib.lua's now_ms), when asked for.
local now, now_up, now_us
if stamp or typ == 1 then
  local t = redis.call('TIME')
  local sec, us = tonumber(t[1]), tonumber(t[2])
  now, now_up, now_us = sec * 1000 + math.floor(us / 1000), sec * 1000 + math.ceil(us / 1000), sec * 1000000 + us
  if typ == 1 then
    -- A window starts from Redis's ms rounded up (a zero window from
    -- now: any later fetch is after the send).
    score = (score > 0 and now_up or now) + score
  end
  -- The header's first-send ms and score are Redis's (bytes 5 to 17);
  -- the nonce and the body follow as they came.
  env = struct.pack('>BBHI6I7', 2, typ, 0, now, score) .. string.sub(env, 18)
end

-- wakes reports whether a message at score s makes the slot's fetchers
-- look again: it comes before the old head (they sleep until the head they
-- know of), or the old head is blocked behind its own delivery (they wait
-- for a wake-up). The payload is the score, exact (lib.lua's fmt_score).
local function wakes(s)
  local head = h[2] and tonumber(h[2])
  return not head or (time_based and s < head) or (not time_based and s > head) or redis.call('ZSCORE', KEYS[2], h[1])
end

-- An envelope exists exactly for a waiting, delayed or in-flight id: none
-- means a new message.
if redis.call('HSETNX', KEYS[3], id, env) == 1 then
  redis.call('ZADD', KEYS[1], score, id)
  if cmd ~= '' and wakes(score) then redis.call(cmd, KEYS[4], string.format('%.17g', score)) end
  if now_us then return { 1, now_us } end
  return { 1 }
end

-- lib.lua's definitions go here
if not now then now, now_us, now_up = now_ms() end
local r, s, due = send_one({ store = KEYS[1], prepare = KEYS[2], msg = KEYS[3], delayed = KEYS[5] },
  typ, id, ARGV[4], struct.unpack('>I7', env, 18), string.sub(env, 25), now, now_up, '', false)
if r > 0 and due then
  -- A delayed message that is now the earliest: fetchers sleep until the
  -- earliest delayed due time ('d' marks a delayed due time).
  local first = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
  if cmd ~= '' and tonumber(first[2]) == due then redis.call(cmd, KEYS[4], 'd' .. fmt_score(due)) end
elseif r > 0 and cmd ~= '' and wakes(s) then
  redis.call(cmd, KEYS[4], fmt_score(s))
end
return { r, now_us }
