-- lifelib.lua: a message's life after hand-off, for the scripts that end or
-- change a delivery (prepended after grouplib.lua's definitions, to the
-- scripts that use them). A topic with retention keeps its finished
-- messages for a while, one with an event log records every transition,
-- and any topic tells the processes that wait for a message that it
-- finished. Each record is written by the call that makes the transition,
-- so it exists exactly when the transition happened; a resent call finds
-- the transition made already (its own checks say so) and records nothing.
--
-- A life group's keys (lk), all in the slot's hash tag:
--   done    HASH id -> the finished message's record (below)
--   doneq   ZSET id -> when its record goes (ms): finishedAt + retention
--   events  STREAM  the slot's event log; entries carry t (type), id, a
--           (attempt) and, when there is some, d (data)
--   waiters HASH id -> how many Wait calls are registered for it
--   finch   pub/sub channel: "<state><len(id)>:<id><data>" for a waited-for
--           id that finished (state c completed, d dead, e expired, x
--           cancelled, r removed)
--   progress HASH id -> "<delivery token>:<progress>": the latest progress
--           of an in-flight delivery (progress.lua), cleared when it ends
--
-- Record (value of done), big-endian:
--   u8 version(1) | u8 state (1 completed, 2 cancelled) | u48 finishedAtMs |
--   u32 resultLen | result | the message's envelope (lib.lua)

local LIFE_COMPLETED = 1
local LIFE_CANCELLED = 2

-- LIFE_TRIM bounds how many lapsed records one call deletes beyond the
-- ones it adds, so a call's work stays bounded and the records still
-- shrink whenever the slot is busy.
local LIFE_TRIM = 64

-- life_keys returns a life group's keys from KEYS[at], KEYS[at+1], ...
local function life_keys(at)
  return { done = KEYS[at], doneq = KEYS[at + 1], events = KEYS[at + 2], waiters = KEYS[at + 3], finch = KEYS[at + 4], progress = KEYS[at + 5] }
end

-- LIFE_KEYS is how many keys life_keys takes.
local LIFE_KEYS = 6

-- life_ended forgets the progress of deliveries that ended (ids): one
-- HDEL, which costs what an EXISTS to skip it would when there is none.
local function life_ended(lk, ids)
  if #ids > 0 then mcall('HDEL', lk.progress, ids) end
end

-- life_event appends one event to the slot's log (max: about how many to
-- keep; 0: no log). The entry's id is Redis's clock, which the reader
-- shows as the event's time.
local function life_event(lk, max, typ, id, attempt, data)
  if max <= 0 then return end
  if data and #data > 0 then
    redis.call('XADD', lk.events, 'MAXLEN', '~', max, '*', 't', typ, 'id', id, 'a', attempt, 'd', data)
  else
    redis.call('XADD', lk.events, 'MAXLEN', '~', max, '*', 't', typ, 'id', id, 'a', attempt)
  end
end

-- life_trim deletes up to n + LIFE_TRIM records whose time is up.
local function life_trim(lk, now, n)
  local old = redis.call('ZRANGE', lk.doneq, '-inf', now, 'BYSCORE', 'LIMIT', 0, n + LIFE_TRIM)
  if #old > 0 then
    mcall('ZREM', lk.doneq, old)
    mcall('HDEL', lk.done, old)
  end
end

-- life_keep stores the records of finished messages for retention ms:
-- recs is a list of { id, state, result, envelope }. The keys expire with
-- the last record, so a topic whose retention is turned off leaves
-- nothing behind once its records lapsed.
local function life_keep(lk, recs, now, retention)
  if retention <= 0 or #recs == 0 then return end
  life_trim(lk, now, #recs)
  local hs, zs = {}, {}
  for _, r in ipairs(recs) do
    hs[#hs + 1] = r[1]
    hs[#hs + 1] = struct.pack('>BBI6I4', 1, r[2], now, #r[3]) .. r[3] .. r[4]
    zs[#zs + 1] = now + retention
    zs[#zs + 1] = r[1]
  end
  mcall('HSET', lk.done, hs, 2)
  mcall('ZADD', lk.doneq, zs, 2)
  redis.call('PEXPIRE', lk.done, retention + 1000)
  redis.call('PEXPIRE', lk.doneq, retention + 1000)
end

-- life_notify tells the waiters of the finished ids (fins: a list of
-- { id, state char, data }) on the slot's finish channel, and forgets
-- them: a Wait hears of its id's end once. One HLEN when nobody waits.
local function life_notify(lk, cmd, fins)
  if cmd == '' or #fins == 0 or redis.call('HLEN', lk.waiters) == 0 then return end
  local ids = {}
  for j = 1, #fins do ids[j] = fins[j][1] end
  local w = mcall('HMGET', lk.waiters, ids)
  local gone = {}
  for j = 1, #fins do
    if w[j] then
      local f = fins[j]
      redis.call(cmd, lk.finch, f[2] .. #f[1] .. ':' .. f[1] .. (f[3] or ''))
      gone[#gone + 1] = f[1]
    end
  end
  if #gone > 0 then mcall('HDEL', lk.waiters, gone) end
end

-- life_rolled records how a failed delivery of id (attempt) ended, by
-- rollback_one's answer r: back to wait (a retry, a snooze, or a re-send
-- that came meanwhile) is "retried", the dead queue "dead", a passed
-- expiry "expired", each with the error text; the last two end the
-- message, so its waiters hear of it. A refused or held delivery (0, 7)
-- changed nothing and records nothing.
local function life_rolled(lk, max, cmd, id, attempt, r, err)
  if r ~= 0 and r ~= 7 then life_ended(lk, { id }) end
  if r == 2 or r == 4 or r == 6 then
    life_event(lk, max, 'retried', id, attempt, err)
  elseif r == 3 then
    life_event(lk, max, 'dead', id, attempt, err)
    life_notify(lk, cmd, { { id, 'd', err } })
  elseif r == 5 then
    life_event(lk, max, 'expired', id, attempt)
    life_notify(lk, cmd, { { id, 'e' } })
  end
end
