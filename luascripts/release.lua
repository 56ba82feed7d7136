-- release.lua: return deliveries held since a lookahead fetch (fetch.lua
-- mode 3), never handed to a listener, to store at the score the fetch
-- took them from, without counting an attempt: a consumer that closes, or
-- whose topic was paused, before their instant gives them back for any
-- consumer to deliver on time.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[4g-3..4g] likewise
-- KEYS[3] -> msg HASH        | for group g (a single node: groups may be of
-- KEYS[4] -> wake channel   /  different topics)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> G, the number of groups; then per group: its topic's type
--            (1 range-merge, 3 fixed-time), k, then k triples of id,
--            delivery token, store score (the due ms the fetch took)
-- Returns: one code per held delivery, in order:
--   0 not this delivery's any more (swept or acked by id): nothing changed;
--     or removed by id while held: its tombstone is cleared (confirm.lua)
--   1 back in store at its score
--   2 a re-send of the id waits in store: this delivery's prepare entry is
--     removed and the re-send stands (fixed-time: its due time replaced
--     this one; range-merge: it keeps the earlier of the two due times, as
--     a repeat merges into a waiting message), with this delivery's
--     failures (first-sent time and last error are the re-send's)
-- Every slot whose head changed is woken, so a fetcher (of any client)
-- takes the message at its time. Running twice changes nothing more.
local cmd = ARGV[1]
local G = tonumber(ARGV[2])
local res = {}
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
    local id, token, score = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
    a = a + 3
    local s = redis.call('ZSCORE', prepare, id)
    local code = 0
    if s and token_of(s) == 0 then
      clear_held_tombstone(cmd, store, prepare, channel, id)
    elseif s and token_of(s) == token then
      redis.call('ZREM', prepare, id)
      local at = redis.call('ZSCORE', store, id)
      if at then
        -- A range-merge repeat keeps the earlier due time.
        if merges and tonumber(score) < tonumber(at) then
          redis.call('ZADD', store, score, id)
          at = score
        end
        keep_fails(msg, id, math.fmod(token, 1000), merges and tonumber(at) or nil)
        code = 2
      elseif redis.call('HGET', msg, id) then
        redis.call('ZADD', store, score, id)
        at = score
        code = 1
      end
      if code > 0 then wake_if_head(cmd, channel, store, true, id, tonumber(at)) end
    end
    res[#res + 1] = code
  end
end
return res
