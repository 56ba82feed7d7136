-- release.lua: return deliveries held since a lookahead fetch (fetch.lua
-- mode 3, held tokens: lib.lua), never handed to a listener, to store at
-- the score the fetch took them from, without counting an attempt: a
-- consumer that closes, or whose topic was paused, before their instant
-- gives them back for any consumer to deliver on time.
--
-- KEYS[1] -> store ZSET     \
-- KEYS[2] -> prepare ZSET    | of slot group 1; KEYS[4g-3..4g] likewise
-- KEYS[3] -> msg HASH        | for group g (a single node: groups may be of
-- KEYS[4] -> wake channel   /  different topics)
-- ARGV[1] -> wake command: PUBLISH, SPUBLISH or ''
-- ARGV[2] -> G, the number of groups; then per group: k, then k triples of
--            id, held delivery token, store score (the due ms the fetch
--            took)
-- Returns: one code per held delivery, in order:
--   0 not this delivery's any more (a send or a remove took it back to
--     store, or the sweeper gave it back after its lease ran out): nothing
--     changed
--   1 back in store at its score
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
  local k = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, k do
    local id, token, score = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
    a = a + 3
    local s = redis.call('ZSCORE', prepare, id)
    local code = 0
    if s and token_of(s) == token then
      redis.call('ZREM', prepare, id)
      -- A send takes a held message back to store itself (send_one), so
      -- none waits there for this id; only a lost envelope (never so under
      -- the invariants) leaves nothing to give back.
      if redis.call('HGET', msg, id) then
        redis.call('ZADD', store, score, id)
        wake_if_head(cmd, channel, store, true, id, tonumber(score))
        code = 1
      end
    end
    res[#res + 1] = code
  end
end
return res
