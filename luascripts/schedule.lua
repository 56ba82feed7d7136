-- schedule.lua: the schedules of one topic slot and their pending ticks.
-- A schedule's ticks all go to one slot of its topic, the one its name
-- picks, so its definition, its state and its pending tick (a fixed-time
-- message, or a priority message not before the tick, with the id
-- <name>@<tick ms>) change together in one call.
--
-- KEYS[1] -> due ZSET: name -> pending tick (ms) of each running schedule
-- KEYS[2] -> state HASH: name -> "next;last;fired;skipped;ver;paused;gen"
-- KEYS[3] -> definition HASH: name -> what the Go side reads (spec, ...)
-- KEYS[4] -> message HASH: name -> the ticks' type, priority, TTL, options
--            block and body, packed '>BI7I6H' typ prio ttl #opts, opts, body
-- KEYS[5] -> store ZSET    \
-- KEYS[6] -> prepare ZSET   | of the topic slot
-- KEYS[7] -> msg HASH       |
-- KEYS[8] -> wake channel   |
-- KEYS[9] -> delayed ZSET  /
-- ARGV[1] -> op: set, pause, resume, remove, trigger, due or roll
-- ARGV[2] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[3] -> events channel (plain PUBLISH: not a key, it reaches every
--            node of a cluster) or '' for none
-- ARGV[4] -> event prefix: the slot as the events name it; after every
--            change the script publishes prefix .. '\t' .. the slot's
--            earliest pending tick ('' when none runs)
-- then per op:
--   set     ARGV[5] name, [6] generation, [7] first tick (0: paused),
--           [8] send nonce, [9] definition, [10] message record
--   pause   ARGV[5] name
--   resume  ARGV[5] name, [6] first tick, [7] send nonce
--   remove  ARGV[5] name, [6] generation ('' any)
--   trigger ARGV[5] name, [6] send nonce
--   due     ARGV[5] limit: read only
--   roll    ARGV[5] send nonce, then per schedule: name, the state's ver
--           it was planned from, ticks skipped, k, then k ticks (ms): the
--           missed ticks to fire now, then the new pending tick
-- Returns:
--   set, resume: {1, ver}; {-1, now} when the tick is not after Redis's
--     clock (plan again from now); {0} no such schedule; {2, ver} resume
--     of a running schedule
--   pause: {1, ver}, {2, ver} already paused, {0} no such schedule
--   remove: {1, generation} or {0} (none, or of another generation)
--   trigger: {1, message id} or {0}
--   due: {now, earliest pending tick or '', name, state, definition, ...}
--     for up to limit schedules whose pending tick is due
--   roll: {earliest pending tick or '', code, ...}: one code per schedule,
--     1 rolled, 0 changed since it was planned
-- The pending tick is sent ahead and fires on the timer of fixed-time
-- messages. A change to a schedule whose pending tick is not due yet by
-- Redis's clock removes that tick; a tick that is due has fired (its
-- message may be in flight) and counts as fired.
local op = ARGV[1]
local wake = ARGV[2]
local events = ARGV[3]
local now, _, now_up = now_ms()
local k = { store = KEYS[5], prepare = KEYS[6], msg = KEYS[7], delayed = KEYS[9] }

local function st_decode(raw)
  if not raw then return nil end
  local v = {}
  for x in string.gmatch(raw, '[^;]+') do v[#v + 1] = x end
  return {
    next = tonumber(v[1]), last = tonumber(v[2]), fired = tonumber(v[3]), skipped = tonumber(v[4]),
    ver = tonumber(v[5]), paused = v[6] == '1', gen = v[7] or '',
  }
end

local function st_encode(st)
  return table.concat({ fmt_score(st.next), fmt_score(st.last), fmt_score(st.fired), fmt_score(st.skipped),
    fmt_score(st.ver), st.paused and '1' or '0', st.gen }, ';')
end

local function tick_id(name, at)
  return name .. '@' .. fmt_score(at)
end

-- settle: the pending tick of st either has not come due (it is removed)
-- or has fired (it is counted).
local function settle(k, name, st)
  if st.next <= 0 then return end
  if st.next > now then
    remove_id(k.store, k.prepare, k.msg, k.delayed, tick_id(name, st.next))
  else
    st.fired = st.fired + 1
    st.last = math.max(st.last, st.next)
  end
  st.next = 0
end

-- The earliest tick this call sent to store and to the delayed set: the
-- slot's fetchers are woken once, after all sends (flush_wake).
local best_id, best, dbest_id, dbest
local sent_time_based = true

-- send_tick sends the message of tick `at` (ms) from the stored record:
-- due at the tick (fixed-time) or not before it (priority), its TTL
-- counted from the tick. A tick id without an envelope is new (one HGET,
-- nil for a new id, rather than send_one's reads of store, delayed and
-- prepare).
local function send_tick(k, name, at, nonce)
  local raw = redis.call('HGET', KEYS[4], name)
  local typ, prio, ttl, olen, pos = struct.unpack('>BI7I6H', raw)
  local opts = string.sub(raw, pos, pos + olen - 1)
  local body = string.sub(raw, pos + olen)
  if ttl > 0 or typ == 2 then
    local e = {}
    if opts ~= '' then opt_decode(e, opts) end
    if ttl > 0 then e.exp = at + ttl end
    if typ == 2 then e.nbf = at end
    opts = opt_encode(e)
  end
  local id = tick_id(name, at)
  local score = typ == 2 and prio or at
  sent_time_based = typ ~= 2
  local fresh = not redis.call('HGET', k.msg, id)
  local _, sc, due = send_one(k, typ, id, score, tonumber(nonce), body, now, now_up, opts, fresh)
  if due then
    if not dbest or due < dbest then dbest_id, dbest = id, due end
  elseif not best or (typ == 2 and sc > best) or (typ ~= 2 and sc < best) then
    best_id, best = id, sc
  end
  return id
end

-- flush_wake wakes the slot's fetchers when a tick this call sent heads
-- the store (they sleep until the head they know), or the delayed set
-- ('d' marks a delayed due time).
local function flush_wake(k)
  if wake == '' then return end
  if best then wake_if_head(wake, KEYS[8], k.store, sent_time_based, best_id, best) end
  if dbest then
    local first = redis.call('ZRANGE', k.delayed, 0, 0)
    if first[1] == dbest_id then redis.call(wake, KEYS[8], 'd' .. fmt_score(dbest)) end
  end
end

local function head()
  local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return h[2] or ''
end

local function publish(k)
  flush_wake(k)
  if events ~= '' then redis.call('PUBLISH', events, ARGV[4] .. '\t' .. head()) end
end

local function save(name, st)
  redis.call('HSET', KEYS[2], name, st_encode(st))
  if st.next > 0 then
    redis.call('ZADD', KEYS[1], st.next, name)
  else
    redis.call('ZREM', KEYS[1], name)
  end
end

if op == 'due' then
  local names = redis.call('ZRANGE', KEYS[1], '-inf', now, 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[5]))
  local out = { now, head() }
  if #names == 0 then return out end
  local states = redis.call('HMGET', KEYS[2], unpack(names))
  local defs = redis.call('HMGET', KEYS[3], unpack(names))
  for i, name in ipairs(names) do
    out[#out + 1] = name
    out[#out + 1] = states[i] or ''
    out[#out + 1] = defs[i] or ''
  end
  return out
end

if op == 'roll' then
  local nonce = ARGV[5]
  local res = { '' }
  local a = 6
  while a <= #ARGV do
    local name, ver, skipped, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local st = st_decode(redis.call('HGET', KEYS[2], name))
    -- Planned from this very state, and its pending tick has fired:
    -- nothing else rolled or changed it since.
    if st and st.ver == ver and not st.paused and st.next > 0 and st.next <= now then
      local last = st.next
      for j = 1, n do
        local at = tonumber(ARGV[a + 3 + j])
        if at > 0 then send_tick(k, name, at, nonce) end
        if j < n then last = at end
      end
      -- The pending tick that came due, and the n - 1 missed ones fired now.
      st.fired = st.fired + n
      st.skipped = st.skipped + skipped
      st.last = math.max(st.last, last)
      st.next = tonumber(ARGV[a + 3 + n])
      st.ver = st.ver + 1
      save(name, st)
      res[#res + 1] = 1
    else
      res[#res + 1] = 0
    end
    a = a + 4 + n
  end
  publish(k)
  res[1] = head()
  return res
end

local name = ARGV[5]
local st = st_decode(redis.call('HGET', KEYS[2], name))

if op == 'set' then
  local first = tonumber(ARGV[7])
  if first > 0 and first <= now then return { -1, now } end
  if st then
    settle(k, name, st)
  else
    st = { next = 0, last = 0, fired = 0, skipped = 0, ver = 0 }
  end
  st.ver = st.ver + 1
  st.gen = ARGV[6]
  st.paused = first == 0
  redis.call('HSET', KEYS[3], name, ARGV[9])
  redis.call('HSET', KEYS[4], name, ARGV[10])
  if first > 0 then
    send_tick(k, name, first, ARGV[8])
    st.next = first
  end
  save(name, st)
  publish(k)
  return { 1, st.ver }
end

if not st then return { 0 } end

if op == 'pause' then
  if st.paused then return { 2, st.ver } end
  settle(k, name, st)
  st.paused = true
  st.ver = st.ver + 1
  save(name, st)
  publish(k)
  return { 1, st.ver }
end

if op == 'resume' then
  if not st.paused then return { 2, st.ver } end
  local first = tonumber(ARGV[6])
  if first <= now then return { -1, now } end
  send_tick(k, name, first, ARGV[7])
  st.next = first
  st.paused = false
  st.ver = st.ver + 1
  save(name, st)
  publish(k)
  return { 1, st.ver }
end

if op == 'remove' then
  if ARGV[6] ~= '' and st.gen ~= ARGV[6] then return { 0 } end
  settle(k, name, st)
  redis.call('HDEL', KEYS[2], name)
  redis.call('HDEL', KEYS[3], name)
  redis.call('HDEL', KEYS[4], name)
  redis.call('ZREM', KEYS[1], name)
  publish(k)
  return { 1, st.gen }
end

if op == 'trigger' then
  -- An extra firing now; a pending tick of this very ms keeps its own id.
  local at = now
  if at == st.next then at = at + 1 end
  local id = send_tick(k, name, at, ARGV[6])
  flush_wake(k)
  st.fired = st.fired + 1
  st.last = math.max(st.last, at)
  redis.call('HSET', KEYS[2], name, st_encode(st))
  return { 1, id }
end

return redis.error_reply('ERR schedule.lua: unknown op ' .. tostring(op))
