-- confirm.lua: hand over deliveries held since a lookahead fetch (fetch.lua
-- mode 3 moves time-based messages to prepare shortly before they are due,
-- with a held token: lib.lua; the client holds them) at their instant: each
-- is checked to be still the client's and due by Redis's clock before its
-- listener is called, and gets a delivery token below HELD_TOKEN, the mark
-- of a delivery handed to a listener. While held, a message counts as
-- waiting in store: a send merges into it or replaces it and a remove
-- finds it waiting (both take its prepare entry away), and a lease that
-- runs out counts no attempt, so what happened meanwhile is what would
-- have happened in store.
--
-- KEYS[g] -> prepare ZSET of slot group g (a single node: groups may be of
--            different topics)
-- ARGV[1] -> G, the number of groups; then per group: k, then k triples of
--            id, held delivery token, store score (the due ms the fetch
--            took)
-- Returns: { nowUs, { code, ... }, { token, ... } }: one code per held
-- delivery, in order, and per code 1 the token it is delivered with, in
-- order:
--   0 gone: the prepare entry is not this delivery's any more (a send or a
--     remove took it back to store, or its lease ran out and the sweeper
--     gave it back; whatever holds the id there now is another delivery's,
--     left as it is); nothing is to be delivered
--   1 deliver it, with the token that follows: the held token less
--     HELD_TOKEN. A second run of the call (go-redis resends one whose
--     reply was lost) finds that token and answers 1 with it again.
--   2 not due yet by Redis's clock: hold it on (never delivered early)
local G = tonumber(ARGV[1])
local now, now_us = now_ms()
local codes, tokens = {}, {}
local a = 2
for g = 1, G do
  local prepare = KEYS[g]
  local k = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, k do
    local id, token, score = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    local s = redis.call('ZSCORE', prepare, id)
    local cur = s and token_of(s)
    local code = 0
    if cur == token - HELD_TOKEN then
      -- This call's earlier run handed it over.
      code = 1
    elseif cur == token and score > now then
      code = 2
    elseif cur == token then
      -- The lease deadline stays; the token says it was handed over.
      cur = token - HELD_TOKEN
      redis.call('ZADD', prepare, string.format('%d', math.floor(tonumber(s) / TOKEN_MOD)) .. string.format('%06d', cur), id)
      code = 1
    end
    codes[#codes + 1] = code
    if code == 1 then tokens[#tokens + 1] = cur end
  end
end
return { now_us, codes, tokens }
