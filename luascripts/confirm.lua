-- confirm.lua: hand over deliveries held since a lookahead fetch (fetch.lua
-- mode 3 moves time-based messages to prepare shortly before they are due;
-- the client holds them) at their instant: each is checked to be still the
-- client's and due by Redis's clock before its listener is called, so what
-- happened to the message meanwhile (a remove, a re-send, a repeat, a lost
-- lease) counts as it would have had it waited in store.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[4g-3..4g] likewise
-- KEYS[3] -> msg HASH        | for group g (a single node: groups may be of
-- KEYS[4] -> wake channel   /  different topics)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> G, the number of groups; then per group: its topic's type
--            (1 range-merge, 3 fixed-time), k, then k triples of id,
--            delivery token, store score (the due ms the fetch took)
-- Returns: { nowUs, { code, ... }, { envelope, token, ... } }: one code per
-- held delivery, in order, and per code 4 the envelope and the delivery's
-- new token, in order:
--   0 gone: the prepare entry is not this delivery's any more (its lease ran
--     out and the sweeper took it, or it was acked by id), or it was removed
--     by id (its tombstone is cleared: this delivery never ran, so no late
--     ack of it can come, and a re-send waiting behind it is woken; were the
--     tombstone another delivery's, that one's late ack reads as gone, not
--     refused); nothing is to be delivered
--   1 deliver it
--   2 not due yet by Redis's clock: hold it on (never delivered early)
--   3 superseded: a fixed-time re-send of the id waits in store (it
--     replaced the due time, as it would have in store): this delivery's
--     prepare entry is removed, not delivered, and the re-send waits for
--     its own time, woken when it heads its slot, with this delivery's
--     failures (its first-sent time and last error are the re-send's)
--   4 merged: a range-merge repeat of the id waits in store (sent while
--     this delivery was held, so within the window): it merges into this
--     delivery, which keeps its due time and takes the repeat's envelope
--     (its body and options), as a repeat merges into a waiting message
local cmd = ARGV[1]
local G = tonumber(ARGV[2])
local now, now_us = now_ms()
local codes, envs = {}, {}
local a = 3
for g = 1, G do
  local store = KEYS[4 * g - 3]
  local prepare = KEYS[4 * g - 2]
  local msg = KEYS[4 * g - 1]
  local channel = KEYS[4 * g]
  local merges = ARGV[a] == '1'
  local k = tonumber(ARGV[a + 1])
  a = a + 2
  for _ = 1, k do
    local id, token, score = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    local s = redis.call('ZSCORE', prepare, id)
    local code
    if s and token_of(s) == 0 then
      clear_held_tombstone(cmd, store, prepare, channel, id)
      code = 0
    elseif not s or token_of(s) ~= token then
      code = 0
    elseif score > now then
      code = 2
    else
      local waiting = redis.call('ZSCORE', store, id)
      if not waiting then
        code = 1
      elseif merges then
        -- The delivery gets a new token: a rerun of this call (its reply
        -- lost) finds the entry not its own and drops it, so the merged
        -- body is delivered by the sweeper's rollback, not lost under the
        -- old one.
        redis.call('ZREM', store, id)
        local t2 = (token + 500000) % TOKEN_MOD
        redis.call('ZADD', prepare, string.format('%d', math.floor(tonumber(s) / TOKEN_MOD)) .. string.format('%06d', t2), id)
        envs[#envs + 1] = keep_fails(msg, id, math.fmod(token, 1000), score) or ''
        envs[#envs + 1] = t2
        code = 4
      else
        redis.call('ZREM', prepare, id)
        keep_fails(msg, id, math.fmod(token, 1000))
        wake_if_head(cmd, channel, store, true, id, tonumber(waiting))
        code = 3
      end
    end
    codes[#codes + 1] = code
  end
end
return { now_us, codes, envs }
